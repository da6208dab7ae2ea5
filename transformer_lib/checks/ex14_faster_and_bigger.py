"""Checks for lesson 14's exercises: the accept/reject rule of speculative sampling, the expected tokens per target
call, per-channel int8 scales, and the gradient average across processes."""

from __future__ import annotations

import threading
from collections.abc import Callable

import torch
from torch import nn

from ..quantization import dequantize_int8, quantize_int8
from ..speculative import acceptance_probability, expected_tokens_per_call, residual_distribution
from ._feedback import CheckResult, Exercise, Hint

# p, the target's probabilities, and q, the draft's: the draft over-proposes tokens 1 and 3 (q > p), under-proposes 0
P = torch.tensor([0.40, 0.10, 0.25, 0.05, 0.20], dtype=torch.float64)
Q = torch.tensor([0.20, 0.30, 0.25, 0.15, 0.10], dtype=torch.float64)


def acceptance_rule(student_fn: Callable) -> CheckResult:
    """Check a function (p (V,), q (V,)) -> (accept (V,), correction (V,)): the probability of keeping each proposed
    token and the distribution a rejected proposal's replacement is drawn from."""
    ex = Exercise("acceptance_rule")
    with ex.run():
        got = ex.call(student_fn, P.clone(), Q.clone())
        if not ex.require("returns two tensors (accept, correction)", isinstance(got, tuple | list) and len(got) == 2,
                          hint="return accept, correction"):
            return ex.result
        accept, correction = got
        expected_accept = acceptance_probability(P, Q)
        ex.compare(
            "the probability of keeping each proposed token", accept, expected_accept,
            hint=Hint(idea="keep a token for sure where the draft under-proposes it (q <= p); where q > p keep it "
                           "only with probability p/q", code="torch.clamp(p / q, max=1.0)"),
            mistakes={
                Hint(idea="accepting when q > p without the probability p/q: then the draft's over-proposed tokens "
                          "come out as often as the draft proposes them, not as the target wants",
                     code="accept = torch.minimum(torch.ones_like(p), p / q)", id="accept-without-ratio"):
                    torch.ones_like(P),
                Hint(idea="cap the ratio at 1: a probability cannot exceed 1 (where q < p the token is always kept)",
                     id="uncapped-ratio"): P / Q,
                Hint(idea="the ratio is p / q (target over draft), not q / p", id="inverted-ratio"): (
                    torch.clamp(Q / P, max=1.0)),
            },
        )
        missing = (P - Q).clamp(min=0)
        ex.compare(
            "the distribution of the correction after a rejection", correction, residual_distribution(P, Q),
            hint=Hint(idea="draw the correction from what the target wants and the accepted proposals did not give: "
                           "max(0, p - q), renormalised", code="r = (p - q).clamp(min=0); correction = r / r.sum()"),
            mistakes={
                Hint(idea="sampling the correction from p counts the accepted tokens' probability twice: use "
                          "max(0, p - q), renormalised", code="r = (p - q).clamp(min=0); correction = r / r.sum()",
                     id="correction-from-p"): P,
                Hint(idea="renormalise max(0, p - q) so it sums to 1", id="residual-not-normalised"): missing,
                Hint(idea="it is max(0, p - q): the tokens the draft under-proposed need the extra probability",
                     id="residual-inverted"): (Q - P).clamp(min=0) / (Q - P).clamp(min=0).sum(),
            },
        )
        output = Q * accept + (1 - (Q * accept).sum()) * correction  # kept proposals plus corrections
        ex.compare("the tokens come out distributed exactly as p", output, P,
                   hint="with the right accept and correction, q·accept + P(reject)·correction equals p")
    return ex.result


