"""The recipes of the course's trained models: lesson 09's translator and lesson 11's character GPT (the task or
text, the model's sizes and the seeded training run).

Lesson 10 loads the translator lesson 09 saves; when the checkpoint is missing, it retrains with its recipe. Lesson 10
also trains a shorter run of the character GPT, whose next-character distributions show what sampling filters do.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from .data import CharTokenizer, TranslationTask, make_translation_task, python_docs, train_valid_split
from .device import get_device, set_seed, single_thread
from .gpt import GPT, GPTConfig
from .model import Transformer, TransformerConfig
from .training import History, LMHistory, TrainingConfig, train, train_gpt


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
    started = time.perf_counter()
    with single_thread():  # a tiny model: one CPU thread is as fast (a GPU is not affected)
        history = train(model, task, config, progress=progress, valid_every=valid_every)
    seconds = time.perf_counter() - started
    return TrainingRun(model, task, history, seconds)


def char_gpt_config(vocab_size: int) -> GPTConfig:
    """The character GPT lesson 11 trains: 2 blocks of width 64, 4 heads, d_ff 256, contexts of 64 characters."""
    return GPTConfig(vocab_size=vocab_size, block_size=64, d_model=64, num_heads=4, num_layers=2, d_ff=256)


@dataclass
class CharGPTRun:
    """The result of :func:`train_char_gpt`: the model, its tokenizer, both splits (N,) and the loss history."""

    model: GPT
    tokenizer: CharTokenizer
    train: torch.Tensor
    valid: torch.Tensor
    history: LMHistory


def train_char_gpt(steps: int = 600, device: torch.device | None = None) -> CharGPTRun:
    """Lesson 11's run: :func:`char_gpt_config` on Python's documentation (``python_docs``, the last 10 % held out),
    seed 0, ``train_gpt`` with batch 32 and AdamW at 3e-3, for ``steps`` steps (lesson 11 takes 600).

    The same steps give the same model on the same machine; lesson 11 builds and trains it step by step.
    """
    device = device or get_device()
    text = python_docs()
    tokenizer = CharTokenizer(text)
    train_split, valid_split = train_valid_split(tokenizer.encode(text), valid_fraction=0.1)
    set_seed(0)
    model = GPT(char_gpt_config(len(tokenizer))).to(device)
    history = train_gpt(model, train_split, steps=steps, batch_size=32, lr=3e-3)
    return CharGPTRun(model, tokenizer, train_split, valid_split, history)
