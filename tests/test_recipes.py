"""The character GPT's recipe (lessons 10 and 11): the sizes lesson 11 builds, a seeded run repeated exactly."""

import torch

from transformer_lib import GPTConfig, char_gpt_config, train_char_gpt


def test_char_gpt_config_is_lesson_11s_model():
    assert char_gpt_config(103) == GPTConfig(vocab_size=103, block_size=64, d_model=64, num_heads=4, num_layers=2,
                                             d_ff=256)


def test_train_char_gpt_repeats_itself_on_one_machine():
    first = train_char_gpt(steps=3, device=torch.device("cpu"))
    again = train_char_gpt(steps=3, device=torch.device("cpu"))
    assert first.model.config == char_gpt_config(len(first.tokenizer))
    assert len(first.history.step_loss) == 3 and not first.model.training
    assert abs(len(first.valid) / (len(first.train) + len(first.valid)) - 0.1) < 0.001  # the last tenth held out
    weights, same_weights = first.model.state_dict(), again.model.state_dict()
    for name, weight in weights.items():
        assert torch.equal(weight, same_weights[name]), name  # one code path run twice on one machine
