"""Training an encoder-decoder Transformer: teacher forcing, a label-smoothed loss over the real tokens, one
optimiser step (with gradient clipping) and the loop that repeats it.

Two learning-rate schedules live here: the paper's (:func:`transformer_lr`, warm-up then 1/sqrt(step) decay, shown in
lesson 09) and the one :func:`train` uses, a warm-up then a linear decay to 0 (:func:`warmup_linear_decay_lr`), which
fits a run with a fixed, small number of steps. Evaluation (``translate``, ``exact_match``, ``chrf``) is in
``evaluation``, checkpoints in ``checkpoints``, and the recipe of lesson 09's model in ``recipes``.

The last section trains lesson 11's GPT on next-character prediction (:func:`train_gpt`, AdamW at a constant learning
rate, no clipping), with the training and held-out loss measured along the way by ``evaluation.evaluate_lm_loss``.
Both loops end each step in :func:`optimiser_step`. Their optimisers, like the course's other training loops', take
``foreach=True``: PyTorch then applies each operation of the update to all the parameter tensors in one call (its
default on GPUs) instead of looping over them in Python. The arithmetic is the same, with fewer calls, which matters
for the course's tiny models: on the CPU their steps cost about as much at width 8 as at width 32.

Shape legend: batch, S = source length, T = target length (for the GPT: ``block_size``), V = target vocabulary size,
N = characters in a split of a text.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from .data import TranslationTask, check_token_ids, make_translation_task, random_windows
from .device import set_seed, single_thread
from .evaluation import evaluate_lm_loss, unigram_probabilities
from .gpt import GPT
from .masks import padding_mask
from .model import Transformer, TransformerConfig
from .model_cache import cached_training


def shift_for_teacher_forcing(tgt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``<bos> y1 … ym <eos>`` -> decoder input ``<bos> y1 … ym`` and labels ``y1 … ym <eos>``, both (batch, T-1).

    The decoder reads the target shifted right by one and predicts the next token at every position.
    """
    if tgt.dim() != 2 or tgt.shape[1] < 2:
        raise ValueError(
            f"shift_for_teacher_forcing needs targets shaped (batch, T) with T >= 2 (<bos> … <eos>), got shape "
            f"{tuple(tgt.shape)}: encode each target with add_bos=True and add_eos=True"
        )
    return tgt[:, :-1], tgt[:, 1:]


def label_smoothed_cross_entropy(
    logits: torch.Tensor, labels: torch.Tensor, pad_id: int, smoothing: float = 0.0
) -> torch.Tensor:
    """Mean cross-entropy over the real (non-padding) tokens, with label smoothing.

    ``logits``: (batch, T, V); ``labels``: (batch, T). The target distribution puts 1 - smoothing on the right token
    and spreads smoothing evenly over the V - 1 tokens other than ``<pad>`` (the right one included): ``<pad>`` is
    never a correct prediction, so no target gives it probability. (``F.cross_entropy(..., label_smoothing=…)``
    spreads it over all V tokens, ``<pad>`` included.) Padding positions are left out with ``torch.where`` (not
    multiplied by 0, which turns an infinite log-probability into NaN); a batch without real tokens gives 0, not 0/0.
    """
    if logits.dim() != 3 or logits.shape[:2] != labels.shape:
        raise ValueError(
            f"logits must be (batch, T, V) and labels (batch, T) for the same batch and positions, got logits "
            f"{tuple(logits.shape)} and labels {tuple(labels.shape)}: pass the decoder input's logits with the "
            "labels from the same shift_for_teacher_forcing call"
        )
    check_token_ids(labels, logits.shape[-1], "labels")
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"smoothing={smoothing} must be in [0, 1): it is the probability mass moved off the right "
                         "token, e.g. 0.1 as in the paper")
    log_probs = torch.log_softmax(logits, dim=-1)  # (batch, T, V)
    nll = -log_probs.gather(-1, labels.unsqueeze(-1)).squeeze(-1)  # (batch, T)
    not_pad = torch.arange(logits.shape[-1], device=logits.device) != pad_id  # (V,)
    uniform = -log_probs[..., not_pad].mean(dim=-1)  # (batch, T): cross-entropy against uniform over non-pad tokens
    per_token = (1.0 - smoothing) * nll + smoothing * uniform  # (batch, T)
    real = labels != pad_id  # (batch, T)
    total = torch.where(real, per_token, torch.zeros_like(per_token)).sum()
    return total / real.sum().clamp(min=1)


