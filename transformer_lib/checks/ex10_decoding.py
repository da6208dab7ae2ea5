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


def _greedy_cases() -> list[tuple[str, torch.Tensor, int, int, int]]:
    """(description, src (1, S), bos_id, eos_id, max_len): a stop at the end token, no end token, and another sentence
    with another <bos> id and max_len."""
    model, src = PositionalToyModel(), torch.tensor([[3, 7, 5, 9, 4]])  # (1, S)
    endless = greedy_decode(model, src, BOS_ID, NO_END, max_len=8, use_cache=False)  # (1, 9), no end token
    eos_id = int(endless[0, 4])  # the 4th generated token, unlike the first three: the loop must stop there
    return [(f"greedy tokens for one sentence, stopping at the end token {eos_id} (the 4th generated token)", src,
             BOS_ID, eos_id, 8),
            ("with no end token in sight, exactly max_len=8 new tokens", src, BOS_ID, NO_END, 8),
            ("another sentence of 3 tokens, <bos> id 6, max_len=5, no end token", torch.tensor([[2, 8, 1]]), 6, NO_END,
             5)]


def greedy_loop(student_fn: Callable) -> CheckResult:
    """Check a function (model, src (1, S), bos_id, eos_id, max_len) -> (1, 1 + T) ids, greedy, stopping at eos, on
    three sentences."""
    ex = Exercise("greedy_loop")
    with ex.run():
        model = PositionalToyModel()
        for description, src, bos_id, eos_id, max_len in _greedy_cases():
            def decode(toy: PositionalToyModel, src: torch.Tensor = src, bos_id: int = bos_id, eos_id: int = eos_id,
                       max_len: int = max_len) -> torch.Tensor:
                return greedy_decode(toy, src, bos_id, eos_id, max_len=max_len, use_cache=False)

            expected = decode(model)
            mistakes = {
                Hint("take the logits of the LAST position, logits[0, -1]: position 0 only predicts the first word",
                     id="first-position-logits"): decode(_FirstPositionOnly()),
                Hint("feed the whole prefix, tokens, to model.decode: without a cache the newest token alone has lost "
                     "its context", id="newest-token-only"): decode(_NewestTokenOnly()),
                Hint("append each new token to tokens (torch.cat) so the next step reads it",
                     id="token-not-appended"): torch.tensor([[bos_id]]),
                Hint("start the output with <bos>: return the whole sequence the decoder read",
                     id="bos-dropped"): expected[:, 1:],
                Hint("stop when the end token is produced (after appending it)", id="no-stop-at-eos"):
                    decode(model, eos_id=NO_END),
                Hint("append the end token before stopping: the output should end with eos_id",
                     id="eos-not-appended"): expected[:, :-1] if eos_id != NO_END else None,
                Hint("loop max_len times: your loop made one step fewer", id="one-step-short"):
                    decode(model, max_len=max_len - 1) if eos_id == NO_END else None,
                Hint("start from the bos_id passed in, not from the lesson's 1", id="bos-id-hardcoded"):
                    decode(model, bos_id=BOS_ID),
                Hint("generate at most the max_len passed in, not 8", id="max-len-hardcoded"): decode(model, max_len=8),
            }
            got = ex.call(student_fn, model, src.clone(), bos_id, eos_id, max_len)
            if not ex.compare(description, got, expected,
                              hint="feed <bos> plus everything generated so far, take argmax of the LAST position's "
                                   "logits, append, stop right after appending eos_id, at most max_len times",
                              mistakes={hint: value for hint, value in mistakes.items() if value is not None}):
                break  # one sentence's hint is enough
    return ex.result


def _top_cases() -> list[tuple[str, torch.Tensor]]:
    """(description, logits): two rows of 5, and (2, 3, 6) logits not contiguous, one row already filtered (-inf)."""
    generator = torch.Generator().manual_seed(10)
    stored = torch.randn(6, 3, 2, generator=generator)  # (V, rows, batch)
    stored[:2, 1, 0] = float("-inf")  # a row that top-k already filtered
    return [("two rows of 5 logits", torch.tensor([[2.0, -1.0, 0.5, 3.0, 1.0], [0.0, 4.0, -2.0, 1.0, 3.5]])),
            ("(2, 3, 6) logits, not contiguous, a row with two -inf", stored.permute(2, 1, 0))]


