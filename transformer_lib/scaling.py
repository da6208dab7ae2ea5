"""Power laws: how a language model's loss falls with its number of parameters (a fit of L(N) = E + a · N^(-α_N),
with an interval over training seeds and its misses in standard errors) and what a training run costs by Kaplan et
al.'s estimate, C ≈ 6 · N · D (lesson 11); how the memory of attention's score matrices grows with the sequence
length (lesson 12).

Shape legend: T = sequence length, chunk = keys per chunk in chunked attention.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from .device import set_seed, single_thread
from .gpt import GPT, GPTConfig
from .model_cache import cached_training
from .training import LMHistory, train_gpt

MIB = 2**20  # bytes in one mebibyte


def fit_power_law(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Fit ``y ≈ c · x**slope`` by a least-squares straight line through (log x, log y); returns ``(slope, c)``.

    On log-log axes a power law is a straight line whose slope is the exponent: 2 means y grows like x².
    """
    log_x, log_y = np.log(np.asarray(x, dtype=float)), np.log(np.asarray(y, dtype=float))
    if log_x.ndim != 1 or log_x.shape != log_y.shape or log_x.size < 2:
        raise ValueError(
            f"fit_power_law needs x and y of the same length, at least 2 points each; got shapes {log_x.shape} and "
            f"{log_y.shape}"
        )
    slope, intercept = np.polyfit(log_x, log_y, 1)
    return float(slope), float(np.exp(intercept))


def scaling_exponent(params: Sequence[float], losses: Sequence[float], irreducible: float = 0.0) -> tuple[float, float]:
    """Fit ``L(N) = E + a · N**(-α)`` for a given irreducible loss ``E``; returns ``(α, a)``.

    The part of the loss above ``E`` is a power law, so it is a straight line through (log N, log(L − E)) whose slope
    is −α (:func:`fit_power_law`). ``E = 0`` is the pure power law ``a · N**(-α)``; Hoffmann et al. (2022) fit ``E``
    together with ``a`` and ``α``. ``params``: (sizes,) N of each model; ``losses``: (sizes,) their losses, each
    above ``E``.
    """
    excess = np.asarray(losses, dtype=float) - irreducible  # (sizes,)
    if np.any(excess <= 0):
        raise ValueError(
            f"every loss must lie above the irreducible loss E={irreducible} (a power law never reaches E); the "
            f"smallest loss is {float(np.min(np.asarray(losses, dtype=float))):.4g}: choose a smaller E"
        )
    slope, scale = fit_power_law(params, excess)
    return -slope, scale


def bootstrap_exponent(
    params: Sequence[float], losses: np.ndarray | Sequence[Sequence[float]], irreducible: float = 0.0,
    resamples: int = 2000, level: float = 0.95, seed: int = 0,
) -> tuple[float, float, float]:
    """α of :func:`scaling_exponent` fitted to the mean loss over seeds, with a percentile bootstrap interval over
    the seeds; returns ``(α, low, high)``.

    ``losses``: (sizes, seeds), the held-out loss of every model size (row) trained with every seed (column). Each
    of ``resamples`` resamples draws, for every size, as many seeds as were run, with replacement, and fits α to
    their means; ``low`` and ``high`` are the quantiles of those α at (1 − level) / 2 and (1 + level) / 2. The
    interval shows how much α moves with the training seed only, not with the choice of sizes, steps or ``E``. Each
    size's seeds are drawn on their own, although seed j gives every size the same batches: the pairing of the seeds
    across sizes is ignored.
    """
    table = np.asarray(losses, dtype=float)  # (sizes, seeds)
    if table.ndim != 2 or table.shape[0] != len(params) or table.shape[1] < 2:
        raise ValueError(
            f"losses must be shaped (sizes, seeds) with one row per model size and at least 2 seeds; got shape "
            f"{table.shape} for {len(params)} sizes: stack each size's losses over seeds as one row"
        )
    alpha, _ = scaling_exponent(params, table.mean(axis=1), irreducible)
    sizes, seeds = table.shape
    picks = np.random.default_rng(seed).integers(0, seeds, size=(resamples, sizes, seeds))  # seeds drawn per size
    means = table[np.arange(sizes)[None, :, None], picks].mean(axis=2)  # (resamples, sizes)
    slopes = np.polyfit(np.log(np.asarray(params, dtype=float)), np.log(means - irreducible).T, 1)[0]  # (resamples,)
    low, high = np.quantile(-slopes, [(1 - level) / 2, (1 + level) / 2])
    return alpha, float(low), float(high)


