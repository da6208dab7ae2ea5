"""The lesson 12 checks accept the solutions, spot stubs, and name typical mistakes."""

import math
from collections import Counter
from itertools import pairwise

import pytest
import torch
import torch.nn.functional as F
import transformers

from check_helpers import assert_diagnosed, assert_rejected_with, stub
from transformer_lib import GPT, GPTConfig, apply_rope, apply_rope_halves, merge_pair
from transformer_lib.checks import ex12_gpt2_and_llms as check
from transformer_lib.checks._feedback import NOT_ATTEMPTED

# -- solutions, with a switch for each typical mistake --------------------------------------------------------------


def merge(ids, pair, new_id, bug=None):
    merged, i = [], 0
    end = len(ids) - 1 if bug == "drops the last" else len(ids)
    while i < end:
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
            merged.append(new_id)
            i += 1 if bug == "no skip" else 2
            if bug == "first only":
                return merged + list(ids[i:])
        else:
            merged.append(ids[i])
            i += 1
    return merged


def bpe_encode(word, merges, bug=None):
    ranks = {pair: rank for rank, pair in enumerate(merges)}
    first_id = 0 if bug == "rank as id" else 256
    ids = [ord(c) for c in word] if bug == "characters" else list(word.encode("utf-8"))
    if bug == "bytes' pairs only":
        present = set(pairwise(ids))
        for rank, pair in enumerate(merges):
            if pair in present:
                ids = merge_pair(ids, pair, 256 + rank)
        return ids
    if bug == "one scan":
        merged, i = [], 0
        while i < len(ids):
            if i + 1 < len(ids) and (ids[i], ids[i + 1]) in ranks:
                merged.append(256 + ranks[(ids[i], ids[i + 1])])
                i += 2
            else:
                merged.append(ids[i])
                i += 1
        return merged
    while True:
        known = [pair for pair in pairwise(ids) if pair in ranks]
        if not known:
            return ids
        if bug == "leftmost":
            pair = known[0]
        elif bug == "most frequent":
            counts = Counter(known)
            pair = max(counts, key=lambda p: (counts[p], -ranks[p]))
        else:
            pair = min(known, key=ranks.get)
        ids = merge_pair(ids, pair, first_id + ranks[pair])


def rope_halves(x, positions, bug=None):
    d_head, half = x.shape[-1], x.shape[-1] // 2
    j2 = torch.arange(half, dtype=torch.float64) if bug == "exponent j" else torch.arange(0, d_head, 2)
    frequencies = 10000.0 ** (-j2.to(torch.float64) / d_head)  # (half,)
    positions = {"offset": positions + 1, "broken": positions + 1, "arange": torch.arange(x.shape[-2]),
                 "sign": -positions}.get(bug, positions)
    angles = positions.to(torch.float64)[:, None] * frequencies  # (T, half)
    if bug == "degrees":
        angles = angles * math.pi / 180
    cos, sin = angles.cos(), angles.sin()
    if bug in ("broken", "pairs only"):  # the exercise's broken_rope_halves; "pairs only" fixes its positions
        even, odd = x[..., 0::2], x[..., 1::2]
        return torch.cat((even * cos - odd * sin, odd * cos + even * sin), dim=-1)
    if bug == "neighbours":
        even, odd = x[..., 0::2], x[..., 1::2]
        return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)
    first, second = x[..., :half], x[..., half:]
    return torch.cat((first * cos - second * sin, second * cos + first * sin), dim=-1)


def rope_attention(q, k, v, bug=None):
    rotate = apply_rope_halves if bug == "halves" else apply_rope
    q, k_rotated = rotate(q), rotate(k)
    v = apply_rope(v) if bug == "values" else v
    k = k if bug == "queries only" else k_rotated
    return F.scaled_dot_product_attention(q, k, v, is_causal=bug != "not causal")


