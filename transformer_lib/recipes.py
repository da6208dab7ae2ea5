"""The recipe of lesson 09's translator: the task, the model's sizes and the seeded training run.

Lesson 10 loads the model lesson 09 saves; when the checkpoint is missing, it retrains with this recipe.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from .data import TranslationTask, make_translation_task
from .device import get_device, set_seed
from .model import Transformer, TransformerConfig
from .training import History, TrainingConfig, train


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
    config: TrainingConfig | None = None, device: torch.device | None = None, progress: bool = True,
    valid_every: int = 25,
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
        history = train(model, task, config, progress=progress, valid_every=valid_every)
        seconds = time.perf_counter() - started
    finally:
        torch.set_num_threads(threads)
    return TrainingRun(model, task, history, seconds)