def fit_misses(
    params: Sequence[float], losses: np.ndarray | Sequence[Sequence[float]], irreducible: float = 0.0
) -> tuple[np.ndarray, float]:
    """How far the fit of :func:`scaling_exponent` to the mean loss over seeds misses each mean, in standard errors
    of that mean; returns ``(misses, chi_squared)``.

    ``losses``: (sizes, seeds) as in :func:`bootstrap_exponent`. A mean of k seeds scatters by its standard error
    sd / √k (sd over the seeds of that size), so ``misses[i]`` = (mean_i − fitted_i) / (sd_i / √k), and
    ``chi_squared`` = Σ misses². Were the standard errors known exactly, a law that held with the seeds as the only
    noise would give ``chi_squared`` about sizes − 2 (two constants fitted, a and α) and seldom a miss beyond 2. But
    each sd is estimated from the same k seeds, so a miss in these units has heavy tails: with normal noise, a mean's
    distance from its true value over its estimated standard error follows Student's t-distribution with k − 1
    degrees of freedom (k = 3: 95 % within ±4.3, not ±2), and ``chi_squared`` inherits the tails. With three seeds,
    large misses hint at a bend away from the law; they do not show one.
    """
    table = np.asarray(losses, dtype=float)  # (sizes, seeds)
    if table.ndim != 2 or table.shape[0] != len(params) or table.shape[1] < 2:
        raise ValueError(
            f"losses must be shaped (sizes, seeds) with one row per model size and at least 2 seeds; got shape "
            f"{table.shape} for {len(params)} sizes"
        )
    means = table.mean(axis=1)  # (sizes,)
    alpha, scale = scaling_exponent(params, means, irreducible)
    fitted = irreducible + scale * np.asarray(params, dtype=float) ** -alpha  # (sizes,)
    standard_errors = table.std(axis=1, ddof=1) / np.sqrt(table.shape[1])  # (sizes,)
    misses = (means - fitted) / standard_errors  # (sizes,)
    return misses, float(np.sum(misses**2))


def training_flops(params: float, tokens: float) -> float:
    """Training compute C ≈ 6 · N · D FLOPs (Kaplan et al., 2020): per token, 2 · N for the forward pass (one
    multiply-add per parameter) and 4 · N for the backward pass. ``params``: N, ``tokens``: D trained on."""
    return 6.0 * params * tokens


def score_memory_mib(
    length: int, chunk_size: int | None, heads: int = 1, bytes_per_number: int = 4, matrices: int = 1
) -> float:
    """MiB that one attention layer's score-sized matrices need for one sequence: ``matrices · heads · T · T``
    numbers at once, or ``matrices · heads · T · chunk`` when the keys are processed ``chunk_size`` at a time
    (``chunked_attention``).

    ``matrices``: how many such matrices are alive together, 1 for the scores alone, 2 for the scores and the
    softmax weights that the readable path writes while the scores still exist. ``bytes_per_number``: 4 for
    float32, 2 for float16 / bfloat16.
    """
    columns = length if chunk_size is None else min(chunk_size, length)
    return matrices * heads * length * columns * bytes_per_number / MIB


def non_embedding_parameters(model: nn.Module) -> int:
    """Parameters of a GPT without its vocabulary and position tables, the N of Kaplan et al.'s scaling laws.

    Leaves out ``token_embedding``, ``position_embedding`` and an untied output ``head`` (a (V, d_model) table
    like the token embedding); counts the blocks and the final LayerNorm, about 12 · layers · d_model² when
    d_ff = 4 · d_model. A tensor shared by two modules counts once.
    """
    tables = {id(module.weight) for name in ("token_embedding", "position_embedding", "head")
              if (module := getattr(model, name, None)) is not None}
    return sum(p.numel() for p in model.parameters() if id(p) not in tables)