def transformer_lr(step: int, d_model: int, warmup_steps: int, scale: float = 1.0) -> float:
    """The paper's schedule: lr = scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), steps from 1.

    It grows linearly for ``warmup_steps`` steps, peaks at ``scale / sqrt(d_model * warmup_steps)``, then decays
    like 1/sqrt(step).
    """
    if d_model < 1 or warmup_steps < 1:
        raise ValueError(
            f"d_model={d_model} and warmup_steps={warmup_steps} must both be at least 1 (the schedule divides by "
            "their powers): the paper uses d_model=512, warmup_steps=4000"
        )
    step = max(step, 1)
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def warmup_linear_decay_lr(step: int, peak_lr: float, warmup_steps: int, total_steps: int) -> float:
    """Linear warm-up to ``peak_lr``, then a linear decay to 0 at ``total_steps`` (steps from 1); 0 after it.

    A step past a warm-up that fills the whole budget (``warmup_steps >= total_steps``) also gets 0, not a division
    by zero; ``TrainingConfig`` refuses such a budget in the first place.
    """
    step = max(step, 1)
    if step <= warmup_steps:
        return peak_lr * step / warmup_steps
    if step >= total_steps:
        return 0.0  # the budget is spent
    return peak_lr * ((total_steps - step) / (total_steps - warmup_steps))


@dataclass
class TrainingConfig:
    """Everything that decides a training run, so the same config and seed give the same model.

    ``warmup_steps`` must be smaller than ``steps`` (0 means no warm-up): the schedule warms up linearly to
    ``peak_lr`` and then decays linearly to 0 at ``steps``, so a warm-up that fills the whole budget would end the
    run at the peak, with no decay at all. That is never what the schedule is for, so it is refused here with a
    suggested warm-up (a quarter of the steps, the default's ratio) rather than silently run. Other impossible
    values (no steps, an empty batch, a learning rate or clip norm <= 0, smoothing outside [0, 1)) raise too.
    """

    steps: int = 400
    batch_size: int = 64
    peak_lr: float = 3e-3
    warmup_steps: int = 100
    label_smoothing: float = 0.1
    clip_norm: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        for name, fix in (("steps", "optimiser steps, e.g. 400"), ("batch_size", "sentence pairs per step, e.g. 64")):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)} must be at least 1: the number of {fix}")
        for name, fix in (("peak_lr", "e.g. 3e-3"), ("clip_norm", "e.g. 1.0, or 1e9 to turn clipping off")):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}={getattr(self, name)} must be > 0: {fix}")
        if not 0 <= self.warmup_steps < self.steps:
            raise ValueError(
                f"warmup_steps={self.warmup_steps} must be at least 0 and less than steps={self.steps}: the "
                "learning rate warms up, then decays to 0 at the last step; pass e.g. "
                f"TrainingConfig(steps={self.steps}, warmup_steps={self.steps // 4})"
            )
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"label_smoothing={self.label_smoothing} must be in [0, 1), e.g. 0.1 as in the paper")


@dataclass
class History:
    """Per step: the label-smoothed training loss (what is minimised), the plain cross-entropy of the same batch
    (comparable with the validation loss) and the learning rate; the validation cross-entropy every few steps."""

    steps: list[int] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    train_cross_entropy: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    valid_steps: list[int] = field(default_factory=list)
    valid_loss: list[float] = field(default_factory=list)
    seconds: float = 0.0  # the whole run, validation included