def top_k(student_fn: Callable) -> CheckResult:
    """Check a function (logits (..., V), k) -> logits with all but the k largest of each row set to -inf."""
    ex = Exercise("top_k")
    with ex.run():
        for (description, logits), k in zip(_top_cases(), (2, 3), strict=True):
            expected = top_k_filter(logits, k)
            dropped = torch.isinf(expected)
            if not ex.compare(
                f"top-{k} of {description}",
                ex.call(student_fn, logits.clone(), k),
                expected,
                hint="find each row's k-th largest value (logits.topk(k).values[..., -1:]) and fill smaller logits "
                "with -inf",
                mistakes={
                    _ZERO_FILL: logits.masked_fill(dropped, 0.0),
                    Hint("you kept the k smallest logits: keep the largest", id="smallest-kept"):
                        -top_k_filter(-logits, k),
                    Hint("return logits (filtered), not probabilities", id="probabilities-not-logits"):
                        expected.softmax(-1),
                    Hint("you dropped the k-th largest logit too: drop only the logits below it (<, not <=), so that "
                         "k tokens survive", id="kth-logit-dropped"): top_k_filter(logits, k - 1),
                },
            ) or not ex.compare(f"k = V (the whole vocabulary) changes {description}: nothing",
                                ex.call(student_fn, logits.clone(), logits.shape[-1]), logits):
                break  # one input's hint is enough
    return ex.result


def _wrong_nucleus(logits: torch.Tensor, p: float, *, own_mass: bool = False, gather: bool = False) -> torch.Tensor:
    """Top-p with one classic mistake: a token dropped once the mass up to and WITH it passes p (``own_mass``), or the
    sorted mask put back with gather(order), the inverse permutation, instead of scatter (``gather``)."""
    sorted_probs, order = logits.softmax(-1).sort(dim=-1, descending=True)  # (..., V)
    mass = sorted_probs.cumsum(-1) - (0 if own_mass else sorted_probs)
    drop_sorted = mass > p if own_mass else mass >= p
    drop = drop_sorted.gather(-1, order) if gather else drop_sorted.scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))


def top_p(student_fn: Callable) -> CheckResult:
    """Check a function (logits (..., V), p) -> logits outside the nucleus of mass p set to -inf."""
    ex = Exercise("top_p")
    with ex.run():
        probs = torch.tensor([[0.05, 0.40, 0.10, 0.30, 0.15], [0.25, 0.05, 0.45, 0.15, 0.10]])
        logits = probs.log()  # (2, 5); sorted cumulative masses 0.40, 0.70, 0.85, … and 0.45, 0.70, 0.85, …
        cases = [("p = 0.8 on two rows of 5 logits (the nucleus is 3 tokens in each)", logits, 0.8),
                 ("p = 0.3 keeps only the most likely token of each row", logits, 0.3),
                 (f"p = 0.6 on {_top_cases()[1][0]}", _top_cases()[1][1], 0.6)]
        for description, case_logits, p in cases:
            expected = top_p_filter(case_logits, p)
            if not ex.compare(
                f"top-p with {description}",
                ex.call(student_fn, case_logits.clone(), p),
                expected,
                hint="sort the probabilities in decreasing order, keep a token while the mass BEFORE it is below p "
                "(the most likely token is always kept, even when it alone holds more than p), and put the result "
                "back in vocabulary order",
                mistakes={
                    Hint("keep the token that crosses p too: the nucleus is the fewest tokens whose mass reaches p, "
                         "so a token is dropped only when the mass before it already reaches p",
                         id="crossing-token-dropped"): _wrong_nucleus(case_logits, p, own_mass=True),
                    Hint("sort the probabilities (most likely first) before adding them up",
                         id="probabilities-not-sorted"): case_logits.masked_fill(
                             case_logits.softmax(-1).cumsum(-1) - case_logits.softmax(-1) >= p, float("-inf")),
                    Hint("put the kept logits back in vocabulary order (scatter with the sort's indices)",
                         id="left-in-sorted-order"): expected.sort(dim=-1, descending=True).values,
                    Hint("you put the mask back with gather(order): that applies the sort's permutation once more; "
                         "scatter(-1, order, mask) undoes it", id="gathered-not-scattered"):
                        _wrong_nucleus(case_logits, p, gather=True),
                    _ZERO_FILL: expected.masked_fill(torch.isinf(expected), 0.0),
                },
            ):
                break  # one input's hint is enough
    return ex.result