def gpt2_block_weights(hf_weights, layer, bug=None):
    h = f"transformer.h.{0 if bug == 'layer 0' else layer}."
    order = {"kqv": "kqv", "vqk": "vqk"}.get(bug, "qkv")

    def conv(weight):
        return weight if bug == "no transpose" else weight.T

    pieces = dict(zip(order, hf_weights[h + "attn.c_attn.weight"].chunk(3, dim=1), strict=True))
    biases = dict(zip(order, hf_weights[h + "attn.c_attn.bias"].chunk(3), strict=True))
    weights = {}
    for proj, letter in (("q_proj", "q"), ("k_proj", "k"), ("v_proj", "v")):
        weights[f"self_attn.{proj}.weight"] = conv(pieces[letter])
        weights[f"self_attn.{proj}.bias"] = biases[letter]
    for course, hf in (("self_attn.out_proj", "attn.c_proj"), ("linear1", "mlp.c_fc"), ("linear2", "mlp.c_proj")):
        weights[f"{course}.weight"] = conv(hf_weights[f"{h}{hf}.weight"])
        weights[f"{course}.bias"] = hf_weights[f"{h}{hf}.bias"]
    for course, hf in (("norm1", "ln_1"), ("norm2", "ln_2")):
        weights[f"{course}.weight"] = hf_weights[f"{h}{hf}.weight"]
        weights[f"{course}.bias"] = hf_weights[f"{h}{hf}.bias"]
    if bug == "missing biases":
        weights = {name: value for name, value in weights.items() if not name.endswith("bias")}
    if bug == "c_proj not transposed":
        weights["self_attn.out_proj.weight"] = hf_weights[h + "attn.c_proj.weight"]
    if bug == "query bias zero":
        weights["self_attn.q_proj.bias"] = torch.zeros_like(weights["self_attn.q_proj.bias"])
    return weights


def online_softmax_step(running_max, running_sum, accumulator, scores, values, bug=None):
    chunk_max = scores.amax(dim=-1, keepdim=True)
    new_max = chunk_max if bug == "chunk max only" else torch.maximum(running_max, chunk_max)
    finite = new_max if bug == "masked nan" else torch.where(torch.isinf(new_max), 0.0, new_max)  # 0 if all masked
    if bug == "guard on the chunk's max":  # right until a chunk is all masked after visible keys
        finite = torch.where(torch.isinf(chunk_max), 0.0, new_max)
    factor = torch.exp(running_max - (new_max if bug == "rescale unguarded" else finite))
    if bug == "not rescaled":
        factor = 1.0
    elif bug == "flipped":
        factor = torch.exp(finite - running_max)
    weights = torch.exp(scores - (running_max if bug == "old max" else finite))
    new_sum = running_sum * factor + weights.sum(-1, keepdim=True)
    new_accumulator = accumulator * (1.0 if bug == "accumulator not rescaled" else factor) + weights @ values
    if bug == "normalised":
        new_accumulator = new_accumulator / new_sum
    if bug == "finite max":
        new_max = new_max.clamp(min=-1e30)
    return new_max, new_sum, new_accumulator


SOLUTIONS = {
    check.merge_step: merge,
    check.bpe_encode: bpe_encode,
    check.rope_halves: rope_halves,
    check.rope_attention: rope_attention,
    check.gpt2_block_weights: gpt2_block_weights,
    check.online_softmax_step: online_softmax_step,
}


def test_solutions_pass():
    for check_fn, solution in SOLUTIONS.items():
        assert check_fn(solution).ok, check_fn.__name__


def test_stubs_are_not_attempted():
    for check_fn in SOLUTIONS:
        result = check_fn(stub)
        assert not result.attempted and not result.ok
        assert any(NOT_ATTEMPTED in line for line in result.lines)


def test_the_mapped_block_has_the_names_and_shapes_of_a_course_block():
    s = check.GPT2_SIZES
    config = GPTConfig(vocab_size=s["vocab_size"], block_size=s["block_size"], d_model=s["d_model"], num_heads=2,
                       num_layers=s["num_layers"], d_ff=s["d_ff"], activation="gelu_tanh")
    block = GPT(config).blocks[1].double()
    block.load_state_dict(gpt2_block_weights(check.TINY_GPT2_WEIGHTS, 1))  # strict: every name, every shape


def test_the_tiny_state_dict_has_the_names_and_shapes_of_hugging_faces_gpt2():
    s = check.GPT2_SIZES
    hf = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=s["vocab_size"], n_positions=s["block_size"], n_embd=s["d_model"], n_layer=s["num_layers"],
        n_head=2, n_inner=s["d_ff"], bos_token_id=0, eos_token_id=0))
    expected = {name: tuple(value.shape) for name, value in hf.state_dict().items()}
    assert {name: tuple(value.shape) for name, value in check.TINY_GPT2_WEIGHTS.items()} == expected


@pytest.mark.parametrize("bug, text", [
    ("first only", "replace every occurrence, not only the first"),
    ("no skip", "after a merge, skip both ids of the pair"),
    ("drops the last", "keep the last id when it does not start a pair"),
])
def test_merge_step_mistakes(bug, text):
    result = check.merge_step(lambda ids, pair, new_id: merge(ids, pair, new_id, bug))
    assert_rejected_with(result, text)