def tokens_per_call(student_fn: Callable) -> CheckResult:
    """Check a function (acceptance a, k) -> the expected tokens one target call adds, proposals kept independently
    with probability a."""
    ex = Exercise("tokens_per_call")
    with ex.run():
        for a, k in ((0.6, 4), (0.9, 2), (0.0, 3), (1.0, 5)):
            got = ex.call(student_fn, a, k)
            ex.compare(
                f"acceptance {a}, k = {k}", got, expected_tokens_per_call(a, k),
                hint=Hint(idea="the i-th proposal is used only if the first i were all kept (probability a^i); the "
                               "target adds one token of its own every call",
                          code="sum(a ** i for i in range(k + 1))"),
                mistakes={
                    Hint(idea="count the target's own token: every call adds one, even when the first proposal is "
                              "rejected", id="no-own-token"): expected_tokens_per_call(a, k) - 1,
                    Hint(idea="a later proposal counts only if every earlier one was kept: a^i, not a each",
                         id="independent-terms"): 1 + a * k,
                    Hint(idea="the k-th proposal counts too: the powers run from a^0 to a^k, k + 1 terms",
                         code="sum(a ** i for i in range(k + 1))", id="one-term-short"): (
                        expected_tokens_per_call(a, k - 1)),
                },
            )
    return ex.result


def _weight() -> torch.Tensor:
    """(4, 6): rows (output channels) of very different ranges, and one large column, so each wrong axis shows."""
    generator = torch.Generator().manual_seed(14)
    weight = torch.randn(4, 6, generator=generator) * torch.tensor([[0.02], [0.5], [3.0], [0.1]])
    weight[:, 2] *= 4
    return weight


def per_channel_int8(student_fn: Callable) -> CheckResult:
    """Check a function weight (out, in) -> (int8 values (out, in), scales (out, 1)), symmetric, one scale per row."""
    ex = Exercise("per_channel_int8")
    with ex.run():
        weight = _weight()
        got = ex.call(student_fn, weight.clone())
        if not ex.require("returns two tensors (values, scales)", isinstance(got, tuple | list) and len(got) == 2,
                          hint="return values, scales"):
            return ex.result
        values, scales = got
        expected_values, expected_scales = quantize_int8(weight)
        per_tensor_scale = weight.abs().max() / 127
        column_scales = weight.abs().amax(dim=0, keepdim=True) / 127  # (1, in): the wrong axis
        axis_hint = Hint(idea="one scale per OUTPUT channel: the weight is (out_features, in_features), so a scale "
                              "per row, the maximum over the input features (dim=1)",
                         code="scales = weight.abs().amax(dim=1, keepdim=True) / 127")
        ex.compare(
            "the scales, one per output channel (row), shape (out, 1)", scales, expected_scales,
            hint=axis_hint,
            mistakes={
                Hint(idea="one scale for the whole tensor gives every row the step of the largest weight: small rows "
                          "lose their precision; compute the maximum per row",
                     code="scales = weight.abs().amax(dim=1, keepdim=True) / 127", id="per-tensor-scale"): (
                    per_tensor_scale.expand(4, 1)),
                Hint(idea="a single number is per-tensor quantization: one scale per row, shape (out, 1)",
                     id="single-scale"): per_tensor_scale,
                Hint(idea=axis_hint.idea, code=axis_hint.code, id="wrong-axis"): column_scales,
                Hint(idea="divide the largest magnitude by 127, so it maps to ±127", id="scale-not-divided"): (
                    weight.abs().amax(dim=1, keepdim=True)),
                Hint(idea="the largest magnitude |w|, not the largest value: use weight.abs()", id="max-not-absmax"): (
                    weight.amax(dim=1, keepdim=True) / 127),
            },
        )
        ex.require("the values are int8", isinstance(values, torch.Tensor) and values.dtype == torch.int8,
                   problem=f"got dtype {getattr(values, 'dtype', type(values).__name__)}",
                   hint="convert at the end with .to(torch.int8)")
        ex.compare(
            "the int8 values", values, expected_values,
            hint="values = round(weight / scales), clamped to [-127, 127]",
            mistakes={
                Hint(idea="round to the nearest integer before converting: .to(torch.int8) alone cuts the fraction "
                          "off", code="(weight / scales).round().clamp(-127, 127).to(torch.int8)",
                     id="truncated-not-rounded"): (weight / expected_scales).trunc(),
            },
        )
        error = (dequantize_int8(expected_values, expected_scales) - weight).abs()
        ex.require("dequantized, every weight is within half a step of its row", bool(
            torch.all(error <= expected_scales / 2 * (1 + 1e-6))))
    return ex.result


