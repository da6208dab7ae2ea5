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
    for check_fn in (check.parameter_count, check.tied_output_logits):
        assert not check_fn(stub).attempted
    assert capsys.readouterr().out.count(NOT_ATTEMPTED) == 2


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
