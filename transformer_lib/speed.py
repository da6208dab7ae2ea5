"""The course's yardstick: how fast this machine trains the GPT benchmark's model, so a time measured here can be
stated at the reference machine's speed.

Machines differ by about 2x in speed, so a time means little without the speed of the machine that took it. The
yardstick is ``benchmarks/train_gpt.py``'s model (4 blocks of width 128, 4 heads, d_ff 512, context 64, batch 12,
AdamW at 1e-3, on :func:`~transformer_lib.data.python_docs`), trained by :func:`~transformer_lib.training.train_gpt`.
The reference machine, a Colab-class machine with 2 vCPUs, trains it at ``REFERENCE_STEPS_PER_S`` steps per second;
the course states its time budgets at that speed.
"""

from __future__ import annotations

import statistics

import torch

from .data import CharTokenizer, python_docs
from .gpt import GPT, GPTConfig
from .training import train_gpt

REFERENCE_STEPS_PER_S = 15.0  # the reference machine (2 vCPUs, Colab-class) on the yardstick model
YARDSTICK_BATCH_SIZE = 12
YARDSTICK_LR = 1e-3
WARMUP_STEPS = 2  # the first steps allocate AdamW's state and warm the kernels: not timed


def yardstick_config(vocab_size: int) -> GPTConfig:
    """The GPT benchmark's model: 4 blocks of width 128, 4 heads, d_ff 512, contexts of 64 characters."""
    return GPTConfig(vocab_size, block_size=64, d_model=128, num_heads=4, num_layers=4, d_ff=512)


def machine_speed(seconds: float = 3.0, rounds: int = 5) -> float:
    """Training steps per second of the yardstick model on this machine's CPU, the median of ``rounds`` rounds that
    take about ``seconds`` together (after ``WARMUP_STEPS`` untimed steps).

    It runs with the caller's thread count (``torch.get_num_threads()``), as a lesson would in the same process or
    a kernel started with the same environment: pass a process set up like the one whose times it should scale.
    The batches come from a seeded generator and the model from a fixed seed (the caller's random state is left
    alone), so every call does the same work; only the clock differs. The median of short rounds is steadier than
    one long round when something else briefly takes the CPU.
    """
    if seconds <= 0 or rounds < 1:
        raise ValueError(f"machine_speed needs seconds > 0 and rounds >= 1, got seconds={seconds}, rounds={rounds}")
    text = python_docs()
    tokenizer = CharTokenizer(text)
    data = tokenizer.encode(text)  # (N,) token ids
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = GPT(yardstick_config(len(tokenizer)))
    train_gpt(model, data, WARMUP_STEPS, batch_size=YARDSTICK_BATCH_SIZE, lr=YARDSTICK_LR)
    one_step = train_gpt(model, data, 1, batch_size=YARDSTICK_BATCH_SIZE, lr=YARDSTICK_LR).seconds
    steps = max(1, round(seconds / rounds / one_step))  # per round
    rates = [steps / train_gpt(model, data, steps, batch_size=YARDSTICK_BATCH_SIZE, lr=YARDSTICK_LR, seed=seed).seconds
             for seed in range(rounds)]
    return statistics.median(rates)


def at_reference(seconds: float, steps_per_s: float) -> float:
    """``seconds`` measured on a machine of ``steps_per_s`` (:func:`machine_speed`), stated at the reference
    machine's speed: a machine twice as fast took half the time the reference would."""
    if steps_per_s <= 0:
        raise ValueError(f"steps_per_s must be positive, got {steps_per_s}: measure it with machine_speed()")
    return seconds * steps_per_s / REFERENCE_STEPS_PER_S