def _wu_penalty(length: int, alpha: float) -> float:
    """Wu et al.'s length penalty ((5 + length) / 6) ** alpha, by which a finished hypothesis's total is divided."""
    return ((5 + length) / 6) ** alpha


def _beam_step_parts(step) -> tuple[torch.Tensor, torch.Tensor, list[float], list[list[int]]]:
    kept, scores, finished = step
    return (torch.as_tensor(kept), torch.as_tensor(scores), [float(s) for s, _ in finished],
            [[int(t) for t in tokens] for _, tokens in finished])


def _beam_cases() -> list[tuple[str, torch.Tensor, torch.Tensor, torch.Tensor, int, int, float]]:
    """(description, prefixes, scores, log_probs, beam_size, eos_id, alpha): three beams of 3 tokens (token 2 is <eos>,
    the best extension of all ends there, and the best prefix keeps no live extension); then two beams of 4 tokens,
    beam size 2, <eos> = 3 and alpha 1.0."""
    return [
        ("3 beams, beam size 3, <eos> = 2, alpha 0.6", torch.tensor([[1, 5, 6], [1, 5, 7], [1, 8, 4]]),
         torch.tensor([-0.5, -1.0, -1.6]),
         torch.tensor([[-9.0, -9.0, -0.3, -2.0, -1.7, -3.0, -2.4],  # (3 beams, V = 7)
                       [-9.0, -9.0, -0.9, -0.6, -3.5, -1.1, -2.8],
                       [-9.0, -9.0, -2.5, -0.2, -1.5, -2.2, -0.4]]), 3, 2, 0.6),
        ("2 beams, beam size 2, <eos> = 3, alpha 1.0", torch.tensor([[1, 6, 5, 4], [1, 4, 4, 2]]),
         torch.tensor([-1.0, -1.3]),
         torch.tensor([[-9.0, -9.0, -1.6, -0.4, -1.4, -2.5],  # (2 beams, V = 6)
                       [-9.0, -9.0, -0.3, -2.9, -1.9, -0.8]]), 2, 3, 1.0),
    ]


