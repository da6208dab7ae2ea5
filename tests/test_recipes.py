"""The character GPT's recipe (lessons 10 and 11): the sizes lesson 11 builds, a seeded run repeated exactly."""

import pytest
import torch

from transformer_lib import GPTConfig, char_gpt_config, train_char_gpt
from transformer_lib.model_cache import CACHE_VARIABLE


def test_char_gpt_config_is_lesson_11s_model():
    assert char_gpt_config(103) == GPTConfig(vocab_size=103, block_size=64, d_model=64, num_heads=4, num_layers=2,
                                             d_ff=256)


def test_train_char_gpt_repeats_itself_on_one_machine(monkeypatch, tmp_path):
    runs = []
    for cache in ("first", "again"):  # an empty cache each time: both runs train
        monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path / cache))
        runs.append(train_char_gpt(steps=3, device=torch.device("cpu")))
    first, again = runs
    assert first.history.seconds != again.history.seconds  # two runs, not one run loaded
    assert first.model.config == char_gpt_config(len(first.tokenizer))
    assert len(first.history.step_loss) == 3 and not first.model.training
    assert abs(len(first.valid) / (len(first.train) + len(first.valid)) - 0.1) < 0.001  # the last tenth held out
    weights, same_weights = first.model.state_dict(), again.model.state_dict()
    for name, weight in weights.items():
        assert torch.equal(weight, same_weights[name]), name  # one code path run twice on one machine


def test_a_config_for_another_vocabulary_is_refused_with_the_fix():
    with pytest.raises(ValueError, match=r"config.vocab_size=5, but Python's documentation has \d+ distinct "
                                         r"characters: pass GPTConfig\(vocab_size=len\(CharTokenizer"):
        train_char_gpt(steps=1, config=GPTConfig(vocab_size=5, block_size=8, d_model=8, num_heads=2))
