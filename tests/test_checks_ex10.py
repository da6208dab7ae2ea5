"""The lesson 10 checks accept the solutions, spot stubs, and name typical mistakes."""

import math

import pytest
import torch

from check_helpers import assert_diagnosed, assert_rejected_with, stub
from transformer_lib.checks import ex10_decoding as check
from transformer_lib.checks._feedback import NOT_ATTEMPTED
from transformer_lib.decoding import greedy_decode


def greedy(model, src, bos_id, eos_id, max_len, bug=None):
    memory = model.encode(src)
    tokens = torch.tensor([[bos_id]])
    for _ in range(max_len):
        decoder_input = tokens[:, -1:] if bug == "newest token only" else tokens
        logits = model.decode(decoder_input, memory)
        next_token = logits[0, 0 if bug == "first position" else -1].argmax()
        if bug != "no append":
            tokens = torch.cat((tokens, next_token.view(1, 1)), dim=1)
        if bug != "no stop" and next_token.item() == eos_id:
            break
    return tokens


def top_k(logits, k, fill=float("-inf")):
    kth = logits.topk(k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, fill)


def top_p(logits, p, bug=None):
    if bug == "no sort":
        probs = logits.softmax(-1)
        return logits.masked_fill(probs.cumsum(-1) - probs >= p, float("-inf"))
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    sorted_probs = sorted_logits.softmax(-1)
    if bug == "drops the crossing token":
        drop_sorted = sorted_probs.cumsum(-1) > p
        drop_sorted[..., 0] = False
    else:
        drop_sorted = sorted_probs.cumsum(-1) - sorted_probs >= p
    if bug == "sorted order":
        return sorted_logits.masked_fill(drop_sorted, float("-inf"))
    drop = drop_sorted.scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, 0.0 if bug == "zero" else float("-inf"))


def beam_step(prefixes, scores, log_probs, beam_size, eos_id, alpha, bug=None):
    totals = log_probs if bug == "no running total" else scores[:, None] + log_probs
    best = totals.flatten().topk(2 * beam_size)
    kept, kept_scores, finished = [], [], []
    for score, index in zip(best.values.tolist(), best.indices.tolist(), strict=True):
        if len(kept) == beam_size:
            break
        beam, token = divmod(index, log_probs.shape[1])
        tokens = prefixes[beam].tolist() + [token]
        generated = len(tokens) if bug == "bos counted" else len(tokens) - 1
        penalty = generated**alpha if bug == "plain length" else ((5 + generated) / 6) ** alpha
        if token == eos_id and bug != "eos kept alive":
            finished.append((score if bug == "no penalty" else score / penalty, tokens))
        else:
            kept.append(tokens)
            kept_scores.append(score / penalty if bug == "penalty on live beams" else score)
    return torch.tensor(kept), torch.tensor(kept_scores), finished


def cached_step(x_new, k_cache, v_cache, w_q, w_k, w_v, bug=None):
    q = x_new @ w_q  # (batch, 1, d)
    k_cache = torch.cat((k_cache, x_new @ w_k), dim=1)  # (batch, t + 1, d)
    v_cache = torch.cat((v_cache, x_new @ w_v), dim=1)
    if bug == "appended twice":
        k_cache = torch.cat((k_cache, x_new @ w_k), dim=1)
        v_cache = torch.cat((v_cache, x_new @ w_v), dim=1)
    scale = 1.0 if bug == "unscaled" else 1 / math.sqrt(q.shape[-1])
    weights = ((q @ k_cache.transpose(1, 2)) * scale).softmax(-1)  # (batch, 1, t + 1)
    return weights @ v_cache, k_cache, v_cache


def cache_bytes(num_layers, d_model, src_len, tgt_len, batch, bytes_per_number, bug=None):
    positions = tgt_len if bug == "no cross-attention" else src_len + tgt_len
    return 2 * num_layers * positions * d_model * batch * bytes_per_number


CHECKS = (check.greedy_loop, check.top_k, check.top_p, check.beam_step, check.cached_attention_step,
          check.cache_bytes)