def beam_step(student_fn: Callable) -> CheckResult:
    """Check a function (prefixes (beams, t), scores (beams,), log_probs (beams, V), beam_size, eos_id, alpha) ->
    (kept prefixes (k, t + 1), their total log-probabilities (k,), finished [(normalised score, tokens), …]), on two
    steps of other sizes. The parts are compared in order and the first wrong one ends the check: each later part
    follows from it."""
    ex = Exercise("beam_step")
    with ex.run():
        for description, prefixes, scores, log_probs, beam_size, eos, alpha in _beam_cases():
            def reference(scores: torch.Tensor = scores, eos: int = eos, beam_size: int = beam_size,
                          alpha: float = alpha, prefixes: torch.Tensor = prefixes,
                          log_probs: torch.Tensor = log_probs) -> tuple:
                return _beam_step_parts(beam_search_step(prefixes, scores, log_probs, beam_size, eos, alpha))

            kept, kept_scores, finished_scores, finished_tokens = reference()
            got = ex.call(student_fn, prefixes.clone(), scores.clone(), log_probs.clone(), beam_size, eos, alpha)
            if not (isinstance(got, tuple | list) and len(got) == 3):
                ex.require("the step returns (kept prefixes, kept scores, finished)", False,
                           problem=f"got {type(got).__name__}", hint="return a tuple of three things")
                return ex.result
            got_kept, got_scores, got_finished_scores, got_finished_tokens = _beam_step_parts(got)
            length = prefixes.shape[1]  # generated tokens of a finished hypothesis: <eos> yes, <bos> no
            raw_finished = [s * _wu_penalty(length, alpha) for s in finished_scores]  # before the penalty
            parts = [
                (f"{description}: the kept prefixes, best first (those not ending in <eos>)", got_kept, kept,
                 "score each extension by the prefix's total plus the new token's log-probability, take the "
                 "2 * beam_size best over ALL beams, set aside those ending in eos_id, keep the first beam_size "
                 "others",
                 {Hint("add the prefix's total log-probability to the new token's: a beam's score is the sum over all "
                       "its tokens", id="no-running-total"): reference(scores=torch.zeros_like(scores))[0],
                  Hint("an extension ending in <eos> is finished: set it aside instead of keeping it as a live beam",
                       id="eos-kept-alive"): reference(eos=NO_END)[0],
                  Hint("keep the beam_size passed in, not the first step's 3", id="beam-size-hardcoded"):
                      reference(beam_size=3)[0] if beam_size != 3 else None,
                  Hint("use the eos_id passed in, not the first step's 2", id="eos-id-hardcoded"):
                      reference(eos=2)[0] if eos != 2 else None}),
                (f"{description}: their total log-probabilities (raw sums, no length penalty)", got_scores,
                 kept_scores, "the live beams keep their raw total log-probability; the penalty only ranks finished "
                 "hypotheses",
                 {Hint("apply the length penalty to finished hypotheses only: live beams keep their raw totals",
                       id="penalty-on-live-beams"): kept_scores / _wu_penalty(length, alpha)}),
                (f"{description}: the finished hypotheses' tokens", got_finished_tokens, finished_tokens,
                 "visit the candidates best first and stop once beam_size beams are kept", {}),
                (f"{description}: the finished hypotheses' scores, log p / ((5 + length) / 6) ** alpha",
                 got_finished_scores, finished_scores, "length = the generated tokens, <eos> included and <bos> not",
                 {Hint("divide each finished hypothesis's log-probability by ((5 + length) / 6) ** alpha",
                       id="no-length-penalty"): raw_finished,
                  Hint("count the generated tokens only (<eos> yes, <bos> no): len(tokens) - 1",
                       id="bos-counted-in-length"): [s / _wu_penalty(length + 1, alpha) for s in raw_finished],
                  Hint("the penalty is Wu et al.'s ((5 + length) / 6) ** alpha, not length ** alpha",
                       id="plain-length-power"): [s / length**alpha for s in raw_finished],
                  Hint("use the alpha passed in, not the first step's 0.6", id="alpha-hardcoded"):
                      [s / _wu_penalty(length, 0.6) for s in raw_finished] if alpha != 0.6 else None}),
            ]
            for what, got_part, expected_part, hint, mistakes in parts:
                if not ex.compare(what, got_part, expected_part, hint=hint,
                                  mistakes={h: value for h, value in mistakes.items() if value is not None}):
                    return ex.result
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


def _scaled_by_two(x_new, k_cache, v_cache, w_q, w_k, w_v):
    k, v = torch.cat((k_cache, x_new @ w_k), 1), torch.cat((v_cache, x_new @ w_v), 1)
    return _attend(x_new @ w_q, k, v, scale=0.5), k, v  # √d of the first inputs (d = 4), written in


def _attention_cases() -> list[tuple[str, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]]:
    """(description, x (batch, T, d), w_q, w_k, w_v): a batch of 2 of width 4, then one sentence of width 3 whose
    inputs are not contiguous in memory."""
    generator = torch.Generator().manual_seed(10)
    cases = []
    for description, (batch, length, d) in (("a batch of 2, d = 4", (2, 5, 4)),
                                            ("one sentence, d = 3, inputs not contiguous", (1, 4, 3))):
        x = torch.randn(d, length, batch, generator=generator, dtype=torch.float64).permute(2, 1, 0)  # (batch, T, d)
        weights = (torch.randn(d, d, generator=generator, dtype=torch.float64) for _ in range(3))
        cases.append((f"{description}, {length} positions", x, *weights))
    return cases


