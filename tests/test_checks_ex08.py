"""The lesson 08 checks accept the solutions, spot stubs, and name the typical mistakes."""

import torch

from check_helpers import assert_rejected_with, stub
from transformer_lib.checks import ex08_transformer as check
from transformer_lib.checks._feedback import NOT_ATTEMPTED


def parameter_count_solution(vocab_size, d_model, d_ff, num_layers, tied=True):
    attention = 4 * (d_model * d_model + d_model)
    feed_forward = d_model * d_ff + d_ff + d_ff * d_model + d_model
    norm = 2 * d_model
    encoder_layer = attention + feed_forward + 2 * norm
    decoder_layer = 2 * attention + feed_forward + 3 * norm
    embedding = vocab_size * d_model
    return embedding + num_layers * (encoder_layer + decoder_layer) + (0 if tied else embedding)


def test_stubs_are_not_attempted(capsys):
    for check_fn in (check.parameter_count, check.tied_output_logits, check.output_logits):
        assert not check_fn(stub).attempted
    assert capsys.readouterr().out.count(NOT_ATTEMPTED) == 3


def test_parameter_count_accepts_the_solution_and_names_the_mistakes():
    assert check.parameter_count(parameter_count_solution).ok
    untied = check.parameter_count(lambda *args: parameter_count_solution(*args, tied=False))
    assert_rejected_with(untied, "you counted the output projection separately")


def test_tied_output_logits_accepts_the_solution_and_names_the_mistakes():
    assert check.tied_output_logits(lambda hidden, weight: hidden @ weight.T).ok
    softmaxed = check.tied_output_logits(lambda hidden, weight: torch.softmax(hidden @ weight.T, dim=-1))
    assert_rejected_with(softmaxed, "return logits, not probabilities")
    flattened = check.tied_output_logits(lambda hidden, weight: hidden.flatten(1) @ weight.T)
    assert_rejected_with(flattened, "raised RuntimeError")


def output_logits_solution(decoder_output, weight, bias):
    return decoder_output @ weight.T + bias


def test_output_logits_accepts_the_solution_and_names_the_mistakes():
    assert check.output_logits(output_logits_solution).ok
    assert check.output_logits(torch.nn.functional.linear).ok
    rejections = {
        "you flattened the T positions into one vector per sentence":
            lambda x, weight, bias: x.flatten(1) @ weight.T + bias,
        "your function only runs when T = 1: you flattened":
            lambda x, weight, bias: x.reshape(x.shape[0], -1) @ weight.T,
        "weight is (vocab, d_model), laid out like nn.Linear's: multiply by weight.T":
            lambda x, weight, bias: x @ weight + bias,
        "your function only runs when vocab = d_model: weight is":
            lambda x, weight, bias: torch.nn.functional.linear(x, weight.T, bias),
        "you left out the bias": lambda x, weight, bias: x @ weight.T,
        "return logits, not probabilities":
            lambda x, weight, bias: torch.softmax(output_logits_solution(x, weight, bias), dim=-1),
        "return logits, not log-probabilities":
            lambda x, weight, bias: torch.log_softmax(output_logits_solution(x, weight, bias), dim=-1),
        "your logits are (batch, vocab, T)":
            lambda x, weight, bias: output_logits_solution(x, weight, bias).transpose(1, 2),
        "you merged batch and positions into rows":
            lambda x, weight, bias: x.reshape(-1, x.shape[-1]) @ weight.T + bias,
        "a shape error": lambda x, weight, bias: x.transpose(1, 2) @ weight.T + bias,
    }
    for hint, wrong in rejections.items():
        assert_rejected_with(check.output_logits(wrong), hint)


def test_output_logits_names_the_lecture_notes_head():
    """The broken head of the exercise notebook (a layer with T·d_model inputs) is told it flattened the positions."""
    def per_sentence_head(x, weight, bias):
        batch, length, d_model = x.shape
        layer = torch.nn.Linear(length * d_model, weight.shape[0], dtype=x.dtype)
        return layer(x.reshape(batch, length * d_model))  # (batch, vocab)

    assert_rejected_with(check.output_logits(per_sentence_head), "you flattened the T positions")


def test_output_logits_leaves_the_global_random_state_alone():
    before = torch.random.get_rng_state()
    check.output_logits(output_logits_solution)
    assert torch.equal(torch.random.get_rng_state(), before)
