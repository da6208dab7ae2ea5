"""Training an encoder-decoder Transformer: teacher forcing, label-smoothed loss without padding, the paper's
warm-up schedule, gradient clipping, greedy exact-match evaluation and checkpoints.

Shape legend: batch, S = source length, T = target length, V = target vocabulary size.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from .data import TranslationTask, check_token_ids, make_translation_task
from .decoding import greedy_decode
from .device import get_device, set_seed
from .masks import padding_mask
from .model import Transformer, TransformerConfig


def shift_for_teacher_forcing(tgt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``<bos> y1 … yn <eos>`` -> decoder input ``<bos> y1 … yn`` and labels ``y1 … yn <eos>``, both (batch, T-1).

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
    and spreads smoothing evenly over all V tokens (as ``F.cross_entropy(..., label_smoothing=…)``). Padding
    positions are left out with ``torch.where`` (not multiplied by 0, which turns an infinite log-probability into
    NaN); a batch without real tokens gives 0, not 0/0.
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
    uniform = -log_probs.mean(dim=-1)  # (batch, T): cross-entropy against the uniform distribution
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
    """Per-step training loss and learning rate, and the validation loss at a few steps."""

    steps: list[int] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    valid_steps: list[int] = field(default_factory=list)
    valid_loss: list[float] = field(default_factory=list)


def batch_loss(
    model: Transformer, src: torch.Tensor, tgt: torch.Tensor, pad_id: int, smoothing: float = 0.0
) -> torch.Tensor:
    """Teacher-forced loss of one padded batch ``src`` (batch, S), ``tgt`` (batch, T) ``<bos> … <eos>``."""
    decoder_input, labels = shift_for_teacher_forcing(tgt)
    logits = model(src, decoder_input, src_mask=padding_mask(src, pad_id))  # (batch, T-1, V)
    return label_smoothed_cross_entropy(logits, labels, pad_id, smoothing)


@torch.no_grad()
def evaluate_loss(model: Transformer, task: TranslationTask, split: str = "valid", batch_size: int = 250) -> float:
    """Mean unsmoothed cross-entropy per target token on a split (model in eval mode)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    losses = [
        batch_loss(model, src.to(device), tgt.to(device), task.tgt_vocab.pad_id).item()
        for src, tgt in task.batches(split, batch_size)
    ]
    model.train(was_training)
    return sum(losses) / len(losses)


def train(
    model: Transformer,
    task: TranslationTask,
    config: TrainingConfig,
    progress: bool = True,
    valid_every: int = 200,
) -> History:
    """Train with Adam (betas 0.9/0.98 as in the paper), linear warm-up and decay, and gradient clipping."""
    from tqdm.auto import tqdm  # a progress bar is a front-end concern: imported only when training

    device = next(model.parameters()).device
    pad_id = task.tgt_vocab.pad_id
    optimizer = torch.optim.Adam(model.parameters(), lr=config.peak_lr, betas=(0.9, 0.98), eps=1e-9)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda i: warmup_linear_decay_lr(i + 1, 1.0, config.warmup_steps, config.steps)
    )
    generator = torch.Generator().manual_seed(config.seed)
    history = History()
    model.train()
    bar = tqdm(total=config.steps, disable=not progress, desc="training")
    step = 0
    while step < config.steps:
        for src, tgt in task.batches("train", config.batch_size, generator=generator):
            step += 1
            loss = batch_loss(model, src.to(device), tgt.to(device), pad_id, config.label_smoothing)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.clip_norm)
            history.lr.append(optimizer.param_groups[0]["lr"])
            optimizer.step()
            schedule.step()
            history.steps.append(step)
            history.train_loss.append(loss.item())
            if step % valid_every == 0 or step == config.steps:
                history.valid_steps.append(step)
                history.valid_loss.append(evaluate_loss(model, task))
                bar.set_postfix(valid_loss=f"{history.valid_loss[-1]:.3f}")
            bar.update()
            if step == config.steps:
                break
    bar.close()
    model.eval()
    return history