def cached_attention_step(student_fn: Callable) -> CheckResult:
    """Check a function (x_new (batch, 1, d), k_cache, v_cache (batch, t, d), w_q, w_k, w_v (d, d)) ->
    (output (batch, 1, d), k_cache, v_cache (batch, t + 1, d)): one token of single-head causal self-attention, on two
    inputs. The outputs, then the key cache, then the value cache: the first wrong one ends the check."""
    ex = Exercise("cached_attention_step")
    with ex.run():
        for description, x, w_q, w_k, w_v in _attention_cases():
            length = x.shape[1]
            full = scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v, mask=causal_mask(length))[0]  # (b, T, d)
            got, got_k, got_v = ex.call(_cached_run, student_fn, x, w_q, w_k, w_v,
                                        description=f"your function, fed the {length} positions one at a time")
            twice, not_kept, unscaled, by_d, by_two = (_cached_run(bug, x, w_q, w_k, w_v) for bug in (
                _appended_twice, _not_kept, _unscaled, _divided_by_d, _scaled_by_two))
            output_mistakes = {
                _NOT_KEPT: not_kept[0],
                Hint("divide the scores by √d before the softmax", id="missing-sqrt-d"): unscaled[0],
                Hint("divide the scores by √d, not by d: the scale is the square root of the width",
                     id="divided-by-d"): by_d[0],
                Hint("divide by the square root of these inputs' width, x_new.shape[-1], not by a number written in",
                     id="sqrt-d-hardcoded"): by_two[0],
            }
            if not (ex.compare(
                f"{description}: the outputs of the cached steps = one causal pass",
                got, full,
                hint="project the new token to q, k, v; append k and v to the caches; attend with q over ALL cached "
                "keys, softmax(q Kᵀ / √d) V",
                mistakes=output_mistakes,  # (on the first inputs the number written in is right)
            ) and ex.compare(
                f"{description}: the key cache, each position's key once, in order", got_k, x @ w_k,
                hint="torch.cat((k_cache, x_new @ w_k), dim=1), once per step",
                mistakes={Hint("your cache holds each position twice: append the new key and value once per step "
                               "(attending to every key twice gives the same output, so only the cache shows it)",
                               id="appended-twice"): twice[1],
                          Hint("cache the keys x_new @ w_k, not the inputs x_new: the cache is there so that no "
                               "earlier position is projected again", id="inputs-cached-not-keys"): x},
            ) and ex.compare(f"{description}: the value cache", got_v, x @ w_v,
                             hint="torch.cat((v_cache, x_new @ w_v), dim=1), once per step")):
                break
    return ex.result


def _measured_cache_bytes(num_layers: int, d_model: int, src_len: int, tgt_len: int, batch: int,
                          dtype: torch.dtype = torch.float32) -> int:
    """Decode tgt_len tokens with a cache in a small untrained Transformer of ``dtype``; the bytes its cache tensors
    hold."""
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(
        src_vocab_size=10, tgt_vocab_size=10, d_model=d_model, num_heads=2, num_encoder_layers=1,
        num_decoder_layers=num_layers, d_ff=2 * d_model, dropout=0.0, max_len=max(src_len, tgt_len))).to(dtype).eval()
    torch.random.set_rng_state(generator_state)  # leave the learner's random numbers untouched
    src = torch.arange(batch * src_len).reshape(batch, src_len) % 10  # (batch, S)
    cache = model.new_cache()
    with torch.no_grad():
        memory = model.encode(src)
        for _ in range(tgt_len):
            model.decode(torch.ones(batch, 1, dtype=torch.long), memory, cache=cache)
    return cache_nbytes(cache)


CACHE_CASES = ((3, 16, 5, 7, 5, torch.float32), (3, 8, 10, 3, 1, torch.float32), (2, 8, 4, 6, 3, torch.float16))


def cache_bytes(student_fn: Callable) -> CheckResult:
    """Check a prediction (num_layers, d_model, src_len, tgt_len, batch, bytes_per_number) -> bytes of the KV cache,
    against the cache of a real model after decoding tgt_len tokens, in float32 and in float16."""
    ex = Exercise("cache_bytes")
    with ex.run():
        for layers, d, src_len, tgt_len, batch, dtype in CACHE_CASES:
            measured = _measured_cache_bytes(layers, d, src_len, tgt_len, batch, dtype)
            size = dtype.itemsize
            got = ex.call(student_fn, layers, d, src_len, tgt_len, batch, size)
            each = layers * d * batch * size  # bytes of one position's key (or value) in every layer
            if not ex.compare(
                f"{layers} layers, d_model {d}, {src_len} source and {tgt_len} target positions, batch {batch}, "
                f"{str(dtype).removeprefix('torch.')} ({size} bytes a number): the bytes of the cache tensors",
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
                    Hint("count bytes, not numbers: multiply by bytes_per_number", id="numbers-not-bytes"):
                        2 * (src_len + tgt_len) * each // size,
                    Hint("use the bytes_per_number passed in: float16 takes 2 bytes, not float32's 4",
                         id="bytes-per-number-hardcoded"): 2 * (src_len + tgt_len) * each // size * 4,
                },
            ):
                break  # one size's hint is enough
    return ex.result
