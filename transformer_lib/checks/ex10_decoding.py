"""Checks for lesson 10's exercises: the greedy loop, the top-k and top-p filters, one beam-search step, one cached
attention step and a prediction of the KV cache's size."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from ..attention import scaled_dot_product_attention
from ..decoding import beam_search_step, cache_nbytes, greedy_decode, top_k_filter, top_p_filter
from ..masks import causal_mask
from ..model import Transformer, TransformerConfig
from ._feedback import CheckResult, Exercise, Hint

BOS_ID, NO_END = 1, -1
_ZERO_FILL = Hint("set the dropped logits to -inf, not 0: exp(0) = 1 still gives them probability",
                  id="zero-not-minus-inf")


class PositionalToyModel:
    """A stand-in encoder-decoder with the ``encode``/``decode`` methods of ``Transformer``, V = 12 tokens.

    Position i of the decoder input predicts ``(src[i mod S] + 5 i + tgt[0] + … + tgt[i]) mod 12``: the answer
    depends on the source, on the position and on every token read so far, so a loop that reads the wrong position,
    feeds only the newest token or forgets to append one produces another sequence.
    """

    vocab_size = 12

    def eval(self) -> PositionalToyModel:
        return self

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        return src[..., None].float()  # (batch, S, 1)

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor, tgt_mask=None, memory_mask=None, cache=None):
        src = memory[..., 0].long()  # (batch, S)
        positions = torch.arange(tgt.shape[1])  # (T,)
        favourite = (src[:, positions % src.shape[1]] + 5 * positions + tgt.cumsum(dim=1)) % self.vocab_size
        return 4.0 * F.one_hot(favourite, self.vocab_size).float()  # (batch, T, V): one clear winner per position


class _FirstPositionOnly(PositionalToyModel):
    def decode(self, tgt, memory, tgt_mask=None, memory_mask=None, cache=None):
        return super().decode(tgt, memory)[:, :1]  # what a loop reading logits[0, 0] sees


class _NewestTokenOnly(PositionalToyModel):
    def decode(self, tgt, memory, tgt_mask=None, memory_mask=None, cache=None):
        return super().decode(tgt[:, -1:], memory)  # what a loop feeding only tokens[:, -1:] without a cache sees


def greedy_loop(student_fn: Callable) -> CheckResult:
    """Check a function (model, src (1, S), bos_id, eos_id, max_len) -> (1, 1 + T) ids, greedy, stopping at eos."""
    ex = Exercise("greedy_loop")
    with ex.run():
        model, src = PositionalToyModel(), torch.tensor([[3, 7, 5, 9, 4]])  # (1, S)
        endless = greedy_decode(model, src, BOS_ID, NO_END, max_len=8, use_cache=False)  # (1, 9), no end token
        eos_id = int(endless[0, 4])  # the 4th generated token, unlike the first three: the loop must stop there
        expected = greedy_decode(model, src, BOS_ID, eos_id, max_len=8, use_cache=False)  # (1, 5)
        got = ex.call(student_fn, model, src, BOS_ID, eos_id, 8)
        ex.compare(
            f"greedy tokens for one sentence, stopping at the end token {eos_id} (the 4th generated token)",
            got,
            expected,
            hint="feed <bos> plus everything generated so far, take argmax of the LAST position's logits, append, "
            "stop right after appending eos_id",
            mistakes={
                Hint("take the logits of the LAST position, logits[0, -1]: position 0 only predicts the first word",
                     id="first-position-logits"): (
                    greedy_decode(_FirstPositionOnly(), src, BOS_ID, eos_id, max_len=8, use_cache=False)
                ),
                Hint("feed the whole prefix, tokens, to model.decode: without a cache the newest token alone has lost "
                     "its context", id="newest-token-only"): greedy_decode(_NewestTokenOnly(), src, BOS_ID, eos_id,
                                                                           max_len=8, use_cache=False),
                Hint("append each new token to tokens (torch.cat) so the next step reads it",
                     id="token-not-appended"): torch.tensor([[BOS_ID]]),
                Hint("start the output with <bos>: return the whole sequence the decoder read",
                     id="bos-dropped"): expected[:, 1:],
                Hint("stop when the end token is produced (after appending it)", id="no-stop-at-eos"): endless,
                Hint("append the end token before stopping: the output should end with eos_id",
                     id="eos-not-appended"): expected[:, :-1],
            },
        )
        got = ex.call(student_fn, model, src, BOS_ID, NO_END, 8)
        ex.compare("with no end token in sight, exactly max_len=8 new tokens", got, endless,
                   hint="loop at most max_len times")
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
                _ZERO_FILL: logits.masked_fill(dropped, 0.0),
                Hint("you kept the k smallest logits: keep the largest", id="smallest-kept"): -top_k_filter(-logits, 2),
                Hint("return logits (filtered), not probabilities", id="probabilities-not-logits"):
                    expected.softmax(-1),
                Hint("you dropped the k-th largest logit too: drop only the logits below it (<, not <=), so that k "
                     "tokens survive", id="kth-logit-dropped"): top_k_filter(logits, 1),
            },
        )
        ex.compare("k = 5 (the whole vocabulary) changes nothing", ex.call(student_fn, logits.clone(), 5), logits)
    return ex.result


def top_p(student_fn: Callable) -> CheckResult:
    """Check a function (logits (..., V), p) -> logits outside the nucleus of mass p set to -inf."""
    ex = Exercise("top_p")
    with ex.run():
        probs = torch.tensor([[0.05, 0.40, 0.10, 0.30, 0.15], [0.25, 0.05, 0.45, 0.15, 0.10]])
        logits = probs.log()  # (2, 5); sorted cumulative masses 0.40, 0.70, 0.85, … and 0.45, 0.70, 0.85, …
        expected = top_p_filter(logits, 0.8)  # keeps 3 tokens per row: the third one crosses 0.8
        got = ex.call(student_fn, logits.clone(), 0.8)
        ex.compare(
            "top-p with p = 0.8 on two rows of 5 logits (the nucleus is 3 tokens in each)",
            got,
            expected,
            hint="sort the probabilities in decreasing order, keep a token while the mass BEFORE it is below p, "
            "and put the result back in vocabulary order",
            mistakes={
                Hint("keep the token that crosses p too: the nucleus is the fewest tokens whose mass reaches p, so a "
                     "token is dropped only when the mass before it already reaches p",
                     id="crossing-token-dropped"): top_k_filter(logits, 2),
                Hint("sort the probabilities (most likely first) before adding them up",
                     id="probabilities-not-sorted"): logits.masked_fill(probs.cumsum(-1) - probs >= 0.8,
                                                                        float("-inf")),
                Hint("put the kept logits back in vocabulary order (scatter with the sort's indices)",
                     id="left-in-sorted-order"): top_p_filter(logits, 0.8).sort(dim=-1, descending=True).values,
                _ZERO_FILL: expected.masked_fill(torch.isinf(expected), 0.0),
            },
        )
        ex.compare("p = 0.3 keeps only the most likely token of each row", ex.call(student_fn, logits.clone(), 0.3),
                   top_p_filter(logits, 0.3), hint="the most likely token is always kept, even when it alone "
                   "holds more than p")
    return ex.result


def _wu_penalty(length: int, alpha: float) -> float:
    """Wu et al.'s length penalty ((5 + length) / 6) ** alpha, by which a finished hypothesis's total is divided."""
    return ((5 + length) / 6) ** alpha


def _beam_step_parts(step) -> tuple[torch.Tensor, torch.Tensor, list[float], list[list[int]]]:
    kept, scores, finished = step
    return (torch.as_tensor(kept), torch.as_tensor(scores), [float(s) for s, _ in finished],
            [[int(t) for t in tokens] for _, tokens in finished])


def beam_step(student_fn: Callable) -> CheckResult:
    """Check a function (prefixes (beams, t), scores (beams,), log_probs (beams, V), beam_size, eos_id, alpha) ->
    (kept prefixes (k, t + 1), their total log-probabilities (k,), finished [(normalised score, tokens), …])."""
    ex = Exercise("beam_step")
    with ex.run():
        eos, alpha = 2, 0.6
        prefixes = torch.tensor([[1, 5, 6], [1, 5, 7], [1, 8, 4]])  # (3 beams, t = 3)
        scores = torch.tensor([-0.5, -1.0, -1.6])  # (3,) total log-probabilities so far
        log_probs = torch.tensor([  # (3, V = 7) next-token log-probabilities; token 2 is <eos>
            [-9.0, -9.0, -0.3, -2.0, -1.7, -3.0, -2.4],
            [-9.0, -9.0, -0.9, -0.6, -3.5, -1.1, -2.8],
            [-9.0, -9.0, -2.5, -0.2, -1.5, -2.2, -0.4],
        ])
        reference = _beam_step_parts(beam_search_step(prefixes, scores, log_probs, 3, eos, alpha))
        kept, kept_scores, finished_scores, finished_tokens = reference
        got = ex.call(student_fn, prefixes.clone(), scores.clone(), log_probs.clone(), 3, eos, alpha)
        if not (isinstance(got, tuple | list) and len(got) == 3):
            ex.require("the step returns (kept prefixes, kept scores, finished)", False,
                       problem=f"got {type(got).__name__}", hint="return a tuple of three things")
            return ex.result
        got_kept, got_scores, got_finished_scores, got_finished_tokens = _beam_step_parts(got)
        raw = _beam_step_parts(beam_search_step(prefixes, scores, log_probs, 3, NO_END, alpha))
        new_token_only = _beam_step_parts(beam_search_step(prefixes, torch.zeros(3), log_probs, 3, eos, alpha))
        ex.compare(
            "the 3 kept prefixes, best first (those not ending in <eos>)",
            got_kept,
            kept,
            hint="score each extension by the prefix's total plus the new token's log-probability, take the "
            "2 * beam_size best over ALL beams, set aside those ending in eos_id, keep the first beam_size others",
            mistakes={
                Hint("add the prefix's total log-probability to the new token's: a beam's score is the sum over all "
                     "its tokens", id="no-running-total"): new_token_only[0],
                Hint("an extension ending in <eos> is finished: set it aside instead of keeping it as a live beam",
                     id="eos-kept-alive"): raw[0],
            },
        )
        ex.compare(
            "their total log-probabilities (raw sums, no length penalty)",
            got_scores,
            kept_scores,
            hint="the live beams keep their raw total log-probability; the penalty only ranks finished hypotheses",
            mistakes={Hint("apply the length penalty to finished hypotheses only: live beams keep their raw totals",
                           id="penalty-on-live-beams"): kept_scores / _wu_penalty(3, alpha)},
        )
        ex.compare("the finished hypotheses' tokens", got_finished_tokens, finished_tokens,
                   hint="visit the candidates best first and stop once beam_size beams are kept")
        generated = len(finished_tokens[0]) - 1 if finished_tokens else 1
        raw_finished = [s * _wu_penalty(generated, alpha) for s in finished_scores]  # before the penalty
        ex.compare(
            f"the finished hypotheses' scores, log p / ((5 + length) / 6) ** {alpha}",
            got_finished_scores,
            finished_scores,
            hint="length = the generated tokens, <eos> included and <bos> not",
            mistakes={
                Hint("divide each finished hypothesis's log-probability by ((5 + length) / 6) ** alpha",
                     id="no-length-penalty"): raw_finished,
                Hint("count the generated tokens only (<eos> yes, <bos> no): len(tokens) - 1",
                     id="bos-counted-in-length"): [s / _wu_penalty(generated + 1, alpha) for s in raw_finished],
                Hint("the penalty is Wu et al.'s ((5 + length) / 6) ** alpha, not length ** alpha",
                     id="plain-length-power"): [s / generated**alpha for s in raw_finished],
            },
        )
    return ex.result


def _cached_run(step_fn: Callable, x: torch.Tensor, w_q: torch.Tensor, w_k: torch.Tensor, w_v: torch.Tensor):
    """Feed x (batch, T, d) one position at a time to step_fn, from an empty cache; outputs (batch, T, d) and cache."""
    batch, length, d = x.shape
    k_cache, v_cache = x.new_zeros(batch, 0, d), x.new_zeros(batch, 0, d)  # (batch, 0, d)
    outputs = []
    for t in range(length):
        output, k_cache, v_cache = step_fn(x[:, t : t + 1], k_cache, v_cache, w_q, w_k, w_v)
        outputs.append(output)
    return torch.cat(outputs, dim=1), k_cache, v_cache


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    return scaled_dot_product_attention(q, k, v, scale=scale)[0]  # (batch, 1, d): the newest query sees every key


def _appended_twice(x_new, k_cache, v_cache, w_q, w_k, w_v):
    k_cache, v_cache = torch.cat((k_cache, x_new @ w_k), 1), torch.cat((v_cache, x_new @ w_v), 1)
    k, v = torch.cat((k_cache, x_new @ w_k), 1), torch.cat((v_cache, x_new @ w_v), 1)  # the new row a second time
    return _attend(x_new @ w_q, k, v), k, v


def _not_kept(x_new, k_cache, v_cache, w_q, w_k, w_v):
    k, v = torch.cat((k_cache, x_new @ w_k), 1), torch.cat((v_cache, x_new @ w_v), 1)
    return _attend(x_new @ w_q, k, v), k_cache, v_cache  # the grown cache is not returned


def _unscaled(x_new, k_cache, v_cache, w_q, w_k, w_v):
    k, v = torch.cat((k_cache, x_new @ w_k), 1), torch.cat((v_cache, x_new @ w_v), 1)
    return _attend(x_new @ w_q, k, v, scale=1.0), k, v


def _divided_by_d(x_new, k_cache, v_cache, w_q, w_k, w_v):
    k, v = torch.cat((k_cache, x_new @ w_k), 1), torch.cat((v_cache, x_new @ w_v), 1)
    return _attend(x_new @ w_q, k, v, scale=1.0 / x_new.shape[-1]), k, v


_NOT_KEPT = Hint("return the grown caches (old rows plus the new one), so the next step sees every earlier position",
                 id="cache-not-returned")


def cached_attention_step(student_fn: Callable) -> CheckResult:
    """Check a function (x_new (batch, 1, d), k_cache, v_cache (batch, t, d), w_q, w_k, w_v (d, d)) ->
    (output (batch, 1, d), k_cache, v_cache (batch, t + 1, d)): one token of single-head causal self-attention."""
    ex = Exercise("cached_attention_step")
    with ex.run():
        generator = torch.Generator().manual_seed(10)
        x = torch.randn(2, 5, 4, generator=generator, dtype=torch.float64)  # (batch, T, d), distinct positions
        w_q, w_k, w_v = (torch.randn(4, 4, generator=generator, dtype=torch.float64) for _ in range(3))
        full = scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v, mask=causal_mask(5))[0]  # (2, 5, 4)
        got, got_k, got_v = ex.call(_cached_run, student_fn, x, w_q, w_k, w_v,
                                    description="your function, fed the 5 positions one at a time")
        twice, not_kept, unscaled, by_d = (_cached_run(bug, x, w_q, w_k, w_v) for bug in (
            _appended_twice, _not_kept, _unscaled, _divided_by_d))
        ex.compare(
            "outputs of 5 cached steps = one causal pass over the 5 positions",
            got,
            full,
            hint="project the new token to q, k, v; append k and v to the caches; attend with q over ALL cached "
            "keys, softmax(q Kᵀ / √d) V",
            mistakes={
                _NOT_KEPT: not_kept[0],
                Hint("divide the scores by √d before the softmax", id="missing-sqrt-d"): unscaled[0],
                Hint("divide the scores by √d, not by d: the scale is the square root of the width",
                     id="divided-by-d"): by_d[0],
            },
        )
        ex.compare("the key cache after 5 steps: each position's key once, in order", got_k, x @ w_k,
                   hint="torch.cat((k_cache, x_new @ w_k), dim=1), once per step",
                   mistakes={Hint("your cache holds each position twice: append the new key and value once per "
                                  "step (attending to every key twice gives the same output, so only the cache shows "
                                  "it)", id="appended-twice"): twice[1],
                             _NOT_KEPT: not_kept[1],
                             Hint("cache the keys x_new @ w_k, not the inputs x_new: the cache is there so that no "
                                  "earlier position is projected again", id="inputs-cached-not-keys"): x})
        ex.compare("the value cache after 5 steps", got_v, x @ w_v,
                   hint="torch.cat((v_cache, x_new @ w_v), dim=1), once per step")
    return ex.result


def _measured_cache_bytes(num_layers: int, d_model: int, src_len: int, tgt_len: int, batch: int) -> int:
    """Decode tgt_len tokens with a cache in a small untrained Transformer; the bytes its cache tensors hold."""
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(
        src_vocab_size=10, tgt_vocab_size=10, d_model=d_model, num_heads=2, num_encoder_layers=1,
        num_decoder_layers=num_layers, d_ff=2 * d_model, dropout=0.0, max_len=max(src_len, tgt_len))).eval()
    torch.random.set_rng_state(generator_state)  # leave the learner's random numbers untouched
    src = torch.arange(batch * src_len).reshape(batch, src_len) % 10  # (batch, S)
    cache = model.new_cache()
    with torch.no_grad():
        memory = model.encode(src)
        for _ in range(tgt_len):
            model.decode(torch.ones(batch, 1, dtype=torch.long), memory, cache=cache)
    return cache_nbytes(cache)


def cache_bytes(student_fn: Callable) -> CheckResult:
    """Check a prediction (num_layers, d_model, src_len, tgt_len, batch, bytes_per_number) -> bytes of the KV cache,
    against the cache of a real model after decoding tgt_len tokens."""
    ex = Exercise("cache_bytes")
    with ex.run():
        for layers, d, src_len, tgt_len, batch in ((3, 16, 5, 7, 5), (3, 8, 10, 3, 1)):
            measured = _measured_cache_bytes(layers, d, src_len, tgt_len, batch)
            got = ex.call(student_fn, layers, d, src_len, tgt_len, batch, 4)
            each = layers * d * batch * 4  # bytes of one position's key (or value) in every layer
            ex.compare(
                f"{layers} layers, d_model {d}, {src_len} source and {tgt_len} target positions, batch {batch}, "
                "float32: the bytes of the cache tensors",
                got,
                measured,
                hint="per layer: keys and values (2) of every target position (self-attention) and of every source "
                "position (cross-attention), d_model numbers each, for every sentence of the batch",
                mistakes={
                    Hint("the cross-attention keys and values of the source positions are cached too, in every layer",
                         id="cross-attention-not-cached"): 2 * tgt_len * each,
                    Hint("keys AND values: count two tensors per attention", id="keys-or-values-only"):
                        (src_len + tgt_len) * each,
                    Hint("every layer has its own cache: multiply by the number of layers", id="layers-not-counted"):
                        2 * (src_len + tgt_len) * each // layers,
                    Hint("every sentence of the batch has its own rows: multiply by the batch size",
                         id="batch-not-counted"): 2 * (src_len + tgt_len) * each // batch,
                    Hint("count bytes, not numbers: float32 takes 4 bytes", id="numbers-not-bytes"):
                        2 * (src_len + tgt_len) * each // 4,
                },
            )
    return ex.result