@pytest.mark.parametrize("bug, text", [
    ("leftmost", "merge the pair learnt earliest first, wherever it sits in the word"),
    ("most frequent", "the merge list's order decides, not how often a pair occurs"),
    ("bytes' pairs only", "look at the word again after each merge"),
    ("one scan", "one scan from left to right is not enough"),
    ("rank as id", "the token made by merge r has id 256 + r"),
    ("characters", "start from the UTF-8 bytes, not from the characters"),
])
def test_bpe_encode_mistakes(bug, text):
    result = check.bpe_encode(lambda word, merges: bpe_encode(word, merges, bug))
    assert_rejected_with(result, text)


def test_the_encoding_mistakes_differ_from_the_answer_on_the_checked_words():
    """Each mistake gives a wrong answer on at least one word, and the encoding is the core tokenizer's."""
    tokenizer = check._merge_list_tokenizer(check.ENCODE_MERGES)
    assert [tokenizer.vocab[i] for i in bpe_encode("flowerbed", check.ENCODE_MERGES)] == [b"f", b"lower", b"b", b"e",
                                                                                           b"d"]
    for bug in ("leftmost", "most frequent", "bytes' pairs only", "one scan", "rank as id", "characters"):
        assert any(bpe_encode(w, check.ENCODE_MERGES, bug) != tokenizer.encode_piece(w) for w in check.ENCODE_WORDS)


@pytest.mark.parametrize("bug, text", [
    ("broken", "both bugs are still there"),
    ("pairs only", "the positions are right now, but the pairs are still read as neighbours"),
    ("neighbours", "Llama pairs feature m with feature m + d_head/2"),
    ("degrees", "do not convert it as if it were degrees"),
    ("offset", "the pairs are right now, but the positions start at 0"),
    ("arange", "rotate by the positions passed in"),
    ("sign", "the rotation turns the pair forwards"),
    ("exponent j", "the exponent has 2m"),
])
def test_rope_halves_mistakes(bug, text):
    result = check.rope_halves(lambda x, positions: rope_halves(x, positions, bug))
    assert_rejected_with(result, text)


@pytest.mark.parametrize("bug, text", [
    ("values", "RoPE rotates the queries and keys only"),
    ("halves", "these weights were trained in Meta's layout"),
    ("queries only", "rotate the keys as well as the queries"),
    ("not causal", "the model is causal"),
])
def test_rope_attention_mistakes(bug, text):
    result = check.rope_attention(lambda q, k, v: rope_attention(q, k, v, bug))
    assert_rejected_with(result, text)


@pytest.mark.parametrize("bug, text", [
    ("no transpose", "GPT-2's Conv1D stores a weight as (in, out)"),
    ("kqv", "queries first, then keys, then values"),
    ("vqk", "queries first, then keys, then values"),
    ("layer 0", "build the names from the layer argument"),
    ("missing biases", "missing ['linear1.bias'"),
])
def test_gpt2_block_weights_mistakes(bug, text):
    result = check.gpt2_block_weights(lambda w, layer: gpt2_block_weights(w, layer, bug))
    assert_rejected_with(result, text)


def test_online_softmax_step_names_a_missing_rescale_and_wants_three_tensors():
    result = check.online_softmax_step(lambda *args: online_softmax_step(*args, bug="not rescaled"))
    assert_rejected_with(result, "rescale the old sum by exp(old_max - new_max)")
    result = check.online_softmax_step(lambda *args: online_softmax_step(*args)[2])
    assert_rejected_with(result, "returns three tensors")


def test_a_second_failure_shows_the_code_level_step():
    check.rope_halves(lambda x, positions: rope_halves(x, positions, "neighbours"))  # a first failure, at least
    again = check.rope_halves(lambda x, positions: rope_halves(x, positions, "neighbours"))
    assert any("next step: first, second = x[..., :half]" in line for line in again.lines), again.lines


