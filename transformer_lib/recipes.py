"""The recipes of the course's trained models: lesson 09's translator, lesson 11's character GPT, and lesson 17's
GPT over BPE tokens and its character GPT trained on with leaked held-out text (the task or text, the model's sizes
and the seeded training run).

Lesson 10 loads the translator lesson 09 saves; when the checkpoint is missing, it retrains with its recipe. Lesson 10
also trains a shorter run of the character GPT, whose next-character distributions show what sampling filters do.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import asdict, dataclass
from typing import Any

import torch

from .bpe import BPETokenizer, train_bpe
from .data import CharTokenizer, TranslationTask, make_translation_task, python_docs, train_valid_split
from .device import get_device, set_seed, single_thread
from .gpt import GPT, GPTConfig
from .model import Transformer, TransformerConfig
from .model_cache import cached_continued_training, cached_training
from .training import History, LMHistory, LMTrainingState, TrainingConfig, train, train_gpt


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
    valid_every: int = 25, positions: bool = True,
) -> TrainingRun:
    """Generate the lesson 09 task and train its model from scratch: a fixed number of seeded steps, so the same
    config gives the same model on the same device. A run already in the model cache is loaded instead
    (:mod:`~transformer_lib.model_cache`: the same weights and history, without a progress bar).

    On the CPU it trains with one thread: the matrices are too small to gain from splitting each operation across
    cores, and spare cores then stay free for other work (a second notebook, the data pipeline).

    ``positions=False`` zeroes the sinusoidal table the embeddings add (lesson 09's model without positions): the
    same initial weights and batches, so it is the control of the same run with positions.
    """
    config = config or TrainingConfig()
    device = device or get_device()
    task = make_translation_task(seed=config.seed)

    def build() -> Transformer:
        set_seed(config.seed)
        model = Transformer(translation_model_config(task))
        if not positions:
            model.positions.zero_()  # the buffer of sinusoids added to the embeddings
        return model.to(device)

    def run(model: Transformer) -> History:
        started = time.perf_counter()
        with single_thread():  # a tiny model: one CPU thread is as fast (a GPU is not affected)
            history = train(model, task, config, progress=progress, valid_every=valid_every)
        history.seconds = time.perf_counter() - started
        return history

    arguments = {"config": config, "valid_every": valid_every, "positions": positions}
    model, history = cached_training("translation", arguments, build, run, History, device)
    return TrainingRun(model, task, history, history.seconds)


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


def train_char_gpt(
    steps: int = 600, device: torch.device | None = None, *, config: GPTConfig | None = None, batch_size: int = 32,
    lr: float = 3e-3, seed: int = 0, eval_every: int | None = 100, eval_windows: int = 32,
) -> CharGPTRun:
    """Lesson 11's run: a GPT on Python's documentation (``python_docs``, the last 10 % held out), seeded, trained
    by ``train_gpt`` with AdamW at ``lr`` for ``steps`` steps of ``batch_size`` windows. Lesson 11 takes
    :func:`char_gpt_config` for 600 steps and builds the run step by step; other lessons pass another ``config``
    (whose ``vocab_size`` must be the text's number of characters). Every ``eval_every`` steps (None: never), both
    splits are measured on ``eval_windows`` windows.

    It trains on one CPU thread, like the course's other recipes. The same arguments give the same model on the same
    machine; a run already in the model cache is loaded instead (:mod:`~transformer_lib.model_cache`), so lessons
    and tests that share a run train it once, and a longer run of the same arguments goes on from the longest one
    cached (lesson 11's 600 steps from lesson 10's 300).
    """
    device = device or get_device()
    text = python_docs()
    tokenizer = CharTokenizer(text)
    train_split, valid_split = train_valid_split(tokenizer.encode(text), valid_fraction=0.1)
    config = config or char_gpt_config(len(tokenizer))
    if config.vocab_size != len(tokenizer):
        raise ValueError(f"config.vocab_size={config.vocab_size}, but Python's documentation has {len(tokenizer)} "
                         "distinct characters: pass GPTConfig(vocab_size=len(CharTokenizer(python_docs())), ...)")

    def build() -> GPT:
        set_seed(seed)
        return GPT(config).to(device)

    def run(model: GPT, stored: dict[str, Any] | None) -> dict[str, Any]:
        state = LMTrainingState.from_dict(stored) if stored else LMTrainingState()
        with single_thread():  # a small model: one CPU thread is nearly as fast, and far steadier beside other work
            train_gpt(model, train_split, steps=steps, valid=valid_split if eval_every else None,
                      batch_size=batch_size, lr=lr, seed=seed, eval_every=eval_every, eval_windows=eval_windows,
                      state=state)
        return asdict(state)

    arguments = {"config": config, "batch_size": batch_size, "lr": lr, "seed": seed, "eval_every": eval_every,
                 "eval_windows": eval_windows}
    model, state = cached_continued_training("char-gpt", arguments, steps, build, run, device)
    history = LMHistory(**state["history"])
    return CharGPTRun(model, tokenizer, train_split, valid_split, history)


def python_docs_split(valid_fraction: float = 0.1) -> tuple[str, str]:
    """Python's documentation cut where :func:`train_char_gpt` cuts it: (training text, held-out text)."""
    text = python_docs()
    cut = int(len(text) * (1 - valid_fraction))  # as train_valid_split cuts one id per character
    return text[:cut], text[cut:]


@dataclass
class BPEGPTRun:
    """The result of :func:`train_bpe_gpt`: the model, its tokenizer, both splits as token ids (N,) and the history."""

    model: GPT
    tokenizer: BPETokenizer
    train: torch.Tensor
    valid: torch.Tensor
    history: LMHistory


def train_bpe_gpt(
    steps: int = 300, num_merges: int = 256, device: torch.device | None = None, seed: int = 0
) -> BPEGPTRun:
    """A GPT of :func:`char_gpt_config`'s sizes over byte-level BPE tokens (lesson 12's ``train_bpe`` with
    ``num_merges`` merges, learned on the training text only), trained as :func:`train_char_gpt` trains: the same
    text split, batch, learning rate and seed. Each token stands for about two characters, so the same steps read
    about twice the text. Cached like the other recipes."""
    device = device or get_device()
    train_text, valid_text = python_docs_split()
    tokenizer = train_bpe(train_text, num_merges)
    train_split, valid_split = (torch.tensor(tokenizer.encode(text)) for text in (train_text, valid_text))
    config = GPTConfig(**{**asdict(char_gpt_config(1)), "vocab_size": len(tokenizer)})

    def build() -> GPT:
        set_seed(seed)
        return GPT(config).to(device)

    def run(model: GPT) -> LMHistory:
        with single_thread():
            return train_gpt(model, train_split, steps=steps, batch_size=32, lr=3e-3, seed=seed)

    arguments = {"config": config, "steps": steps, "num_merges": num_merges, "seed": seed}
    model, history = cached_training("bpe-gpt", arguments, build, run, LMHistory, device)
    return BPEGPTRun(model, tokenizer, train_split, valid_split, history)


def leaked_char_gpt(
    extra_steps: int, leaked: str = "", repeats: int = 0, base_steps: int = 300, device: torch.device | None = None,
    seed: int = 0,
) -> CharGPTRun:
    """:func:`train_char_gpt`'s ``base_steps`` run, trained ``extra_steps`` more (a fresh AdamW, the same rate) on
    its training text followed by ``leaked`` written out ``repeats`` times: held-out text that leaked into training.
    With no leak it is the control, the same extra steps on the training text alone."""
    device = device or get_device()
    base = train_char_gpt(base_steps, device, seed=seed)
    data = torch.cat([base.train, *[base.tokenizer.encode(leaked)] * repeats])

    def build() -> GPT:
        model = GPT(base.model.config).to(device)
        model.load_state_dict(base.model.state_dict())
        return model

    def run(model: GPT) -> LMHistory:
        with single_thread():
            return train_gpt(model, data, steps=extra_steps, batch_size=32, lr=3e-3, seed=seed + 1)

    arguments = {"base_steps": base_steps, "extra_steps": extra_steps, "repeats": repeats, "seed": seed,
                 "leaked": hashlib.sha256(leaked.encode()).hexdigest()}
    model, history = cached_training("leaked-char-gpt", arguments, build, run, LMHistory, device)
    return CharGPTRun(model, base.tokenizer, base.train, base.valid, history)
