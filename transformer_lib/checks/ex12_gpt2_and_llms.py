"""Checks for lesson 12's exercises: one BPE merge step, encoding a word with a merge list, RoPE in Llama's layout,
RoPE inside attention, the mapping of GPT-2's weights to the course's names (a wrong mapping is also run as a
course ``Block`` beside the library's, and :func:`~transformer_lib.compare.compare_models` says where they part),
and one online-softmax update step."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from itertools import pairwise
from typing import Any

import torch

from ..attention import scaled_dot_product_attention
from ..bpe import BPETokenizer, merge_pair
from ..chunked_attention import online_softmax_update
from ..compare import MISTAKES, compare_models
from ..gpt import Block, GPTConfig, hf_gpt2_weights
from ..llama import apply_rope_halves
from ..masks import causal_mask
from ..positions import apply_rope, rope_frequencies
from ._feedback import CheckResult, Exercise, Hint, describe_mismatch

NEW_ID = 256

# -- Exercise 1: one merge step ------------------------------------------------------------------------------------


def _merge_first_only(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    for i in range(len(ids) - 1):
        if (ids[i], ids[i + 1]) == pair:
            return [*ids[:i], new_id, *ids[i + 2:]]
    return list(ids)


def _merge_without_skipping(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    return [new_id if (a, b) == pair else a for a, b in zip(ids, [*ids[1:], None], strict=True)]


def _merge_dropping_the_last(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    merged, i = [], 0
    while i < len(ids) - 1:  # the bug: a last id that starts no pair is never appended
        merged.append(new_id if (ids[i], ids[i + 1]) == pair else ids[i])
        i += 2 if merged[-1] == new_id else 1
    return merged


def merge_step(student_fn: Callable) -> CheckResult:
    """Check a function (ids, pair, new_id) -> ids with every non-overlapping occurrence of pair, left to right,
    replaced by new_id."""
    ex = Exercise("merge_step")
    with ex.run():
        cases = [
            ("a pair that occurs three times", [5, 1, 2, 1, 2, 3, 1, 2, 4], (1, 2)),
            ("overlapping candidates: [7, 7, 7] holds the pair (7, 7) once", [7, 7, 7, 9, 7, 7], (7, 7)),
            ("a pair that does not occur", [3, 4, 3, 4], (4, 4)),
            ("new_id 300, the pair at both ends", [8, 2, 5, 8, 2, 8, 2], (8, 2), 300),
        ]
        for what, ids, pair, *more in cases:
            new_id = more[0] if more else NEW_ID
            got = ex.call(student_fn, list(ids), pair, new_id)
            if not ex.compare(
                what,
                got,
                merge_pair(ids, pair, new_id),
                hint=Hint(idea="scan from left to right: a merged pair uses up both of its ids, and every other id "
                          "is kept, in order",
                          code="where (ids[i], ids[i + 1]) == pair, append new_id and move on by 2; otherwise "
                          "append ids[i] and move on by 1"),
                mistakes={
                    Hint(id="first-occurrence-only", idea="replace every occurrence, not only the first"):
                        _merge_first_only(ids, pair, new_id),
                    Hint(id="no-skip-after-merge",
                         idea="after a merge, skip both ids of the pair: the second one is used up",
                         code="i += 2 after appending new_id"): _merge_without_skipping(ids, pair, new_id),
                    Hint(id="last-id-dropped", idea="keep the last id when it does not start a pair",
                         code="loop while i < len(ids), and test i + 1 < len(ids) before reading ids[i + 1]"):
                        _merge_dropping_the_last(ids, pair, new_id),
                } | ({Hint(id="new-id-hardcoded", idea="use the new_id passed in: every merge makes a new id"):
                      merge_pair(ids, pair, NEW_ID)} if new_id != NEW_ID else {}),
            ):
                break  # one case's hint is enough
    return ex.result


# -- Exercise 2: encoding a word with a merge list -------------------------------------------------------------------

ENCODE_MERGES = [  # merge r makes token 256 + r
    (ord("e"), ord("r")),  # 256 "er"
    (ord("l"), ord("o")),  # 257 "lo"
    (ord("w"), ord("e")),  # 258 "we"
    (257, ord("w")),  # 259 "low"
    (259, 256),  # 260 "lower"
    (ord("r"), ord("e")),  # 261 "re"
    (ord("e"), ord("e")),  # 262 "ee"
    (261, ord("f")),  # 263 "ref"
]
ENCODE_WORDS = ["lower", "tower", "referee", "flowerbed", "naïve", "a"]  # each mistake shows on a word as itself;
# "a" is one byte: no pair at all


def _merge_list_tokenizer(merges: list[tuple[int, int]]) -> BPETokenizer:
    """The core's tokenizer for a merge list in which merge r makes token 256 + r."""
    vocab = [bytes([b]) for b in range(256)]
    for a, b in merges:
        vocab.append(vocab[a] + vocab[b])
    if len(set(vocab)) != len(vocab):
        raise ValueError("two merges make the same bytes: token 256 + r would not be merge r's")
    return BPETokenizer(vocab, list(merges))