def test_each_mistake_is_diagnosed_as_itself():
    """The grader's class report counts these ids: each typical wrong answer is recognised as its own mistake."""

    def merge_bug(bug):
        return check.merge_step(lambda ids, pair, new_id: merge(ids, pair, new_id, bug))

    def encode_bug(bug):
        return check.bpe_encode(lambda word, merges: bpe_encode(word, merges, bug))

    def rope_bug(bug):
        return check.rope_halves(lambda x, positions: rope_halves(x, positions, bug))

    def attention_bug(bug):
        return check.rope_attention(lambda q, k, v: rope_attention(q, k, v, bug))

    def mapping_bug(bug):
        return check.gpt2_block_weights(lambda w, layer: gpt2_block_weights(w, layer, bug))

    def softmax_bug(bug):
        return check.online_softmax_step(lambda *args: online_softmax_step(*args, bug=bug))

    assert_diagnosed(merge_bug("first only"), "first-occurrence-only")
    assert_diagnosed(merge_bug("no skip"), "no-skip-after-merge")
    assert_diagnosed(merge_bug("drops the last"), "last-id-dropped")
    assert_diagnosed(encode_bug("leftmost"), "leftmost-pair-first")
    assert_diagnosed(encode_bug("most frequent"), "most-frequent-pair-first")
    assert_diagnosed(encode_bug("bytes' pairs only"), "no-recheck-after-merge")
    assert_diagnosed(encode_bug("one scan"), "single-scan")
    assert_diagnosed(encode_bug("rank as id"), "rank-as-id")
    assert_diagnosed(encode_bug("characters"), "characters-not-bytes")
    assert_diagnosed(rope_bug("broken"), "both-bugs-left")
    assert_diagnosed(rope_bug("pairs only"), "neighbours-written-as-halves")
    assert_diagnosed(rope_bug("neighbours"), "neighbour-pairs")
    assert_diagnosed(rope_bug("degrees"), "angles-in-degrees")
    assert_diagnosed(rope_bug("offset"), "position-offset-by-one")
    assert_diagnosed(rope_bug("arange"), "positions-ignored")
    assert_diagnosed(rope_bug("sign"), "rotation-reversed")
    assert_diagnosed(rope_bug("exponent j"), "exponent-without-2")
    assert_diagnosed(attention_bug("values"), "values-rotated")
    assert_diagnosed(attention_bug("halves"), "half-split-layout")
    assert_diagnosed(attention_bug("queries only"), "keys-not-rotated")
    assert_diagnosed(attention_bug("not causal"), "not-causal")
    assert_diagnosed(mapping_bug("no transpose"), "conv1d-not-transposed")
    assert_diagnosed(mapping_bug("kqv"), "qkv-split-order")
    assert_diagnosed(mapping_bug("vqk"), "qkv-split-order")
    assert_diagnosed(mapping_bug("layer 0"), "wrong-layer")
    assert_diagnosed(mapping_bug("missing biases"), "block-names-wrong")
    assert_diagnosed(softmax_bug("not rescaled"), "sum-not-rescaled")
    assert_diagnosed(softmax_bug("flipped"), "rescale-sign-flipped")
    assert_diagnosed(softmax_bug("accumulator not rescaled"), "accumulator-not-rescaled")
    assert_diagnosed(softmax_bug("normalised"), "accumulator-normalised-early")
    assert_diagnosed(softmax_bug("masked nan"), "masked-row-nan")  # right until a row has seen only masked keys
    assert_diagnosed(softmax_bug("rescale unguarded"), "masked-row-nan")  # the weights guarded, the rescale not
    assert_diagnosed(softmax_bug("finite max"), "masked-row-finite-max")


# --- answers right on the lesson's inputs only, right answers written another way, one hint per mistake


def _one_hint(result):
    """The check failed with exactly one diagnosis and printed its hint once; returns the result."""
    assert not result.ok and len(result.diagnoses) == 1, result.lines
    assert sum(line.startswith("  hint:") for line in result.lines) == 1, result.lines
    return result


def test_merge_step_uses_the_new_id_passed_in():
    assert_diagnosed(_one_hint(
        check.merge_step(lambda ids, pair, new_id: merge_pair(ids, pair, 256))), "new-id-hardcoded")
    assert check.merge_step(lambda ids, pair, new_id: merge_pair(list(ids), tuple(pair), new_id)).ok


def _rope_halves_by_hand(x, positions, d_head=None, three_axes=False):
    d_head = d_head or x.shape[-1]
    half = d_head // 2
    angles = positions.double()[:, None] * 10000.0 ** (-torch.arange(half, dtype=torch.float64) / half)
    cos, sin = angles.cos(), angles.sin()
    first, second = (x[:, :, :half], x[:, :, half:]) if three_axes else (x[..., :half], x[..., half:])
    return torch.cat((first * cos - second * sin, second * cos + first * sin), dim=-1)


def test_rope_halves_tries_heads_another_width_and_a_strided_input():
    assert check.rope_halves(_rope_halves_by_hand).ok  # 2m / d_head written as m / half
    assert not check.rope_halves(lambda x, positions: _rope_halves_by_hand(x, positions, d_head=8)).ok
    assert not check.rope_halves(lambda x, positions: _rope_halves_by_hand(x, positions, three_axes=True)).ok
    assert_diagnosed(_one_hint(
        check.rope_halves(lambda x, positions: _rope_halves_by_hand(x, torch.arange(x.shape[-2])))),
        "positions-ignored")