def teacher_forced_logits(
    model: Transformer, src: torch.Tensor, tgt: torch.Tensor, pad_id: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """One teacher-forced pass over a padded batch ``src`` (batch, S), ``tgt`` (batch, T) ``<bos> … <eos>``.

    Returns the logits (batch, T-1, V) and the labels (batch, T-1) they are scored against.
    """
    decoder_input, labels = shift_for_teacher_forcing(tgt)  # (batch, T-1) each
    logits = model(src, decoder_input, src_mask=padding_mask(src, pad_id))  # (batch, T-1, V)
    return logits, labels


def optimiser_step(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer, loss: torch.Tensor, clip_norm: float | None = None
) -> None:
    """Clear the old gradients, backpropagate ``loss``, clip the gradient norm to ``clip_norm`` (``None``: no
    clipping) and take one optimiser step."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if clip_norm is not None:
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
    optimizer.step()


def training_step(
    model: Transformer, optimizer: torch.optim.Optimizer, src: torch.Tensor, tgt: torch.Tensor, pad_id: int,
    smoothing: float = 0.0, clip_norm: float = 1.0,
) -> tuple[float, float]:
    """One step on a batch: shift, forward, label-smoothed loss, backward, clip the gradient norm, optimiser step.

    Returns the batch's label-smoothed loss and its plain cross-entropy, both measured before the step.
    """
    logits, labels = teacher_forced_logits(model, src, tgt, pad_id)  # (batch, T-1, V), (batch, T-1)
    loss = label_smoothed_cross_entropy(logits, labels, pad_id, smoothing)
    optimiser_step(model, optimizer, loss, clip_norm)
    cross_entropy = label_smoothed_cross_entropy(logits.detach(), labels, pad_id)
    return loss.item(), cross_entropy.item()


@torch.no_grad()
def evaluate_loss(model: Transformer, task: TranslationTask, split: str = "valid", batch_size: int = 250) -> float:
    """Unsmoothed cross-entropy on a split (model in eval mode): the mean over batches of ``batch_size`` sentence
    pairs of each batch's mean per target token, so a batch's tokens weigh by the batch, not one by one (the last,
    smaller batch counts as much as a full one)."""
    was_training = model.training
    model.eval()
    device, pad_id = next(model.parameters()).device, task.tgt_vocab.pad_id
    losses = []
    for src, tgt in task.batches(split, batch_size):
        logits, labels = teacher_forced_logits(model, src.to(device), tgt.to(device), pad_id)
        losses.append(label_smoothed_cross_entropy(logits, labels, pad_id).item())
    model.train(was_training)
    return sum(losses) / len(losses)


def unigram_loss(task: TranslationTask, split: str = "valid") -> float:
    """The cross-entropy per target token on ``split`` of a model that ignores the source and predicts every target
    token (words and ``<eos>``) by its frequency among the training targets (add-one smoothed): a baseline that a
    translator must beat by far."""
    pad_id = task.tgt_vocab.pad_id

    def target_tokens(name: str) -> torch.Tensor:
        _, tgt = task.encode_pairs(getattr(task, name))  # (pairs, T): <bos> … <eos>, then padding
        labels = tgt[:, 1:]  # what the decoder must predict
        return labels[labels != pad_id]  # (N,)

    probabilities = unigram_probabilities(target_tokens("train"), len(task.tgt_vocab))  # (V,)
    return -probabilities[target_tokens(split)].log().mean().item()


def train(
    model: Transformer,
    task: TranslationTask,
    config: TrainingConfig,
    progress: bool = True,
    valid_every: int = 200,
) -> History:
    """Train with Adam (betas 0.9/0.98 as in the paper), the linear warm-up and decay of
    :func:`warmup_linear_decay_lr`, label smoothing and gradient clipping; batches shuffled by ``config.seed``.
    ``seconds`` in the returned history counts the whole run, validation included."""
    from tqdm.auto import tqdm  # a progress bar is a front-end concern: imported only when training

    device = next(model.parameters()).device
    pad_id = task.tgt_vocab.pad_id
    optimizer = torch.optim.Adam(model.parameters(), betas=(0.9, 0.98), eps=1e-9, foreach=True)
    generator = torch.Generator().manual_seed(config.seed)
    history = History()
    started = time.perf_counter()
    model.train()
    bar = tqdm(total=config.steps, disable=not progress, desc="training")
    step = 0
    while step < config.steps:
        for src, tgt in task.batches("train", config.batch_size, generator=generator):
            step += 1
            lr = warmup_linear_decay_lr(step, config.peak_lr, config.warmup_steps, config.steps)
            for group in optimizer.param_groups:
                group["lr"] = lr
            loss, cross_entropy = training_step(model, optimizer, src.to(device), tgt.to(device), pad_id,
                                                config.label_smoothing, config.clip_norm)
            history.steps.append(step)
            history.train_loss.append(loss)
            history.train_cross_entropy.append(cross_entropy)
            history.lr.append(lr)
            if step % valid_every == 0 or step == config.steps:
                history.valid_steps.append(step)
                history.valid_loss.append(evaluate_loss(model, task))
                bar.set_postfix(valid_loss=f"{history.valid_loss[-1]:.3f}")
            bar.update()
            if step == config.steps:
                break
    bar.close()
    model.eval()
    history.seconds = time.perf_counter() - started
    return history


def warmup_task() -> TranslationTask:
    """Lesson 07's stand-in for lesson 09's task: 4 000 training pairs, 200 validation pairs (seed 0)."""
    return make_translation_task(num_train=4000, num_valid=200, num_test=10, seed=0)


def warmup_run(norm_first: bool, warmup_steps: int, seed: int = 0, task: TranslationTask | None = None) -> History:
    """Lesson 07's experiment: a deep, narrow Transformer (d_model 32, 4 heads, 4 + 4 layers, d_ff 64, no dropout),
    post-LN or pre-LN, trained by :func:`train` for 120 steps of 32 pairs at a peak learning rate of 0.01 with
    ``warmup_steps`` of warm-up (1: the peak from the first step) and no gradient clipping; the validation loss every
    30 steps. ``seed`` draws the initial weights and the batch order; ``task`` defaults to :func:`warmup_task`.

    The run goes through the model cache (:mod:`~transformer_lib.model_cache`): lesson 07 trains it once, and its
    tests, asking for the same run on the same setting, load it."""
    task = task or warmup_task()
    config = TransformerConfig(len(task.src_vocab), len(task.tgt_vocab), d_model=32, num_heads=4,
                               num_encoder_layers=4, num_decoder_layers=4, d_ff=64, dropout=0.0, max_len=32,
                               share_embeddings=False, norm_first=norm_first)
    run = TrainingConfig(steps=120, batch_size=32, peak_lr=1e-2, warmup_steps=warmup_steps, clip_norm=1e9, seed=seed)

    def build() -> Transformer:
        set_seed(seed)
        return Transformer(config)

    def fit(model: Transformer) -> History:
        with single_thread():  # tiny matrices: one thread is as fast
            return train(model, task, run, progress=False, valid_every=30)

    pairs = (task.src_vocab.tokens, task.tgt_vocab.tokens, task.train, task.valid)
    arguments = {"config": config, "run": run, "task": hashlib.sha256(repr(pairs).encode()).hexdigest()}
    return cached_training("warm-up", arguments, build, fit, History, torch.device("cpu"))[1]


# --- a GPT on next-character prediction


@dataclass
class LMHistory:
    """What ``train_gpt`` records: the loss of every training batch, and at each evaluation step the loss on fixed
    windows of the training and the held-out split (the same number of windows, measured the same way)."""

    step_loss: list[float] = field(default_factory=list)
    eval_steps: list[int] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    valid_loss: list[float] = field(default_factory=list)
    seconds: float = 0.0

    def best_step(self) -> int:
        """The evaluation step with the lowest held-out loss (the first, on a tie): where early stopping would keep
        the model. A later best step means the held-out loss was still falling."""
        if not self.valid_loss:
            raise ValueError("no held-out loss was measured: train with valid=... and eval_every=...")
        best = min(range(len(self.valid_loss)), key=self.valid_loss.__getitem__)
        return self.eval_steps[best]


@dataclass
class LMTrainingState:
    """Where a :func:`train_gpt` run stands, besides the model's weights: the steps taken, AdamW's state, the batch
    generator's position and the history so far. Enough to continue the run exactly where it stopped."""

    step: int = 0
    optimizer: dict[str, Any] | None = None  # AdamW's state_dict(): its moments and step count per parameter
    generator: torch.Tensor | None = None  # the batch generator's get_state()
    history: LMHistory = field(default_factory=LMHistory)

    @classmethod
    def from_dict(cls, stored: dict[str, Any]) -> LMTrainingState:
        """The state that ``dataclasses.asdict`` turned into ``stored``."""
        return cls(**{**stored, "history": LMHistory(**stored["history"])})


def train_gpt(
    model: GPT,
    train: torch.Tensor,
    steps: int,
    valid: torch.Tensor | None = None,
    batch_size: int = 32,
    lr: float = 1e-3,
    seed: int = 0,
    eval_every: int | None = None,
    eval_windows: int = 64,
    state: LMTrainingState | None = None,
) -> LMHistory:
    """Train on next-character prediction for a fixed number of ``steps`` (AdamW, constant ``lr``).

    ``train``/``valid``: (N,) token ids on the CPU, N > block_size. Batches come from a generator seeded with
    ``seed``, so a run is repeatable on one machine. With ``valid`` and ``eval_every``, both splits are measured by
    :func:`~transformer_lib.evaluation.evaluate_lm_loss` before the first step, every ``eval_every`` steps and
    after the last. ``seconds`` counts training only, not the evaluations.

    With ``state``, the run goes on from ``state.step`` (the model must hold the weights it had there) up to
    ``steps`` in all, and ``state`` is updated to where it stops: a run stopped and continued this way gives the
    same weights and history, on one machine and setting, as one that never stopped.
    """
    block_size = model.config.block_size
    if train.dim() != 1 or len(train) <= block_size:
        raise ValueError(
            f"train_gpt needs data shaped (N,) with N > block_size={block_size} (one window plus its next "
            f"character), got shape {tuple(train.shape)}: pass a longer text, encoded, e.g. tokenizer.encode(text)"
        )
    state = state if state is not None else LMTrainingState()
    if state.step > steps:
        raise ValueError(f"the run already took {state.step} steps, more than steps={steps}: pass steps >= "
                         f"{state.step}")
    device = next(model.parameters()).device
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, foreach=True)
    if state.step:
        generator.set_state(state.generator)
        optimizer.load_state_dict(state.optimizer)
    history = state.history
    measuring = valid is not None and eval_every is not None
    if measuring and history.eval_steps[-1:] == [state.step] and state.step % eval_every:
        for measured in (history.eval_steps, history.train_loss, history.valid_loss):
            measured.pop()  # the stopped run's measurement at its end, off the grid of a longer run

    def evaluate(step: int) -> None:
        history.eval_steps.append(step)
        history.train_loss.append(evaluate_lm_loss(model, train, block_size, eval_windows))
        history.valid_loss.append(evaluate_lm_loss(model, valid, block_size, eval_windows))

    for step in range(state.step, steps):
        if measuring and step % eval_every == 0 and history.eval_steps[-1:] != [step]:
            evaluate(step)
        started = time.perf_counter()
        model.train()
        inputs, targets = random_windows(train, block_size, batch_size, generator)  # (batch, T) each
        logits = model(inputs.to(device))  # (batch, T, V)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.to(device).flatten())
        optimiser_step(model, optimizer, loss)
        history.step_loss.append(loss.item())
        history.seconds += time.perf_counter() - started
    if measuring and history.eval_steps[-1:] != [steps]:
        evaluate(steps)
    model.eval()
    state.step, state.optimizer, state.generator = steps, optimizer.state_dict(), generator.get_state()
    return history