def test_stubs_are_not_attempted(capsys):
    for check_fn in CHECKS:
        assert not check_fn(stub).attempted
    assert capsys.readouterr().out.count(NOT_ATTEMPTED) == len(CHECKS)


@pytest.mark.parametrize(
    ("check_fn", "solution"),
    [(check.greedy_loop, greedy), (check.top_k, top_k), (check.top_p, top_p), (check.beam_step, beam_step),
     (check.cached_attention_step, cached_step), (check.cache_bytes, cache_bytes)],
)
def test_checks_accept_the_solutions(check_fn, solution):
    assert check_fn(solution).ok


def test_the_greedy_check_model_emits_a_different_token_at_each_of_the_first_four_steps():
    model, src = check.PositionalToyModel(), torch.tensor([[3, 7, 5, 9, 4]])
    generated = greedy_decode(model, src, check.BOS_ID, check.NO_END, max_len=8, use_cache=False)[0, 1:5].tolist()
    assert len(set(generated)) == 4


@pytest.mark.parametrize(
    ("bug", "hint"),
    [
        ("first position", "take the logits of the LAST position"),
        ("newest token only", "feed the whole prefix"),
        ("no append", "append each new token"),
        ("no stop", "stop when the end token is produced"),
    ],
)
def test_greedy_loop_names_each_mistake(bug, hint):
    assert_rejected_with(check.greedy_loop(lambda *args: greedy(*args, bug=bug)), hint)


def test_greedy_loop_names_a_missing_bos():
    assert_rejected_with(check.greedy_loop(lambda *args: greedy(*args)[:, 1:]), "start the output with <bos>")


def test_top_k_names_zero_instead_of_minus_infinity():
    assert_rejected_with(check.top_k(lambda logits, k: top_k(logits, k, fill=0.0)), "not 0")


def test_top_k_names_probabilities_instead_of_logits():
    assert_rejected_with(check.top_k(lambda logits, k: top_k(logits, k).softmax(-1)), "not probabilities")


@pytest.mark.parametrize(
    ("bug", "hint"),
    [
        ("drops the crossing token", "keep the token that crosses p too"),
        ("no sort", "sort the probabilities"),
        ("sorted order", "back in vocabulary order"),
        ("zero", "not 0"),
    ],
)
def test_top_p_names_each_mistake(bug, hint):
    assert_rejected_with(check.top_p(lambda logits, p: top_p(logits, p, bug=bug)), hint)


@pytest.mark.parametrize(
    ("bug", "hint"),
    [
        ("no running total", "add the prefix's total log-probability"),
        ("eos kept alive", "set it aside instead of keeping it"),
        ("penalty on live beams", "apply the length penalty to finished hypotheses only"),
        ("no penalty", "divide each finished hypothesis's log-probability by ((5 + length) / 6) ** alpha"),
        ("bos counted", "count the generated tokens only"),
        ("plain length", "Wu et al.'s ((5 + length) / 6) ** alpha, not length ** alpha"),
    ],
)
def test_beam_step_names_each_mistake(bug, hint):
    assert_rejected_with(check.beam_step(lambda *args: beam_step(*args, bug=bug)), hint)


@pytest.mark.parametrize(
    ("bug", "hint"),
    [("appended twice", "your cache holds each position twice"), ("unscaled", "divide the scores by √d")],
)
def test_cached_attention_step_names_each_mistake(bug, hint):
    assert_rejected_with(check.cached_attention_step(lambda *args: cached_step(*args, bug=bug)), hint)


def test_cached_attention_step_names_a_cache_that_does_not_grow():
    assert_rejected_with(check.cached_attention_step(forgets_the_cache), "return the grown caches")


