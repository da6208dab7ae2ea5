"""The lesson 12 checks accept the solutions, spot stubs, and name typical mistakes."""

import torch
import torch.nn.functional as F

from check_helpers import assert_rejected_with, stub
from transformer_lib.checks import ex12_gpt2_and_llms as check
from transformer_lib.checks._feedback import NOT_ATTEMPTED


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


def rms_norm(x, weight, eps, bug=None):
    if bug in ("mean", "both"):
        x = x - x.mean(dim=-1, keepdim=True)
    mean_square = x.pow(2).mean(dim=-1, keepdim=True)
    if bug in ("eps outside", "both"):
        normalised = x / (mean_square.sqrt() + eps)
    else:
        normalised = x / torch.sqrt(mean_square + eps)
    return normalised if bug == "no weight" else normalised * weight


def expand_kv(kv, num_heads, bug=None):
    group = num_heads // kv.shape[1]
    return kv.repeat(1, group, 1, 1) if bug == "tiled" else kv.repeat_interleave(group, dim=1)


def swiglu(x, w_gate, w_up, w_down, bug=None):
    gate, up = x @ w_gate.T, x @ w_up.T
    if bug == "silu on up":
        return (F.silu(up) * gate) @ w_down.T
    if bug == "no silu":
        return (gate * up) @ w_down.T
    if bug == "gelu":
        return (F.gelu(gate) * up) @ w_down.T
    if bug == "added":
        return (F.silu(gate) + up) @ w_down.T
    if bug == "untransposed":
        return (F.silu(x @ w_gate) * (x @ w_up)) @ w_down
    return (F.silu(gate) * up) @ w_down.T


def test_solutions_pass():
    assert check.merge_step(merge).ok
    assert check.fixed_rms_norm(rms_norm).ok
    assert check.expand_kv(expand_kv).ok
    assert check.swiglu(swiglu).ok


def test_stubs_are_not_attempted():
    for check_fn in (check.merge_step, check.fixed_rms_norm, check.expand_kv, check.swiglu):
        result = check_fn(stub)
        assert not result.attempted and not result.ok
        assert any(NOT_ATTEMPTED in line for line in result.lines)


def test_merge_step_mistakes():
    for bug, text in [
        ("first only", "replace every occurrence, not only the first"),
        ("no skip", "after a merge skip both ids of the pair"),
        ("drops the last", "keep the last id when it does not start a pair"),
    ]:
        assert_rejected_with(check.merge_step(lambda ids, pair, new_id, bug=bug: merge(ids, pair, new_id, bug)), text)


def test_rms_norm_mistakes():
    for bug, text in [
        ("both", "both bugs are still there"),
        ("mean", "RMSNorm does not subtract the mean"),
        ("eps outside", "eps goes inside the square root"),
        ("no weight", "multiply by weight at the end"),
    ]:
        assert_rejected_with(check.fixed_rms_norm(lambda x, w, eps, bug=bug: rms_norm(x, w, eps, bug)), text)


def test_expand_kv_mistakes():
    assert_rejected_with(check.expand_kv(lambda kv, h: expand_kv(kv, h, "tiled")), "not the whole stack (repeat)")
    assert_rejected_with(check.expand_kv(lambda kv, h: kv.repeat_interleave(h // kv.shape[1], dim=2)),
                         "along dim 1")


def test_swiglu_mistakes():
    for bug, text in [
        ("silu on up", "the SiLU acts on the gate branch"),
        ("no silu", "apply F.silu to the gate"),
        ("gelu", "not GELU"),
        ("added", "do not add them"),
        ("untransposed", "raised RuntimeError"),
    ]:
        assert_rejected_with(check.swiglu(lambda x, g, u, d, bug=bug: swiglu(x, g, u, d, bug)), text)
