"""The character-level GPT: causal (no peeking), trainable, and generating from a prompt."""

import pytest
import torch

from transformer_lib.gpt import GPT, CharTokenizer, GPTConfig, generate, random_windows, train_gpt, zen_of_python


@pytest.fixture(scope="module")
def tokenizer() -> CharTokenizer:
    return CharTokenizer(zen_of_python())


def _small_gpt(vocab_size: int) -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size, block_size=16, d_model=32, num_heads=2, num_layers=2, d_ff=64)).eval()


def test_zen_of_python_is_the_text_of_import_this(capsys):
    text = zen_of_python()
    assert text.startswith("The Zen of Python, by Tim Peters")
    assert "Beautiful is better than ugly." in text
    assert capsys.readouterr().out == ""  # importing `this` printed nothing into the caller's output


def test_tokenizer_round_trip_and_unknown_characters(tokenizer):
    text = "Simple is better than complex."
    assert tokenizer.decode(tokenizer.encode(text)) == text
    with pytest.raises(ValueError, match="not in the vocabulary"):
        tokenizer.encode("€")


def test_logits_shape_and_causality(tokenizer):
    model = _small_gpt(len(tokenizer))
    tokens = tokenizer.encode("Flat is better than")[None, :16]  # (1, 16)
    changed = tokens.clone()
    changed[0, 10:] = tokenizer.encode("x")
    logits, changed_logits = model(tokens), model(changed)
    assert logits.shape == (1, 16, len(tokenizer))
    torch.testing.assert_close(logits[:, :10], changed_logits[:, :10])  # the future cannot change the past
    assert not torch.allclose(logits[:, 10:], changed_logits[:, 10:])


def test_context_longer_than_block_size_is_rejected(tokenizer):
    model = _small_gpt(len(tokenizer))
    with pytest.raises(ValueError, match="block_size=16"):
        model(torch.zeros(1, 17, dtype=torch.long))


def test_windows_are_shifted_by_one(tokenizer):
    data = torch.arange(100)
    inputs, targets = random_windows(data, block_size=8, batch_size=4, generator=torch.Generator().manual_seed(0))
    assert inputs.shape == targets.shape == (4, 8)
    assert torch.equal(targets, inputs + 1)


def test_training_lowers_the_loss_and_is_repeatable(tokenizer):
    data = tokenizer.encode(zen_of_python())
    losses = [train_gpt(_small_gpt(len(tokenizer)), data, steps=60, batch_size=16, seed=0) for _ in range(2)]
    assert losses[0] == losses[1]
    assert losses[0][-1] < 0.75 * losses[0][0]


def test_generate_extends_the_prompt(tokenizer):
    model = _small_gpt(len(tokenizer))
    prompt = tokenizer.encode("Beautiful is better than ugly.")[None]  # longer than block_size: cropped inside
    greedy = generate(model, prompt, 5, greedy=True)
    assert greedy.shape == (1, prompt.shape[1] + 5) and torch.equal(greedy[:, : prompt.shape[1]], prompt)
    sampled = [generate(model, prompt, 5, top_k=3, generator=torch.Generator().manual_seed(0)) for _ in range(2)]
    assert torch.equal(sampled[0], sampled[1])


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(num_heads=0), "d_model=32 and num_heads=0 must both be at least 1"),
        (dict(num_heads=3), "d_model=32 is not divisible by num_heads=3: .* e.g. 2 or 4 or 8"),
        (dict(dropout=1.0), r"dropout=1.0 is outside \[0, 1\)"),
        (dict(vocab_size=0), r"vocab_size=0 must be at least 1: pass len\(tokenizer\)"),
        (dict(block_size=0), "block_size=0 must be at least 1"),
    ],
)
def test_impossible_configs_are_clear_errors(overrides, message):
    with pytest.raises(ValueError, match=message):
        GPTConfig(**{"vocab_size": 10, "block_size": 16, "d_model": 32, "num_heads": 2, **overrides})


@pytest.mark.parametrize(
    "tokens, error, message",
    [
        (torch.tensor([[0, 10]]), ValueError, r"token id 10 in tokens is outside the vocabulary of 10 tokens "
                                              r"\(valid ids are 0 … 9\)"),
        (torch.tensor([[-3, 1]]), ValueError, "token id -3 in tokens is outside the vocabulary"),
        (torch.tensor([[0.0, 1.0]]), TypeError, r"got dtype torch.float32: .* tokens.long\(\)"),
        (torch.zeros(2, 0, dtype=torch.long), ValueError, r"tokens is empty, shape \(2, 0\)"),
    ],
)
def test_bad_token_ids_are_clear_errors(tokens, error, message):
    with pytest.raises(error, match=message):
        _small_gpt(10)(tokens)


def test_a_context_longer_than_the_block_names_the_fix():
    with pytest.raises(ValueError, match=r"a context of 17 tokens exceeds block_size=16: pass the last 16 tokens"):
        _small_gpt(10)(torch.zeros(1, 17, dtype=torch.long))
    long_prompt = torch.zeros(1, 40, dtype=torch.long)  # generate() crops the prompt to the block itself
    assert generate(_small_gpt(10), long_prompt, 2, greedy=True).shape == (1, 42)


def test_generate_checks_its_prompt_and_token_count():
    model = _small_gpt(10)
    with pytest.raises(ValueError, match=r"prompt must be shaped \(batch, T\), got shape \(3,\): .* "
                                         r"prompt.unsqueeze\(0\)"):
        generate(model, torch.tensor([1, 2, 3]), 5)
    with pytest.raises(ValueError, match="max_new_tokens=-1 must be >= 0"):
        generate(model, torch.tensor([[1, 2, 3]]), -1)


def test_train_gpt_needs_more_data_than_one_block():
    with pytest.raises(ValueError, match=r"N > block_size=16 .* got shape \(16,\): pass a longer text"):
        train_gpt(_small_gpt(10), torch.zeros(16, dtype=torch.long), steps=1)