@torch.no_grad()
def translate(
    model: Transformer, task: TranslationTask, sources: list[list[str]], max_len: int | None = None
) -> list[list[str]]:
    """Greedy translations of source sentences (lists of words) into lists of target words, at most ``max_len``
    tokens each (default: as many as the model has positions)."""
    max_len = max_len or model.config.max_len - 1
    device = next(model.parameters()).device
    src = task.encode_pairs([(s, []) for s in sources])[0].to(device)  # (batch, S)
    tokens = greedy_decode(
        model, src, task.tgt_vocab.bos_id, task.tgt_vocab.eos_id, max_len,
        src_mask=padding_mask(src, task.src_vocab.pad_id),
    )
    return [task.tgt_vocab.decode(row) for row in tokens.cpu()]


def exact_match(model: Transformer, task: TranslationTask, split: str = "test", batch_size: int = 500) -> float:
    """Fraction of a split's sentences whose greedy translation equals the reference word for word."""
    model.eval()
    pairs = getattr(task, split)
    correct = 0
    for start in range(0, len(pairs), batch_size):
        chunk = pairs[start : start + batch_size]
        predictions = translate(model, task, [s for s, _ in chunk])
        correct += sum(p == t for p, (_, t) in zip(predictions, chunk, strict=True))
    return correct / len(pairs)


def save_checkpoint(model: Transformer, path: str | Path) -> None:
    """Save the weights (state dict) and the ``TransformerConfig`` needed to rebuild the model."""
    torch.save({"config": asdict(model.config), "state_dict": model.state_dict()}, path)


CHECKPOINTS_VARIABLE = "TRANSFORMER_LIB_CHECKPOINTS"


def lesson_checkpoint(name: str) -> Path:
    """Where lessons keep a trained model for later lessons: ``checkpoints/NAME.pt`` in the course folder.

    Lessons run in ``notebooks/``, so that is ``../checkpoints`` (git-ignored). ``$TRANSFORMER_LIB_CHECKPOINTS``
    names another folder: the test command gives each of its runs a fresh one, so no run reads a model that an
    earlier run, another library version or other CPU kernels trained.
    """
    folder = Path(os.environ.get(CHECKPOINTS_VARIABLE, Path("..") / "checkpoints"))
    return folder / f"{name}.pt"


def load_checkpoint(path: str | Path, device: torch.device | str | None = None) -> Transformer:
    """Rebuild a model saved by :func:`save_checkpoint` (in eval mode)."""
    checkpoint = torch.load(path, map_location=device or "cpu", weights_only=True)
    model = Transformer(TransformerConfig(**checkpoint["config"]))
    model.load_state_dict(checkpoint["state_dict"])
    return model.to(device or "cpu").eval()


def translation_model_config(task: TranslationTask) -> TransformerConfig:
    """The small model lesson 09 trains: d_model 64, 4 heads, 2 + 2 layers, d_ff 128."""
    return TransformerConfig(
        src_vocab_size=len(task.src_vocab), tgt_vocab_size=len(task.tgt_vocab),
        d_model=64, num_heads=4, num_encoder_layers=2, num_decoder_layers=2, d_ff=128, dropout=0.0,
        max_len=32, share_embeddings=False,
    )


@dataclass
class TrainingRun:
    """The result of :func:`train_translation_model`."""

    model: Transformer
    task: TranslationTask
    history: History
    seconds: float


def train_translation_model(
    config: TrainingConfig | None = None, device: torch.device | None = None, progress: bool = True
) -> TrainingRun:
    """Generate the lesson 09 task and train its model from scratch: a fixed number of seeded steps, so the same
    config gives the same model on the same device.

    On the CPU it trains with one thread: the matrices are too small to gain from splitting each operation across
    cores, and spare cores then stay free for other work (a second notebook, the data pipeline).
    """
    config = config or TrainingConfig()
    device = device or get_device()
    task = make_translation_task(seed=config.seed)
    set_seed(config.seed)
    model = Transformer(translation_model_config(task)).to(device)
    threads = torch.get_num_threads()
    if device.type == "cpu":
        torch.set_num_threads(1)
    try:
        started = time.perf_counter()
        history = train(model, task, config, progress=progress)
        seconds = time.perf_counter() - started
    finally:
        torch.set_num_threads(threads)
    return TrainingRun(model, task, history, seconds)

