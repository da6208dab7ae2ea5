"""The optimiser's parts written out equal PyTorch's: AdamW (and Adam's L2 penalty) over 100 steps of the course's
GPT, the learning-rate schedules at every step of torch's schedulers, and clipping by the global gradient norm."""

import copy
import math

import pytest
import torch
import torch.nn.functional as F
from torch.nn.utils import parameters_to_vector
from torch.optim.lr_scheduler import CosineAnnealingLR, LambdaLR, LinearLR, LRScheduler, SequentialLR

from transformer_lib.device import single_thread
from transformer_lib.gpt import GPT, GPTConfig
from transformer_lib.optim import AdamW, clip_grad_norm, cosine_with_warmup
from transformer_lib.training import transformer_lr, warmup_linear_decay_lr

VOCAB, T, STEPS = 11, 8, 100
HYPER = dict(lr=3e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
# Updates (up to about 3e-3) agree within 1e-15 but for the key biases: softmax ignores a shift shared by all keys, so
# their gradient is rounding noise (about 1e-18) that two runs draw apart, and AdamW divides it by ε = 1e-8; their
# updates then differ by up to about 4e-12 after 100 steps. Hence 1e-10, still far below any mistake in the formula.
CLOSE = dict(rtol=1e-9, atol=1e-10)


@pytest.fixture(autouse=True)
def _one_thread():
    with single_thread():  # tiny matrices: one thread is as fast, and steadier beside other work
        yield


def _gpt_pair() -> tuple[GPT, GPT]:
    """One small float64 GPT and an exact copy of it, to train side by side."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(VOCAB, block_size=T, d_model=16, num_heads=2, num_layers=2, d_ff=32)).double()
    return model, copy.deepcopy(model)


def _param_groups(model: GPT) -> list[dict]:
    """nanoGPT's split: matrices decay, biases and LayerNorm gains do not (a second group with its own setting)."""
    params = list(model.parameters())
    return [{"params": [p for p in params if p.dim() >= 2]},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]


def _batches(steps: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The same random token windows for both runs: inputs and next-token targets, (4, T) each."""
    generator = torch.Generator().manual_seed(1)
    tokens = [torch.randint(VOCAB, (4, T + 1), generator=generator) for _ in range(steps)]  # (4, T+1) each
    return [(x[:, :-1], x[:, 1:]) for x in tokens]


def _backward(model: GPT, inputs: torch.Tensor, targets: torch.Tensor) -> None:
    model.zero_grad(set_to_none=True)
    logits = model(inputs)  # (4, T, V)
    F.cross_entropy(logits.flatten(0, 1), targets.flatten()).backward()


def _weights(model: GPT) -> torch.Tensor:
    return parameters_to_vector(model.parameters()).detach()  # (number of parameters,)


@pytest.mark.parametrize(
    "decoupled, reference",
    [(True, torch.optim.AdamW), (False, torch.optim.Adam)],  # Adam's weight_decay is the L2 penalty
    ids=["AdamW", "Adam-L2"],
)
def test_the_update_written_out_equals_torch_over_100_steps_of_the_gpt(decoupled, reference):
    ours, theirs = _gpt_pair()
    mine = AdamW(_param_groups(ours), **HYPER, decoupled=decoupled)
    torchs = reference(_param_groups(theirs), **HYPER)
    for inputs, targets in _batches(STEPS):
        before = _weights(ours)  # (number of parameters,)
        for model, optimizer in ((ours, mine), (theirs, torchs)):
            _backward(model, inputs, targets)
            optimizer.step()
        torch.testing.assert_close(_weights(ours) - before, _weights(theirs) - before, **CLOSE)  # the step itself
        torch.testing.assert_close(_weights(ours), _weights(theirs), **CLOSE)
    for a, b in zip(ours.parameters(), theirs.parameters(), strict=True):
        assert mine.state[a]["step"] == torchs.state[b]["step"].item() == STEPS
        torch.testing.assert_close(mine.state[a]["m"], torchs.state[b]["exp_avg"], **CLOSE)
        torch.testing.assert_close(mine.state[a]["v"], torchs.state[b]["exp_avg_sq"], **CLOSE)


def test_a_whole_step_with_schedule_and_clipping_equals_torch():
    """Warm-up and cosine set through param_groups, the global norm clipped to 0.5, then AdamW: as torch's pieces."""
    ours, theirs = _gpt_pair()
    mine, torchs = AdamW(ours.parameters(), **HYPER), torch.optim.AdamW(theirs.parameters(), **HYPER)
    warmup = 10
    scheduler = _warmup_then(torchs, warmup, CosineAnnealingLR(torchs, T_max=STEPS - warmup))
    for step, (inputs, targets) in enumerate(_batches(STEPS), start=1):
        for group in mine.param_groups:
            group["lr"] = cosine_with_warmup(step, peak_lr=HYPER["lr"], warmup_steps=warmup, total_steps=STEPS)
        _backward(ours, inputs, targets)
        _backward(theirs, inputs, targets)
        torch.testing.assert_close(clip_grad_norm(ours.parameters(), 0.5),
                                   torch.nn.utils.clip_grad_norm_(theirs.parameters(), 0.5), **CLOSE)
        mine.step()
        torchs.step()
        scheduler.step()
        torch.testing.assert_close(_weights(ours), _weights(theirs), **CLOSE)


def test_decoupled_decay_shrinks_the_weight_where_the_l2_penalty_is_divided_by_its_own_size():
    """With no gradient, AdamW multiplies w by 1 − lr·λ; Adam's L2 penalty becomes the gradient λ·w, which the
    update divides by √v = λ·|w|, so w moves by about lr whatever λ is."""
    moved = {}
    for decoupled in (True, False):
        w = torch.nn.Parameter(torch.tensor([0.5], dtype=torch.float64))
        w.grad = torch.zeros_like(w)
        AdamW([w], lr=0.1, weight_decay=0.01, decoupled=decoupled).step()
        moved[decoupled] = 0.5 - w.item()
    assert math.isclose(moved[True], 0.5 * 0.1 * 0.01)
    assert math.isclose(moved[False], 0.1, rel_tol=1e-5)


def _scheduled_lrs(make_scheduler, lr: float, steps: int) -> list[float]:
    """The lr torch's scheduler gives the 1st … steps-th update, read from param_groups after each
    scheduler.step() (which follows optimizer.step(), as in a training loop); it drives our AdamW as torch's."""
    w = torch.nn.Parameter(torch.zeros(1))
    optimizer = AdamW([w], lr=lr)
    scheduler = make_scheduler(optimizer)
    lrs = []
    for _ in range(steps):
        lrs.append(optimizer.param_groups[0]["lr"])
        w.grad = torch.zeros_like(w)
        optimizer.step()
        scheduler.step()
    return lrs


def _warmup_then(optimizer: torch.optim.Optimizer, warmup: int, after: LRScheduler) -> LRScheduler:
    """torch's pieces for our warm-up: ``LinearLR`` gives the e-th update (e + 1) / warmup of the lr, and ``after``
    takes over at the warm-up's last update (its epoch 0 is the peak)."""
    if warmup == 1:
        return after  # the peak from the first update
    return SequentialLR(optimizer, [LinearLR(optimizer, start_factor=1 / warmup, total_iters=warmup - 1), after],
                        milestones=[warmup - 1])


SCHEDULE_TOLERANCE = dict(rtol=1e-12, atol=1e-18)  # torch's chained factors round apart from one formula


@pytest.mark.parametrize("warmup, total, min_lr", [(0, 30, 0.0), (1, 30, 0.0), (2, 30, 3e-4), (10, 100, 0.0),
                                                   (10, 100, 3e-4), (29, 30, 0.0)])
def test_cosine_with_warmup_equals_lambda_lr_at_every_step(warmup, total, min_lr):
    ours = [cosine_with_warmup(s, peak_lr=3e-3, warmup_steps=warmup, total_steps=total, min_lr=min_lr)
            for s in range(1, total + 11)]
    lambda_lr = _scheduled_lrs(lambda opt: LambdaLR(opt, lambda e: cosine_with_warmup(
        e + 1, peak_lr=3e-3, warmup_steps=warmup, total_steps=total, min_lr=min_lr) / 3e-3), 3e-3, total + 10)
    torch.testing.assert_close(ours, lambda_lr, **SCHEDULE_TOLERANCE)
    assert ours[total - 1:] == [min_lr] * 11  # from the last step on (CosineAnnealingLR would climb again)
    if warmup:
        assert math.isclose(ours[warmup - 1], 3e-3)  # the peak at the warm-up's last step


@pytest.mark.parametrize("warmup, total, min_lr", [(1, 30, 0.0), (2, 30, 0.0), (3, 30, 3e-4), (10, 100, 0.0),
                                                   (29, 30, 0.0)])
def test_cosine_with_warmup_equals_linear_then_cosine_annealing_up_to_the_last_step(warmup, total, min_lr):
    ours = [cosine_with_warmup(s, peak_lr=3e-3, warmup_steps=warmup, total_steps=total, min_lr=min_lr)
            for s in range(1, total + 1)]
    sequential = _scheduled_lrs(lambda opt: _warmup_then(opt, warmup, CosineAnnealingLR(
        opt, T_max=total - warmup, eta_min=min_lr)), 3e-3, total)
    torch.testing.assert_close(ours, sequential, **SCHEDULE_TOLERANCE)


@pytest.mark.parametrize("warmup, total", [(1, 30), (2, 30), (10, 100), (25, 100), (99, 100)])
def test_warmup_linear_decay_equals_two_linear_lrs_at_every_step(warmup, total):
    ours = [warmup_linear_decay_lr(s, 3e-3, warmup, total) for s in range(1, total + 11)]
    lambda_lr = _scheduled_lrs(lambda opt: LambdaLR(opt, lambda e: warmup_linear_decay_lr(e + 1, 3e-3, warmup, total)
                                                    / 3e-3), 3e-3, total + 10)
    torch.testing.assert_close(ours, lambda_lr, **SCHEDULE_TOLERANCE)
    sequential = _scheduled_lrs(lambda opt: _warmup_then(opt, warmup, LinearLR(
        opt, start_factor=1.0, end_factor=0.0, total_iters=total - warmup)), 3e-3, total + 10)
    torch.testing.assert_close(ours, sequential, **SCHEDULE_TOLERANCE)


def test_the_paper_schedule_equals_lambda_lr_at_every_step():
    ours = [transformer_lr(s, d_model=512, warmup_steps=40) for s in range(1, 201)]
    lambda_lr = _scheduled_lrs(lambda opt: LambdaLR(opt, lambda e: transformer_lr(e + 1, 512, 40)), 1.0, 200)
    torch.testing.assert_close(ours, lambda_lr, **SCHEDULE_TOLERANCE)


def _gradients(case: str) -> list[torch.nn.Parameter]:
    generator = torch.Generator().manual_seed(2)
    params = [torch.nn.Parameter(torch.zeros(shape, dtype=torch.float64)) for shape in ((3, 4), (4,), (2, 2, 2))]
    for p in params:
        p.grad = torch.randn(p.shape, generator=generator, dtype=torch.float64)  # total norm about 4.1
    if case == "zero":
        for p in params:
            p.grad.zero_()
    if case == "some None":
        params[1].grad = None
    if case == "all None":
        for p in params:
            p.grad = None
    return params


@pytest.mark.parametrize("case, max_norm", [("clipped", 1.0), ("below max_norm", 100.0), ("zero", 1.0),
                                            ("some None", 1.0), ("all None", 1.0), ("not clipped", float("inf"))])
def test_clipping_equals_clip_grad_norm_(case, max_norm):
    ours, theirs = _gradients(case), _gradients(case)
    norm = clip_grad_norm(ours, max_norm)
    torch.testing.assert_close(norm, torch.nn.utils.clip_grad_norm_(theirs, max_norm))
    for a, b in zip(ours, theirs, strict=True):
        assert (a.grad is None) == (b.grad is None)
        if a.grad is not None:
            torch.testing.assert_close(a.grad, b.grad)
    clipped = [p.grad for p in ours if p.grad is not None]
    if case == "clipped":
        assert norm > max_norm
        after = torch.linalg.vector_norm(torch.cat([g.flatten() for g in clipped]))  # ()
        torch.testing.assert_close(after, max_norm * norm / (norm + 1e-6))  # just under max_norm: the 1e-6
    if case in ("below max_norm", "not clipped", "zero"):
        for g, unchanged in zip(clipped, _gradients(case), strict=True):
            assert torch.equal(g, unchanged.grad)  # multiplied by exactly 1


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda w: AdamW([w], lr=-1e-3), r"lr=-0.001 must be >= 0: pass a learning rate, e.g. 1e-3"),
        (lambda w: AdamW([w], betas=(0.9, 1.0)), r"betas=\(0.9, 1.0\) must both be in \[0, 1\): pass e.g."),
        (lambda w: AdamW([w], eps=-1.0), r"eps=-1.0 must be >= 0: pass e.g. 1e-8"),
        (lambda w: AdamW([w], weight_decay=-0.1), r"weight_decay=-0.1 must be >= 0: .* or 0.0 for no decay"),
        (lambda w: cosine_with_warmup(1, peak_lr=1e-3, warmup_steps=100, total_steps=100),
         r"warmup_steps=100 must be at least 0 and less than total_steps=100: .* warmup_steps=10"),
        (lambda w: cosine_with_warmup(1, peak_lr=1e-3, warmup_steps=-1, total_steps=100), r"warmup_steps=-1"),
        (lambda w: cosine_with_warmup(1, peak_lr=1e-3, warmup_steps=10, total_steps=100, min_lr=1e-2),
         r"min_lr=0.01 must be in \[0, peak_lr=0.001\]: pass e.g. min_lr=0.0001"),
        (lambda w: clip_grad_norm([w], 0.0), r"max_norm=0.0 must be > 0: .* float\('inf'\) to only measure"),
    ],
)
def test_impossible_arguments_are_clear_errors(build, message):
    with pytest.raises(ValueError, match=message):
        build(torch.nn.Parameter(torch.zeros(2)))