def _first_known_pair_from_the_left(ids: list[int], ranks: dict[tuple[int, int], int]) -> list[int]:
    while True:
        for i, pair in enumerate(pairwise(ids)):
            if pair in ranks:
                ids = [*ids[:i], NEW_ID + ranks[pair], *ids[i + 2:]]
                break
        else:
            return ids


def _most_frequent_pair_first(ids: list[int], ranks: dict[tuple[int, int], int]) -> list[int]:
    while True:
        counts = Counter(pair for pair in pairwise(ids) if pair in ranks)
        if not counts:
            return ids
        pair = max(counts, key=lambda p: (counts[p], -ranks[p]))  # the most frequent; a tie to the earliest
        ids = merge_pair(ids, pair, NEW_ID + ranks[pair])


def _pairs_of_the_bytes_only(ids: list[int], merges: list[tuple[int, int]]) -> list[int]:
    present = set(pairwise(ids))  # the bug: pairs made by a merge are never looked at
    for rank, pair in enumerate(merges):
        if pair in present:
            ids = merge_pair(ids, pair, NEW_ID + rank)
    return ids


def _one_scan(ids: list[int], ranks: dict[tuple[int, int], int]) -> list[int]:
    merged, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) in ranks:
            merged.append(NEW_ID + ranks[(ids[i], ids[i + 1])])
            i += 2
        else:
            merged.append(ids[i])
            i += 1
    return merged


def _by_rank(ids: list[int], ranks: dict[tuple[int, int], int], first_id: int) -> list[int]:
    while len(ids) > 1:
        pair = min(pairwise(ids), key=lambda p: ranks.get(p, len(ranks)))
        if pair not in ranks:
            break
        ids = merge_pair(ids, pair, first_id + ranks[pair])
    return ids


def bpe_encode(student_fn: Callable) -> CheckResult:
    """Check a function (word, merges) -> ids: the word's UTF-8 bytes, then again and again the adjacent pair learnt
    earliest (merge r makes token 256 + r) merged, until no adjacent pair is in the list."""
    ex = Exercise("bpe_encode")
    with ex.run():
        tokenizer = _merge_list_tokenizer(ENCODE_MERGES)
        ranks = {pair: rank for rank, pair in enumerate(ENCODE_MERGES)}
        for word in ENCODE_WORDS:
            got = ex.call(student_fn, word, list(ENCODE_MERGES))
            data = list(word.encode("utf-8"))
            if not ex.compare(
                f"{word!r}",
                got,
                tokenizer.encode_piece(word),
                hint=Hint(idea="start from the word's UTF-8 bytes; each round, merge the adjacent pair that comes "
                          "first in the merge list; stop when no adjacent pair is in the list",
                          code="ranks = {pair: r for r, pair in enumerate(merges)}; each round: pair = "
                          "min(pairwise(ids), key=lambda p: ranks.get(p, len(merges))), then "
                          "ids = merge(ids, pair, 256 + ranks[pair])"),
                mistakes={
                    Hint(id="leftmost-pair-first",
                         idea="merge the pair learnt earliest first, wherever it sits in the word, not the first "
                         "known pair from the left: in 'tower', e + r (merge 0) goes before w + e (merge 2)",
                         code="each round, choose min(pairwise(ids), key=rank), not the first pair in the list"):
                        _first_known_pair_from_the_left(data, ranks),
                    Hint(id="most-frequent-pair-first",
                         idea="the merge list's order decides, not how often a pair occurs in this word: frequency "
                         "chose the merges during training; encoding replays them by rank",
                         code="choose the pair by its index in merges, not by counting pairs in ids"):
                        _most_frequent_pair_first(data, ranks),
                    Hint(id="no-recheck-after-merge",
                         idea="look at the word again after each merge: a merged token makes new pairs "
                         "(lo + w -> low) that later merges use",
                         code="recompute the adjacent pairs of ids in every round, not once from the bytes"):
                        _pairs_of_the_bytes_only(data, ENCODE_MERGES),
                    Hint(id="single-scan",
                         idea="one scan from left to right is not enough: repeat until no adjacent pair is in the "
                         "merge list, always merging the pair learnt earliest",
                         code="while True: find the earliest-learnt adjacent pair; break if there is none"):
                        _one_scan(data, ranks),
                    Hint(id="rank-as-id",
                         idea="the token made by merge r has id 256 + r: ids 0-255 are the single bytes",
                         code="new_id = 256 + ranks[pair]"): _by_rank(data, ranks, first_id=0),
                    Hint(id="characters-not-bytes",
                         idea="start from the UTF-8 bytes, not from the characters: ï is one character but two "
                         "bytes",
                         code="ids = list(word.encode('utf-8'))"): _by_rank([ord(c) for c in word], ranks, NEW_ID),
                },
            ):
                break  # one word's hint is enough
    return ex.result