def test_rope_attention_tries_another_length_and_strided_heads():
    def length_six(q, k, v):
        return F.scaled_dot_product_attention(apply_rope(q, torch.arange(6)), apply_rope(k, torch.arange(6)), v,
                                              is_causal=True)

    assert not check.rope_attention(length_six).ok
    mask = torch.ones(6, 6, dtype=torch.bool).tril()
    assert check.rope_attention(lambda q, k, v: F.scaled_dot_product_attention(
        apply_rope(q), apply_rope(k), v, attn_mask=mask[: q.shape[-2], : q.shape[-2]])).ok


def test_bpe_encode_takes_a_one_byte_word_and_hints_once():
    def by_rank(word, merges):
        ranks = {pair: rank for rank, pair in enumerate(merges)}
        ids = list(word.encode("utf-8"))
        while True:
            pairs = [pair for pair in zip(ids, ids[1:], strict=False) if pair in ranks]
            if not pairs:
                return ids
            pair = min(pairs, key=ranks.__getitem__)
            ids = merge_pair(ids, pair, 256 + ranks[pair])

    assert check.bpe_encode(by_rank).ok
    assert _one_hint(check.bpe_encode(lambda word, merges: [ord(c) for c in word])).diagnoses[0]["mistake"] == (
        "other-wrong-answer")


@pytest.mark.parametrize("bug, mistake, where", [
    ("c_proj not transposed", "conv1d-not-transposed", "the first sub-module whose output differs is "
     "blocks.0.self_attn.out_proj; likely transposed-weight: a square weight used as W instead of Wᵀ"),
    ("kqv", "qkv-split-order", "the first sub-module whose output differs is blocks.0.self_attn.q_proj"),
    ("layer 0", "wrong-layer", "the first sub-module whose output differs is blocks.1.norm1"),
    ("query bias zero", "other-wrong-answer", "the first sub-module whose output differs is "
     "blocks.0.self_attn.q_proj; likely missing-bias: a linear layer's bias left out"),
    ("no transpose", "conv1d-not-transposed", "A Block cannot hold your blocks.0.linear1.weight: shape (6, 24) where "
     "its parameter is (24, 6)"),
])
def test_gpt2_block_weights_hint_says_where_the_block_parts_from_the_librarys(bug, mistake, where):
    """A wrong mapping is run as a Block beside the library's: its one hint keeps the check's mistake and adds the
    sub-module compare_models finds first, with the mistake it names there."""
    result = _one_hint(check.gpt2_block_weights(lambda w, layer: gpt2_block_weights(w, layer, bug)))
    assert_diagnosed(result, mistake)
    (hint,) = [line for line in result.lines if line.startswith("  hint:")]
    assert where in hint, hint
    assert where in result.diagnoses[0]["hint"]


def test_online_softmax_step_starts_from_minus_infinity_and_keeps_a_larger_old_maximum():

    def by_where(running_max, running_sum, accumulator, scores, values):  # right, written with where and a clamp
        new_max = torch.where(running_max > scores.max(-1, keepdim=True).values, running_max,
                              scores.max(-1, keepdim=True).values)
        finite = new_max.clamp(min=-1e300)  # a row that has seen only masked keys: exp(-inf - finite) = 0, no NaN
        rescale = (running_max - finite).exp()
        weights = (scores - finite).exp()
        return new_max, rescale * running_sum + weights.sum(1, keepdim=True), rescale * accumulator + weights @ values

    assert check.online_softmax_step(by_where).ok

    def in_place(running_max, running_sum, accumulator, scores, values):  # right, but overwrites its scores
        new_max = torch.maximum(running_max, scores.amax(-1, keepdim=True))
        finite = torch.nan_to_num(new_max, neginf=0.0)
        rescale = torch.exp(running_max - finite)
        weights = scores.sub_(finite).exp_()
        return new_max, running_sum * rescale + weights.sum(-1, keepdim=True), accumulator * rescale + weights @ values

    assert check.online_softmax_step(in_place).ok
    # Guarded by the chunk's own maximum: right on every chunk that starts a row or has a visible key, wrong when a
    # whole chunk is masked after visible keys (a causal mask's later chunks).
    assert not check.online_softmax_step(lambda *a: online_softmax_step(*a, bug="guard on the chunk's max")).ok
    assert_diagnosed(_one_hint(
        check.online_softmax_step(lambda *a: online_softmax_step(*a, bug="chunk max only"))), "chunk-max-only")
    # This chunk weighted with the old maximum: the sum's line names it, no second line blames the accumulator.
    assert_diagnosed(_one_hint(
        check.online_softmax_step(lambda *a: online_softmax_step(*a, bug="old max"))), "chunk-weighted-with-old-max")