@pytest.mark.parametrize(
    ("wrong", "hint"),
    [
        (lambda n, d, s, t, b, by: cache_bytes(n, d, s, t, b, by, bug="no cross-attention"), "cross-attention"),
        (lambda n, d, s, t, b, by: cache_bytes(n, d, s, t, b, by) // 2, "keys AND values"),
        (lambda n, d, s, t, b, by: cache_bytes(n, d, s, t, b, by) // n, "multiply by the number of layers"),
        (lambda n, d, s, t, b, by: cache_bytes(n, d, s, t, b, by) // b, "multiply by the batch size"),
        (lambda n, d, s, t, b, by: cache_bytes(n, d, s, t, b, by) // by, "count bytes, not numbers"),
    ],
)
def test_cache_bytes_names_each_mistake(wrong, hint):
    assert_rejected_with(check.cache_bytes(wrong), hint)


def no_eos_appended(model, src, bos_id, eos_id, max_len):
    memory = model.encode(src)
    tokens = torch.tensor([[bos_id]])
    for _ in range(max_len):
        next_token = model.decode(tokens, memory)[0, -1].argmax()
        if next_token.item() == eos_id:
            break  # before appending it
        tokens = torch.cat((tokens, next_token.view(1, 1)), dim=1)
    return tokens


def caches_inputs(x_new, k_cache, v_cache, w_q, w_k, w_v):
    k_cache, v_cache = torch.cat((k_cache, x_new), dim=1), torch.cat((v_cache, x_new), dim=1)  # x, not x W^K
    weights = ((x_new @ w_q) @ (k_cache @ w_k).transpose(1, 2) / math.sqrt(x_new.shape[-1])).softmax(-1)
    return weights @ (v_cache @ w_v), k_cache, v_cache


def divided_by_d(x_new, k_cache, v_cache, w_q, w_k, w_v):
    q = x_new @ w_q
    k_cache, v_cache = torch.cat((k_cache, x_new @ w_k), dim=1), torch.cat((v_cache, x_new @ w_v), dim=1)
    weights = (q @ k_cache.transpose(1, 2) / q.shape[-1]).softmax(-1)  # / d instead of / √d
    return weights @ v_cache, k_cache, v_cache


def forgets_the_cache(x_new, k_cache, v_cache, w_q, w_k, w_v):
    output, _, _ = cached_step(x_new, k_cache, v_cache, w_q, w_k, w_v)
    return output, k_cache, v_cache


def test_every_named_mistake_is_diagnosed_as_itself():
    assert_diagnosed(check.greedy_loop(lambda *args: greedy(*args, bug="first position")), "first-position-logits")
    assert_diagnosed(check.greedy_loop(lambda *args: greedy(*args, bug="newest token only")), "newest-token-only")
    assert_diagnosed(check.greedy_loop(lambda *args: greedy(*args, bug="no append")), "token-not-appended")
    assert_diagnosed(check.greedy_loop(lambda *args: greedy(*args)[:, 1:]), "bos-dropped")
    assert_diagnosed(check.greedy_loop(lambda *args: greedy(*args, bug="no stop")), "no-stop-at-eos")
    assert_diagnosed(check.greedy_loop(no_eos_appended), "eos-not-appended")
    assert_diagnosed(check.top_k(lambda logits, k: top_k(logits, k, fill=0.0)), "zero-not-minus-inf")
    assert_diagnosed(check.top_k(lambda logits, k: -top_k(-logits, k)), "smallest-kept")
    assert_diagnosed(check.top_k(lambda logits, k: top_k(logits, k).softmax(-1)), "probabilities-not-logits")
    assert_diagnosed(check.top_k(lambda logits, k: logits.masked_fill(
        logits <= logits.topk(k, dim=-1).values[..., -1:], float("-inf"))), "kth-logit-dropped")
    assert_diagnosed(check.top_p(lambda logits, p: top_p(logits, p, bug="drops the crossing token")),
                     "crossing-token-dropped")
    assert_diagnosed(check.top_p(lambda logits, p: top_p(logits, p, bug="no sort")), "probabilities-not-sorted")
    assert_diagnosed(check.top_p(lambda logits, p: top_p(logits, p, bug="sorted order")), "left-in-sorted-order")
    assert_diagnosed(check.top_p(lambda logits, p: top_p(logits, p, bug="zero")), "zero-not-minus-inf")
    assert_diagnosed(check.beam_step(lambda *args: beam_step(*args, bug="no running total")), "no-running-total")
    assert_diagnosed(check.beam_step(lambda *args: beam_step(*args, bug="eos kept alive")), "eos-kept-alive")
    assert_diagnosed(check.beam_step(lambda *args: beam_step(*args, bug="penalty on live beams")),
                     "penalty-on-live-beams")
    assert_diagnosed(check.beam_step(lambda *args: beam_step(*args, bug="no penalty")), "no-length-penalty")
    assert_diagnosed(check.beam_step(lambda *args: beam_step(*args, bug="bos counted")), "bos-counted-in-length")
    assert_diagnosed(check.beam_step(lambda *args: beam_step(*args, bug="plain length")), "plain-length-power")
    assert_diagnosed(check.cached_attention_step(forgets_the_cache), "cache-not-returned")
    assert_diagnosed(check.cached_attention_step(lambda *args: cached_step(*args, bug="unscaled")), "missing-sqrt-d")
    assert_diagnosed(check.cached_attention_step(divided_by_d), "divided-by-d")
    assert_diagnosed(check.cached_attention_step(lambda *args: cached_step(*args, bug="appended twice")),
                     "appended-twice")
    assert_diagnosed(check.cached_attention_step(caches_inputs), "inputs-cached-not-keys")
    assert_diagnosed(check.cache_bytes(lambda n, d, s, t, b, by: cache_bytes(n, d, s, t, b, by,
                                                                             bug="no cross-attention")),
                     "cross-attention-not-cached")
    assert_diagnosed(check.cache_bytes(lambda n, d, s, t, b, by: cache_bytes(n, d, s, t, b, by) // 2),
                     "keys-or-values-only")
    assert_diagnosed(check.cache_bytes(lambda n, d, s, t, b, by: cache_bytes(n, d, s, t, b, by) // n),
                     "layers-not-counted")
    assert_diagnosed(check.cache_bytes(lambda n, d, s, t, b, by: cache_bytes(n, d, s, t, b, by) // b),
                     "batch-not-counted")
    assert_diagnosed(check.cache_bytes(lambda n, d, s, t, b, by: cache_bytes(n, d, s, t, b, by) // by),
                     "numbers-not-bytes")


# --- answers right on the lesson's inputs only, right answers written another way, one hint per mistake


def _one_hint(result):
    """The check failed with exactly one diagnosis and printed its hint once; returns the result."""
    assert not result.ok and len(result.diagnoses) == 1, result.lines
    assert sum(line.startswith("  hint:") for line in result.lines) == 1, result.lines
    return result


def test_greedy_loop_uses_its_arguments_and_hints_once():
    assert_diagnosed(_one_hint(check.greedy_loop(lambda model, src, bos_id, eos_id, max_len: greedy(
        model, src, 1, eos_id, max_len))), "bos-id-hardcoded")
    assert_diagnosed(_one_hint(check.greedy_loop(lambda model, src, bos_id, eos_id, max_len: greedy(
        model, src, bos_id, eos_id, 8))), "max-len-hardcoded")
    assert_diagnosed(_one_hint(check.greedy_loop(lambda model, src, bos_id, eos_id, max_len: greedy(
        model, src, bos_id, eos_id, max_len - 1))), "one-step-short")
    # The wrong position failed the first sentence; no second line blames the loop's length.
    assert_diagnosed(_one_hint(
        check.greedy_loop(lambda *args: greedy(*args, bug="first position"))), "first-position-logits")


def test_top_k_takes_any_leading_axes_and_a_row_already_filtered():
    def by_scatter(logits, k):
        keep = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, logits.topk(k, dim=-1).indices, True)
        return logits.masked_fill(~keep, float("-inf"))

    assert check.top_k(by_scatter).ok

    def two_dimensional(logits, k):  # [:, -1:] picks the k-th value only of (rows, V) logits
        return logits.masked_fill(logits < logits.topk(k, dim=-1).values[:, -1:], float("-inf"))

    assert not check.top_k(two_dimensional).ok
    assert_diagnosed(_one_hint(check.top_k(lambda logits, k: top_k(logits, k, fill=0.0))), "zero-not-minus-inf")


def _top_p_by_hand(logits, p, gather=False, dim=-1):
    sorted_logits, order = logits.sort(dim=dim, descending=True)
    sorted_probs = sorted_logits.softmax(dim)
    drop_sorted = sorted_probs.cumsum(dim) - sorted_probs >= p
    drop = drop_sorted.gather(dim, order) if gather else drop_sorted.scatter(dim, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))


def test_top_p_names_gather_and_takes_any_leading_axes():
    assert check.top_p(_top_p_by_hand).ok
    assert_diagnosed(_one_hint(
        check.top_p(lambda logits, p: _top_p_by_hand(logits, p, gather=True))), "gathered-not-scattered")
    assert not check.top_p(lambda logits, p: _top_p_by_hand(logits, p, dim=1)).ok  # right on (rows, V) only
    # Zero instead of -inf fails p = 0.8 first; the p = 0.3 line no longer blames keeping the most likely token.
    result = check.top_p(lambda logits, p: top_p(logits, p).masked_fill(top_p(logits, p).isinf(), 0.0))
    assert_diagnosed(_one_hint(result), "zero-not-minus-inf")
    assert not any("most likely token is always kept" in line for line in result.lines)


def test_beam_step_uses_its_arguments_and_stops_at_the_first_wrong_part():
    assert_diagnosed(_one_hint(
        check.beam_step(lambda p, s, lp, k, e, a: beam_step(p, s, lp, 3, e, a))), "beam-size-hardcoded")
    assert_diagnosed(_one_hint(
        check.beam_step(lambda p, s, lp, k, e, a: beam_step(p, s, lp, k, 2, a))), "eos-id-hardcoded")
    assert_diagnosed(_one_hint(
        check.beam_step(lambda p, s, lp, k, e, a: beam_step(p, s, lp, k, e, 0.6))), "alpha-hardcoded")
    result = check.beam_step(lambda p, s, lp, k, e, a: beam_step(p, torch.zeros_like(s), lp, k, e, a))
    assert_diagnosed(_one_hint(result), "no-running-total")  # no later line blames the stop or the length


def test_cached_attention_step_tries_another_width_and_strided_inputs():
    def flattened(x_new, k_cache, v_cache, w_q, w_k, w_v):  # right, written with reshape and baddbmm-free matmuls
        batch, _, d = x_new.shape
        row = x_new.reshape(batch, d)
        k_cache = torch.cat((k_cache, (row @ w_k)[:, None]), dim=1)
        v_cache = torch.cat((v_cache, (row @ w_v)[:, None]), dim=1)
        weights = torch.einsum("bd,btd->bt", row @ w_q, k_cache).div(math.sqrt(d)).softmax(-1)
        return torch.einsum("bt,btd->bd", weights, v_cache)[:, None], k_cache, v_cache

    assert check.cached_attention_step(flattened).ok

    def by_two(x_new, k_cache, v_cache, w_q, w_k, w_v):  # √4 written in
        k_cache, v_cache = torch.cat((k_cache, x_new @ w_k), 1), torch.cat((v_cache, x_new @ w_v), 1)
        return ((x_new @ w_q) @ k_cache.mT / 2).softmax(-1) @ v_cache, k_cache, v_cache

    assert_diagnosed(_one_hint(check.cached_attention_step(by_two)), "sqrt-d-hardcoded")
    assert_diagnosed(_one_hint(check.cached_attention_step(forgets_the_cache)), "cache-not-returned")  # hinted once


def test_cache_bytes_uses_bytes_per_number():
    assert_diagnosed(_one_hint(
        check.cache_bytes(lambda layers, d, s, t, b, n: 2 * layers * (s + t) * d * b * 4)),
        "bytes-per-number-hardcoded")