# -- Exercise 3: RoPE in Llama's layout ------------------------------------------------------------------------------


def _rope_cases() -> list[tuple[str, torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(12)
    x = torch.randn(2, 5, 8, generator=generator, dtype=torch.float64)  # (batch, T, d_head)
    heads = torch.randn(2, 4, 3, 6, generator=generator, dtype=torch.float64).transpose(1, 2)  # (batch, 3, T=4, 6)
    return [
        ("a (2, 5, 8) input at positions 0 to 4", x, torch.arange(5)),
        ("the same input at positions 7 to 11 (after 7 cached tokens)", x, torch.arange(7, 12)),
        ("(2, 3, 4, 6) queries of 3 heads, d_head 6, not contiguous, at positions 3 to 6", heads, torch.arange(3, 7)),
    ]


def _neighbours_written_as_halves(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """The exercise's broken rotation, less its position bug: pairs (2m, 2m + 1) rotated, then written back as if they
    were (m, m + d_head/2)."""
    rotated = apply_rope(x, positions)  # (..., T, d_head): pairs side by side
    return torch.cat((rotated[..., 0::2], rotated[..., 1::2]), dim=-1)


def rope_halves(student_fn: Callable) -> CheckResult:
    """Check a function (x (..., T, d_head), positions (T,)) -> x rotated as Llama lays RoPE out: feature m with
    feature m + d_head/2, by the angle pos · 10000^(-2m/d_head) (the repaired ``broken_rope_halves`` of the
    exercise, which read neighbouring pairs and rotated by position + 1)."""
    ex = Exercise("rope_halves")
    with ex.run():
        for what, x, positions in _rope_cases():
            got = ex.call(student_fn, x.clone(), positions.clone())
            d_head = x.shape[-1]
            frequencies = rope_frequencies(d_head)  # (d_head/2,)
            if not ex.compare(
                what,
                got,
                apply_rope_halves(x, positions),
                hint=Hint(idea="rotate each pair (feature m, feature m + d_head/2) by the angle "
                          "pos · 10000^(-2m/d_head), in radians, m = 0 … d_head/2 - 1",
                          code="angles = positions[:, None] * 10000 ** (-torch.arange(0, d, 2) / d); first, second "
                          "= x[..., :d // 2], x[..., d // 2:]; return torch.cat((first * cos - second * sin, "
                          "second * cos + first * sin), dim=-1)"),
                mistakes={
                    Hint(id="both-bugs-left",
                         idea="both bugs are still there: the pairs are read as neighbours (2m, 2m + 1), and the "
                         "angle uses the position plus one",
                         code="first, second = x[..., :half], x[..., half:]; angles = positions[:, None] * "
                         "frequencies"):
                        _neighbours_written_as_halves(x, positions + 1),
                    Hint(id="neighbours-written-as-halves",
                         idea="the positions are right now, but the pairs are still read as neighbours (2m, 2m + 1) "
                         "and written back as halves: read them as (m, m + d_head/2) too",
                         code="first, second = x[..., :half], x[..., half:] with half = d_head // 2"):
                        _neighbours_written_as_halves(x, positions),
                    Hint(id="neighbour-pairs",
                         idea="Llama pairs feature m with feature m + d_head/2 (the first half with the second), "
                         "not neighbours 2m and 2m + 1 as lesson 04's apply_rope",
                         code="first, second = x[..., :half], x[..., half:] with half = d_head // 2"):
                        apply_rope(x, positions),
                    Hint(id="angles-in-degrees",
                         idea="the angle pos · 10000^(-2m/d_head) is already in radians, which torch.cos and "
                         "torch.sin take: do not convert it as if it were degrees",
                         code="torch.cos(angles), without a factor π / 180"):
                        apply_rope_halves(x, positions, frequencies=frequencies * math.pi / 180),
                    Hint(id="position-offset-by-one",
                         idea="the pairs are right now, but the positions start at 0: the first token is not "
                         "rotated at all; use the positions given, not one more",
                         code="angles = positions[:, None] * frequencies, without + 1"):
                        apply_rope_halves(x, positions + 1),
                    Hint(id="positions-ignored",
                         idea="rotate by the positions passed in: after a KV cache, the new tokens start later "
                         "than 0",
                         code="use the positions argument, not torch.arange(T)"): apply_rope_halves(x),
                    Hint(id="rotation-reversed",
                         idea="the rotation turns the pair forwards: the first half gets first · cos - second · sin, "
                         "the second half second · cos + first · sin",
                         code="torch.cat((first * cos - second * sin, second * cos + first * sin), dim=-1)"):
                        apply_rope_halves(x, -positions),
                    Hint(id="exponent-without-2",
                         idea="pair m turns by 10000^(-2m/d_head) per position: the exponent has 2m, which is "
                         "torch.arange(0, d_head, 2), over d_head",
                         code="frequencies = 10000.0 ** (-torch.arange(0, d_head, 2) / d_head)"):
                        apply_rope_halves(
                            x, positions,
                            frequencies=10000.0 ** (-torch.arange(d_head // 2, dtype=torch.float64) / d_head)),
                },
            ):
                break  # one input's hint is enough
    return ex.result


# -- Exercise 4: RoPE inside attention -------------------------------------------------------------------------------


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True) -> torch.Tensor:
    mask = causal_mask(q.shape[-2]) if causal else None
    return scaled_dot_product_attention(q, k, v, mask, need_weights=False)[0]


def _rope_attention_case(ex: Exercise, student_fn: Callable, q: torch.Tensor, k: torch.Tensor,
                         v: torch.Tensor) -> bool:
    """Compare the student's RoPE attention of q, k, v (batch, heads, T, d_head) with the library's; True when
    equal."""
    got = ex.call(student_fn, q.clone(), k.clone(), v.clone())
    rotated_q, rotated_k = apply_rope(q), apply_rope(k)
    layout = "" if q.is_contiguous() else ", not contiguous"
    return ex.compare(
        f"causal attention of {tuple(q.shape)} queries, keys and values{layout}",
        got,
        _attention(rotated_q, rotated_k, v),
        hint=Hint(idea="rotate the queries and the keys by their positions 0 … T-1 in Meta's layout, then "
                  "causal scaled dot-product attention on them and the unrotated values",
                  code="F.scaled_dot_product_attention(apply_rope(q), apply_rope(k), v, is_causal=True)"),
        mistakes={
            Hint(id="values-rotated",
                 idea="RoPE rotates the queries and keys only: the values carry content, not position",
                 code="pass v itself to the attention, not apply_rope(v)"):
                _attention(rotated_q, rotated_k, apply_rope(v)),
            Hint(id="half-split-layout",
                 idea="these weights were trained in Meta's layout, which rotates neighbouring features "
                 "(2m, 2m + 1); Hugging Face's half-split layout is another model's convention",
                 code="apply_rope(q), not apply_rope_halves(q)"):
                _attention(apply_rope_halves(q), apply_rope_halves(k), v),
            Hint(id="keys-not-rotated",
                 idea="rotate the keys as well as the queries: only then does a score depend on the offset "
                 "between the two positions", code="apply_rope(k) too"): _attention(rotated_q, k, v),
            Hint(id="not-causal", idea="the model is causal: position i attends to positions 0 … i only",
                 code="is_causal=True, or a lower-triangular mask"):
                _attention(rotated_q, rotated_k, v, causal=False),
        },
    )


def rope_attention(student_fn: Callable) -> CheckResult:
    """Check a function (q, k, v (batch, heads, T, d_head)) -> causal attention (batch, heads, T, d_head) whose queries
    and keys are rotated by RoPE in Meta's layout (lesson 04's apply_rope: neighbouring features), values not."""
    ex = Exercise("rope_attention")
    with ex.run():
        generator = torch.Generator().manual_seed(4)
        for shape, contiguous in (((2, 3, 6, 8), True), ((1, 2, 4, 6), False)):
            q, k, v = (torch.randn(*shape, generator=generator, dtype=torch.float64) for _ in range(3))
            if not contiguous:  # stored (batch, T, heads, d_head), as a projection splits heads before transposing
                q, k, v = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in (q, k, v))
            if not _rope_attention_case(ex, student_fn, q, k, v):
                break  # one input's hint is enough
    return ex.result


# -- Exercise 5: GPT-2's weights under the course's names ------------------------------------------------------------

GPT2_SIZES = {"vocab_size": 11, "block_size": 8, "d_model": 6, "d_ff": 24, "num_layers": 2}
GPT2_CONFIG = GPTConfig(**GPT2_SIZES, num_heads=2, activation="gelu_tanh")  # the exercise's course GPT


def _tiny_gpt2_state_dict(seed: int = 5) -> dict[str, torch.Tensor]:
    """What ``GPT2LMHeadModel.state_dict()`` holds for a tiny GPT-2 (the sizes of ``GPT2_SIZES``), random values:
    its names and shapes; Conv1D weights are (in, out)."""
    s, generator = GPT2_SIZES, torch.Generator().manual_seed(seed)
    d, d_ff = s["d_model"], s["d_ff"]
    shapes = {"transformer.wte.weight": (s["vocab_size"], d), "transformer.wpe.weight": (s["block_size"], d)}
    for i in range(s["num_layers"]):
        h = f"transformer.h.{i}."
        shapes |= {
            h + "ln_1.weight": (d,), h + "ln_1.bias": (d,),
            h + "attn.c_attn.weight": (d, 3 * d), h + "attn.c_attn.bias": (3 * d,),
            h + "attn.c_proj.weight": (d, d), h + "attn.c_proj.bias": (d,),
            h + "ln_2.weight": (d,), h + "ln_2.bias": (d,),
            h + "mlp.c_fc.weight": (d, d_ff), h + "mlp.c_fc.bias": (d_ff,),
            h + "mlp.c_proj.weight": (d_ff, d), h + "mlp.c_proj.bias": (d,),
        }
    shapes |= {"transformer.ln_f.weight": (d,), "transformer.ln_f.bias": (d,)}
    weights = {name: torch.randn(*shape, generator=generator, dtype=torch.float64) for name, shape in shapes.items()}
    weights["lm_head.weight"] = weights["transformer.wte.weight"]  # tied, as GPT-2's
    return weights


TINY_GPT2_WEIGHTS = _tiny_gpt2_state_dict()
"""What the exercise shows: the tiny GPT-2's state dict that the check maps (the check builds its own copy)."""


def _block_weights(hf_weights: dict[str, torch.Tensor], layer: int, **changes: str) -> dict[str, torch.Tensor]:
    """The library's mapping of block ``layer``, under the names within a course ``Block``; ``changes`` maps a wrong
    way of reading one tensor (``transpose`` or ``order``) for the mistakes."""
    prefix = f"blocks.{layer}."
    block = {name[len(prefix):]: value for name, value in hf_gpt2_weights(hf_weights, GPT2_SIZES["num_layers"]).items()
             if name.startswith(prefix)}
    h = f"transformer.h.{layer}."
    if changes.get("transpose"):
        for course, conv in (("self_attn.out_proj", "attn.c_proj"), ("linear1", "mlp.c_fc"),
                             ("linear2", "mlp.c_proj")):
            block[f"{course}.weight"] = hf_weights[f"{h}{conv}.weight"]
        pieces = hf_weights[h + "attn.c_attn.weight"].chunk(3, dim=1)  # (in, out) each, not transposed
        for proj, piece in zip(("q_proj", "k_proj", "v_proj"), pieces, strict=True):
            block[f"self_attn.{proj}.weight"] = piece
    if changes.get("order"):
        weights = [block[f"self_attn.{p}.weight"] for p in ("q_proj", "k_proj", "v_proj")]
        biases = [block[f"self_attn.{p}.bias"] for p in ("q_proj", "k_proj", "v_proj")]
        for proj, source in zip(("q_proj", "k_proj", "v_proj"), changes["order"], strict=True):
            index = "qkv".index(source)
            block[f"self_attn.{proj}.weight"], block[f"self_attn.{proj}.bias"] = weights[index], biases[index]
    return block


def _where_the_block_differs(got: dict, hf_weights: dict[str, torch.Tensor], layer: int) -> str:
    """Where a course ``Block`` holding ``got`` first parts from one holding the library's mapping, both run on the
    same random input: the first sub-module whose output differs and the mistake ``compare_models`` names there (a
    tensor a Block cannot hold is named instead); '' when the outputs agree or ``got`` holds something else."""
    if not all(isinstance(value, torch.Tensor) for value in got.values()):
        return ""
    reference = Block(GPT2_CONFIG).double().eval()
    reference.load_state_dict(_block_weights(hf_weights, layer))
    held = reference.state_dict()
    misfit = next((name for name in held if got[name].shape != held[name].shape), None)
    if misfit is not None:
        return (f"A Block cannot hold your blocks.{layer}.{misfit}: shape {tuple(got[misfit].shape)} where its "
                f"parameter is {tuple(held[misfit].shape)}")
    learner = Block(GPT2_CONFIG).double().eval()
    learner.load_state_dict(got)
    generator = torch.Generator().manual_seed(layer)
    x = torch.randn(2, GPT2_SIZES["block_size"], GPT2_SIZES["d_model"], generator=generator, dtype=torch.float64)
    comparison = compare_models(learner, reference, x)  # (batch, T, d_model) through both blocks
    if not comparison.differs:
        return ""
    likely = "".join(f"; likely {d.mistake}: {MISTAKES[d.mistake]}" for d in comparison.diagnoses)
    return (f"Your tensors in a Block, run beside the library's on the same input: the first sub-module whose output "
            f"differs is blocks.{layer}.{comparison.first.learner}{likely}")


def gpt2_block_weights(student_fn: Callable) -> CheckResult:
    """Check a function (hf_weights, layer) -> {name in a course ``Block``: tensor} for GPT-2's block ``layer``,
    against the library's ``hf_gpt2_weights``."""
    ex = Exercise("gpt2_block_weights")
    with ex.run():
        hf_weights = _tiny_gpt2_state_dict()  # fresh tensors, whatever an answer did to the ones shown
        for layer in range(GPT2_SIZES["num_layers"]):
            got = ex.call(student_fn, dict(hf_weights), layer)
            expected = _block_weights(hf_weights, layer)
            names = set(got) if isinstance(got, dict) else set()
            if not ex.require(
                f"block {layer}: the {len(expected)} names of a course Block",
                isinstance(got, dict) and names == set(expected),
                problem=f"missing {sorted(set(expected) - names)}, not in a Block {sorted(names - set(expected))}"
                if isinstance(got, dict) else f"expected a dict, got {type(got).__name__}",
                hint=Hint(id="block-names-wrong", idea="return a dict whose keys are the names in "
                          "Block(config).state_dict(), such as 'self_attn.q_proj.weight', 'linear1.bias', "
                          "'norm2.weight': every weight and every bias"),
            ):
                break  # one block's hint is enough
            wrong = [name for name in expected
                     if describe_mismatch(got[name], expected[name], atol=1e-12, rtol=0) is not None]
            if not wrong:
                ex.require(f"block {layer}: every tensor equals the library's mapping", True)
                continue
            name = wrong[0]
            mistakes: dict[Hint, torch.Tensor] = {
                Hint(id="conv1d-not-transposed",
                     idea="GPT-2's Conv1D stores a weight as (in, out), the transpose of nn.Linear's (out, in): "
                     "transpose every Conv1D weight, also the square ones, whose shape cannot tell",
                     code="weight.T for c_attn's three pieces, c_proj, c_fc and the MLP's c_proj"):
                    _block_weights(hf_weights, layer, transpose="yes")[name],
                Hint(id="wrong-layer", idea=f"read block {layer}'s weights: build the names from the layer argument",
                     code="f'transformer.h.{layer}.attn.c_attn.weight'"):
                    _block_weights(hf_weights, 0)[name] if layer else expected[name],
            }
            orders = [_block_weights(hf_weights, layer, order=order)[name] for order in ("kqv", "vkq", "qvk", "kvq",
                                                                                       "vqk")]
            swapped = [value for value in orders if describe_mismatch(got[name], value, atol=1e-12, rtol=0) is None]
            order_hint = Hint(id="qkv-split-order",
                              idea="c_attn holds the query, key and value projections side by side, in that order: "
                              "queries first, then keys, then values",
                              code="q, k, v = c_attn_weight.chunk(3, dim=1) (and the bias likewise), then transpose "
                              "each")
            mistakes[order_hint] = (swapped or orders)[0]  # the order the answer took, if it took one
            hint = Hint(idea="split c_attn into queries, keys and values along its output axis, and transpose every "
                        "Conv1D weight into nn.Linear's (out, in)",
                        code="q, k, v = w[h + 'attn.c_attn.weight'].chunk(3, dim=1); "
                        "weights['self_attn.q_proj.weight'] = q.T")
            where = _where_the_block_differs(got, hf_weights, layer)
            if where:  # every hint says where the block parts from the library's
                hint = replace(hint, idea=f"{hint.idea}. {where}")
                mistakes = {replace(h, idea=f"{h.idea}. {where}"): value for h, value in mistakes.items()}
            if not ex.compare(
                f"block {layer}: {name}",
                got[name],
                expected[name],
                atol=1e-12,
                rtol=0,
                hint=hint,
                mistakes=mistakes,
            ):
                break  # one block's hint is enough
    return ex.result


# -- Exercise 6: one online-softmax update ---------------------------------------------------------------------------


def _chunk_cases(masked: bool) -> list[tuple[str, tuple[torch.Tensor, ...], torch.Tensor, torch.Tensor]]:
    """(description, the running statistics before, scores (T_q, C), values (C, d_v)) of two chunks of 4 queries' 7
    keys: the first, from the start (max -inf, sums 0); then the second, which raises one row's maximum (row 0) and
    leaves the others'. ``masked``: some scores are -inf, as a mask makes them, all of row 2's first chunk (a row that
    has seen only masked keys) and all of row 3's second chunk (keys past a query's position under a causal mask)."""
    generator = torch.Generator().manual_seed(11)
    scores = torch.randn(4, 7, generator=generator, dtype=torch.float64)  # (T_q, 7 keys)
    scores[0, 4] = 5.0  # a new maximum arrives in the second chunk
    scores[1:, 1] = 4.0  # the first chunk's maximum stays the largest
    if masked:
        scores[2, :3] = float("-inf")  # row 2: every key of the first chunk masked
        scores[3, 3:] = float("-inf")  # row 3: every key of the second chunk masked
        scores[0, 1] = scores[1, 5] = float("-inf")  # one masked key in each of the other rows
    values = torch.randn(7, 2, generator=generator, dtype=torch.float64)  # (7 keys, d_v)
    start = (torch.full((4, 1), float("-inf"), dtype=torch.float64), torch.zeros(4, 1, dtype=torch.float64),
             torch.zeros(4, 2, dtype=torch.float64))
    after_first = online_softmax_update(*start, scores[:, :3], values[:3])
    kind = "masked keys (row 2's first chunk, row 3's second all masked): " if masked else ""
    return [(f"{kind}the first chunk of 3 keys, from the start (max -inf, sums 0)", start, scores[:, :3], values[:3]),
            (f"{kind}a second chunk of 4 keys: row 0's maximum rises, the other rows keep theirs", after_first,
             scores[:, 3:], values[3:])]


def _chunk_parts(before: tuple[torch.Tensor, ...], scores: torch.Tensor, values: torch.Tensor, expected: tuple,
                 got: tuple) -> list[tuple[str, Any, Any, str, dict[Hint, Any]]]:
    """(what, got, expected, hint, mistakes) for the maximum, the sum and the accumulator of one chunk, in order."""
    old_max, old_sum, old_accumulator = before
    new_max = expected[0]
    finite_max = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)  # 0 where all were masked
    weights = torch.exp(scores - finite_max)  # (T_q, C)
    rescale = torch.exp(old_max - finite_max)  # (T_q, 1)
    nan_weights, nan_rescale = torch.exp(scores - new_max), torch.exp(old_max - new_max)  # NaN where all were masked
    old_max_weights = torch.exp(scores - old_max)  # this chunk weighted with the old maximum
    nan_row = Hint("a row whose keys so far are all masked keeps a maximum of -inf, and exp(-inf - (-inf)) is NaN: "
                   "for such a row, subtract a finite number (0 will do) inside both exp(scores - ·) and "
                   "exp(old_max - ·), so that its weights and its rescale come out 0", id="masked-row-nan")
    finite_row_max = Hint("a row whose keys so far are all masked keeps the maximum -inf, the largest of its scores: "
                          "use a finite stand-in only inside exp, and return the maximum itself",
                          id="masked-row-finite-max")
    return [
        ("the new running maximum", got[0], new_max,
         "the larger of the old maximum and this chunk's maximum (keepdim=True)",
         {Hint("the maximum so far: the larger of the old maximum and this chunk's, not this chunk's alone",
               id="chunk-max-only"): scores.amax(-1, keepdim=True),
          finite_row_max: torch.where(torch.isinf(new_max), got[0], new_max)
              if torch.is_tensor(got[0]) and got[0].shape == new_max.shape else new_max}),
        ("the new running sum", got[1], expected[1],
         "multiply the old sum by exp(old_max - new_max), then add this chunk's exp(scores - new_max) (with a finite "
         "stand-in for new_max inside exp where it is -inf)",
         {nan_row: old_sum * nan_rescale + nan_weights.sum(-1, keepdim=True),
          Hint("rescale the old sum by exp(old_max - new_max): it was computed with the old maximum",
               id="sum-not-rescaled"): old_sum + weights.sum(-1, keepdim=True),
          Hint("the rescaling factor is exp(old_max - new_max), at most 1: yours is upside down",
               id="rescale-sign-flipped"): old_sum / rescale + weights.sum(-1, keepdim=True),
          Hint("weigh this chunk's scores with the NEW maximum, exp(scores - new_max), as the rescaled old "
               "sum is", id="chunk-weighted-with-old-max"):
              old_sum * rescale + old_max_weights.sum(-1, keepdim=True)}),
        ("the new accumulator", got[2], expected[2],
         "rescale the old accumulator like the sum, then add exp(scores - new_max) @ values",
         {nan_row: old_accumulator * nan_rescale + nan_weights @ values,
          Hint("rescale the old accumulator by exp(old_max - new_max) too", id="accumulator-not-rescaled"):
              old_accumulator + weights @ values,
          Hint("keep the accumulator unnormalised: divide by the running sum only once, after the last "
               "chunk", id="accumulator-normalised-early"): expected[2] / expected[1]}),
    ]


def online_softmax_step(student_fn: Callable) -> CheckResult:
    """Check a function (running_max, running_sum, accumulator, scores, values) -> the three updated statistics, on
    two chunks of 4 queries' 7 keys, first without a mask, then with masked keys (-inf scores): a row whose first
    chunk is all masked, and one whose second chunk is. The maximum, the sum and the accumulator are compared in
    order and the first wrong one ends the check (the later ones follow from it); then the function runs both chunks
    on its own results, and accumulator / sum must be the softmax-weighted values."""
    ex = Exercise("online_softmax_step")
    with ex.run():
        for masked in (False, True):
            cases = _chunk_cases(masked)
            for number, (description, before, scores, values) in enumerate(cases):
                expected = online_softmax_update(*before, scores, values)
                got = ex.call(student_fn, *[t.clone() for t in (*before, scores, values)])
                three = isinstance(got, tuple | list) and len(got) == 3
                if (number == 0 or not three) and not ex.require(
                    "returns three tensors (new_max, new_sum, new_accumulator)",
                    three,
                    problem=f"got {type(got).__name__}",
                    hint="return new_max, new_sum, new_accumulator",
                ):
                    return ex.result
                for what, got_part, expected_part, hint, mistakes in _chunk_parts(before, scores, values, expected,
                                                                                   got):
                    if not ex.compare(f"{description}: {what}", got_part, expected_part, hint=hint,
                                      mistakes={h: v for h, v in mistakes.items()
                                                if describe_mismatch(v, expected_part) is not None}):
                        return ex.result
            state = cases[0][1]  # from the start, each chunk from the function's own result of the one before
            for _, _, scores, values in cases:
                state = ex.call(student_fn, *[t.clone() for t in (*state, scores, values)])
            all_scores = torch.cat([scores for _, _, scores, _ in cases], dim=-1)  # (T_q, 7)
            all_values = torch.cat([values for _, _, _, values in cases])  # (7, d_v)
            allowed = torch.isfinite(all_scores)  # (T_q, 7): the keys a mask leaves
            queries = torch.where(allowed, all_scores, 0.0)  # with the identity as keys, the scores themselves
            exact, _ = scaled_dot_product_attention(queries, torch.eye(7, dtype=torch.float64), all_values,
                                                    mask=allowed, scale=1.0)
            ex.compare(f"{'masked keys: ' if masked else ''}both chunks, each from your own result of the one "
                       "before: accumulator / sum equals softmax(all scores) @ values", state[2] / state[1], exact)
    return ex.result