@dataclass
class WidthLadder:
    """What :func:`train_width_ladder` measured, as plain numbers and lists.

    ``params[i]``: N of ``widths[i]`` (:func:`non_embedding_parameters`); ``all_params[i]``: every parameter of it,
    the vocabulary and position tables included (the count of Hoffmann et al.); ``valid_loss[i][j][k]``: the
    held-out loss of width ``widths[i]`` trained with seed ``seeds[j]``, after ``eval_steps[k]`` steps;
    ``characters_per_step``: batch_size · context, so step s has trained on s · characters_per_step characters;
    ``seconds``: the training time of all runs together.
    """

    widths: list[int]
    seeds: list[int]
    lr: float
    characters_per_step: int
    params: list[int] = field(default_factory=list)
    all_params: list[int] = field(default_factory=list)
    eval_steps: list[int] = field(default_factory=list)
    valid_loss: list[list[list[float]]] = field(default_factory=list)
    seconds: float = 0.0

    def losses(self, step: int | None = None) -> np.ndarray:
        """(widths, seeds) held-out losses after ``step`` steps (default: the last)."""
        k = -1 if step is None else self.eval_steps.index(step)
        return np.array([[run[k] for run in width] for width in self.valid_loss])


def _seeded_gpt(config: GPTConfig, seed: int) -> GPT:
    set_seed(seed)
    return GPT(config)


def _train_one_thread(model: GPT, **arguments: Any) -> LMHistory:
    with single_thread():  # tiny matrices: one thread is fastest, and steady beside other work
        return train_gpt(model, **arguments)


def train_width_ladder(
    train: torch.Tensor, valid: torch.Tensor, vocab_size: int, widths: Sequence[int], seeds: Sequence[int],
    steps: int, *, lr: float, layers: int = 2, heads: int = 2, context: int = 32, batch_size: int = 16,
    eval_every: int = 25, eval_windows: int = 64,
) -> WidthLadder:
    """Train one GPT per width and seed that differ in ``d_model`` only (``d_ff = 4 · d_model`` follows it; depth,
    heads, context, data, steps and learning rate stay), each by :func:`~transformer_lib.training.train_gpt` on one
    thread, and record the held-out loss every ``eval_every`` steps on the same ``eval_windows`` windows.

    ``seed`` sets both the initial weights and the batches. At a constant learning rate the model after step s of a
    longer run is the model a run of s steps gives, so the losses along the way are a sweep of training characters
    at each fixed size.

    Each run (one width, one seed) goes through the model cache (:mod:`~transformer_lib.model_cache`): lesson 11
    trains it once, and its tests, asking for the same run on the same setting, load it.
    """
    ladder = WidthLadder(list(widths), list(seeds), lr, batch_size * context)
    data = hashlib.sha256(train.numpy().tobytes() + b"|" + valid.numpy().tobytes()).hexdigest()  # names the splits
    for width in widths:
        config = GPTConfig(vocab_size=vocab_size, block_size=context, d_model=width, num_heads=heads,
                           num_layers=layers, d_ff=4 * width)
        runs = []
        for seed in seeds:
            arguments = {"config": config, "data": data, "steps": steps, "lr": lr, "seed": seed,
                         "batch_size": batch_size, "eval_every": eval_every, "eval_windows": eval_windows}
            model, history = cached_training(
                "width-ladder", arguments, functools.partial(_seeded_gpt, config, seed),
                functools.partial(_train_one_thread, train=train, valid=valid, steps=steps, batch_size=batch_size,
                                  lr=lr, seed=seed, eval_every=eval_every, eval_windows=eval_windows),
                LMHistory, torch.device("cpu"))
            runs.append(history.valid_loss)
            ladder.eval_steps, ladder.seconds = history.eval_steps, ladder.seconds + history.seconds
        ladder.params.append(non_embedding_parameters(model))
        ladder.all_params.append(sum(p.numel() for p in model.parameters()))
        ladder.valid_loss.append(runs)
    return ladder