class _SimulatedProcessGroup:
    """``world_size`` ranks played by threads: ``all_reduce(tensor)`` waits until every rank has made its call of
    the same number, then writes the sum of their tensors into each, in place (as ``dist.all_reduce`` does)."""

    def __init__(self, world_size: int):
        self.world_size = world_size
        self.barrier = threading.Barrier(world_size, timeout=20)
        self.tensors: dict[tuple[int, int], torch.Tensor] = {}
        self.counts = [0] * world_size

    def all_reduce_for(self, rank: int) -> Callable:
        def all_reduce(tensor: torch.Tensor, op: object = None) -> None:
            if op is not None and "SUM" not in str(op):
                raise ValueError(f"all_reduce with op={op}: sum the gradients (the default, ReduceOp.SUM)")
            call = self.counts[rank]
            self.counts[rank] += 1
            self.tensors[call, rank] = tensor
            self.barrier.wait()
            total = sum(self.tensors[call, r].detach().clone() for r in range(self.world_size))
            self.barrier.wait()
            with torch.no_grad():
                tensor.copy_(total)

        return all_reduce


def _models_with_gradients(world_size: int) -> list[nn.Module]:
    """``world_size`` copies of one small model, each with the gradient of its own slice of a batch."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).double()
    batch = torch.randn(4 * world_size, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    copies = []
    for rank in range(world_size):
        copy = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).double()
        copy.load_state_dict(model.state_dict())
        copy(batch[4 * rank : 4 * (rank + 1)]).pow(2).mean().backward()
        copies.append(copy)
    return copies


def _run_ranks(student_fn: Callable, models: list[nn.Module]) -> None:
    """Call ``student_fn(model, world_size, all_reduce)`` on every rank's model at once, one thread per rank."""
    group = _SimulatedProcessGroup(len(models))
    errors: list[BaseException] = []

    def rank_main(rank: int) -> None:
        try:
            student_fn(models[rank], len(models), group.all_reduce_for(rank))
        except BaseException as error:  # re-raised below, in the checking thread
            errors.append(error)
            group.barrier.abort()

    threads = [threading.Thread(target=rank_main, args=(rank,)) for rank in range(len(models))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    not_broken = [e for e in errors if not isinstance(e, threading.BrokenBarrierError)]
    if not_broken or errors:
        raise (not_broken or errors)[0]


def _flat(tensors: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat([t.detach().flatten() for t in tensors])  # every gradient of a model in one row


def average_gradients(student_fn: Callable) -> CheckResult:
    """Check a function (model, world_size, all_reduce) -> None that replaces each gradient by its mean over ranks."""
    ex = Exercise("average_gradients")
    with ex.run():
        world_size = 2
        models = _models_with_gradients(world_size)
        before = _flat(list(models[0].parameters()))
        own = [_flat([p.grad for p in m.parameters()]) for m in models]
        ex.call(_run_ranks, student_fn, models, description="your function, on 2 ranks at once,")
        ex.require("the parameters themselves are unchanged (the optimiser step comes later)", all(
            torch.equal(_flat(list(m.parameters())), before) for m in models),
            hint=Hint(idea="reduce the gradients, p.grad, not the parameters p", id="reduced-parameters"))
        for rank, model in enumerate(models):
            ex.compare(
                f"rank {rank}'s gradients after the call", _flat([p.grad for p in model.parameters()]),
                sum(own) / world_size,
                hint=Hint(idea="all_reduce every parameter's gradient (in place), then divide it by world_size",
                          code="for p in model.parameters(): all_reduce(p.grad); p.grad /= world_size"),
                mistakes={
                    Hint(idea="summing without dividing: all_reduce leaves the SUM over the ranks; divide by "
                              "world_size to get the mean, the gradient of the whole batch's mean loss",
                         code="p.grad /= world_size", id="sum-not-mean"): sum(own),
                    Hint(idea="all_reduce changes its tensor in place: reduce p.grad itself (not a copy) and keep it",
                         id="reduced-a-copy"): own[rank],
                    Hint(idea="dividing alone averages nothing: all_reduce each gradient first, so every rank holds "
                              "the sum over the ranks", code="all_reduce(p.grad)", id="no-all-reduce"): (
                        own[rank] / world_size),
                },
            )
    return ex.result
