"""Checks for lesson 10's exercises: a greedy decoding loop and the top-k filter."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..decoding import greedy_decode, top_k_filter
from ..model import Transformer, TransformerConfig
from ._feedback import CheckResult, Exercise

BOS_ID, NO_END = 1, -1


def _tiny_model() -> Transformer:
    """A fixed, untrained encoder-decoder: its outputs are arbitrary but repeatable."""
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(10)
    config = TransformerConfig(
        src_vocab_size=12,
        tgt_vocab_size=12,
        d_model=16,
        num_heads=2,
        num_encoder_layers=1,
        num_decoder_layers=1,
        d_ff=32,
        dropout=0.0,
        max_len=16,
    )
    model = Transformer(config).eval()
    torch.random.set_rng_state(generator_state)  # leave the learner's random numbers untouched
    return model


def greedy_loop(student_fn: Callable) -> CheckResult:
    """Check a function (model, src (1, S), bos_id, eos_id, max_len) -> (1, 1 + T) ids, greedy, stopping at eos."""
    ex = Exercise("greedy_loop")
    with ex.run():
        model = _tiny_model()
        src = torch.tensor([[3, 7, 5, 9, 4]])  # (1, S)
        endless = greedy_decode(model, src, BOS_ID, NO_END, max_len=8, use_cache=False)  # (1, 9)
        eos_id = int(endless[0, 4])  # make the 4th generated token the end token, so the loop must stop there
        expected = greedy_decode(model, src, BOS_ID, eos_id, max_len=8, use_cache=False)
        with torch.no_grad():
            got = ex.call(student_fn, model, src, BOS_ID, eos_id, 8)
        ex.compare(
            f"greedy tokens for one sentence, stopping at the end token {eos_id}",
            got,
            expected,
            hint="feed <bos> plus everything generated so far, take argmax of the LAST position's logits, append, "
            "stop right after appending eos_id",
            mistakes={
                "start the output with <bos>: return the whole sequence the decoder read": expected[:, 1:],
                "stop when the end token is produced (after appending it)": endless,
                "append the end token before stopping: the output should end with eos_id": expected[:, :-1],
            },
        )
        with torch.no_grad():
            got = ex.call(student_fn, model, src, BOS_ID, NO_END, 8)
        ex.compare(
            "with no end token in sight, exactly max_len=8 new tokens",
            got,
            endless,
            hint="loop at most max_len times",
        )
    return ex.result


def top_k(student_fn: Callable) -> CheckResult:
    """Check a function (logits (..., V), k) -> logits with all but the k largest of each row set to -inf."""
    ex = Exercise("top_k")
    with ex.run():
        logits = torch.tensor([[2.0, -1.0, 0.5, 3.0, 1.0], [0.0, 4.0, -2.0, 1.0, 3.5]])
        got = ex.call(student_fn, logits.clone(), 2)
        expected = top_k_filter(logits, 2)
        dropped = torch.isinf(expected)
        ex.compare(
            "top-2 of two rows of 5 logits",
            got,
            expected,
            hint="find each row's k-th largest value (logits.topk(k).values[..., -1:]) and fill smaller logits "
            "with -inf",
            mistakes={
                "set the dropped logits to -inf, not 0: exp(0) = 1 still gives them probability": logits.masked_fill(
                    dropped, 0.0
                ),
                "you kept the k smallest logits: keep the largest": -top_k_filter(-logits, 2),
                "return logits (filtered), not probabilities": expected.softmax(-1),
            },
        )
        ex.compare("k = 5 (the whole vocabulary) changes nothing", ex.call(student_fn, logits.clone(), 5), logits)
    return ex.result
