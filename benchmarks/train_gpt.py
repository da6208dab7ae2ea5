"""Train lesson 11's character-level GPT for longer, on Python's documentation, and measure it on the held-out split.

The sizes of the measurement in the course's notes, which are also the course's yardstick (``transformer_lib.speed``,
one definition for both): 4 blocks of width 128, 4 heads, context 64, batch 12, AdamW at 1e-3. A fixed, seeded number
of steps (not a time budget), so every run trains the same model on one machine; the wall time is what varies. Goals
on 2 CPU cores: a held-out loss of at most 1.5 nats per character within 60 s, and a training step at least as fast as
nanoGPT's model of the same sizes. nanoGPT is not a dependency, so the second is measured against ``ReferenceGPT``
below: nanoGPT's model written with PyTorch's own modules (``nn.LayerNorm``, one fused q/k/v projection,
``F.scaled_dot_product_attention(is_causal=True)``, GELU), timed in the same run on the same batches, in alternating
rounds. "At least as fast" allows 5 %: the median step rates of two identical models differ
by about that much from run to run on a shared machine.

Last line: ``val_loss=<held-out loss> seconds=<training wall time> steps_per_s=<training steps per second>
speed_vs_reference=<our steps/s over the reference's> …``.
Run: ``python benchmarks/train_gpt.py`` (1500 steps) or ``--quick`` (20 steps, a smoke test).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn

from transformer_lib import (
    GPT,
    CharTokenizer,
    GPTConfig,
    baseline_losses,
    evaluate_lm_loss,
    get_device,
    python_docs,
    random_windows,
    set_seed,
    train_gpt,
    train_valid_split,
    yardstick_config,
)
from transformer_lib.speed import YARDSTICK_BATCH_SIZE, YARDSTICK_LR


class ReferenceBlock(nn.Module):
    """nanoGPT's block: pre-LN, fused q/k/v, causal fused attention, a GELU MLP of width 4 * d_model."""

    def __init__(self, d_model: int, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.ln_1, self.ln_2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.c_attn, self.c_proj = nn.Linear(d_model, 3 * d_model), nn.Linear(d_model, d_model)
        self.c_fc, self.mlp_proj = nn.Linear(d_model, 4 * d_model), nn.Linear(4 * d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        q, k, v = (part.view(batch, length, self.num_heads, -1).transpose(1, 2)  # (batch, heads, T, d_head)
                   for part in self.c_attn(self.ln_1(x)).split(width, dim=2))
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (batch, heads, T, d_head)
        x = x + self.c_proj(attended.transpose(1, 2).reshape(batch, length, width))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))


class ReferenceGPT(nn.Module):
    """nanoGPT's model at the given sizes: token and position embeddings, blocks, a final LayerNorm, a linear head."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.token_embedding = nn.Embedding(config.vocab_size, config.d_model)
        self.position_embedding = nn.Embedding(config.block_size, config.d_model)
        self.blocks = nn.ModuleList(ReferenceBlock(config.d_model, config.num_heads) for _ in range(config.num_layers))
        self.final_norm = nn.LayerNorm(config.d_model)
        self.head = nn.Linear(config.d_model, config.vocab_size, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1], device=tokens.device)  # (T,)
        x = self.token_embedding(tokens) + self.position_embedding(positions)  # (batch, T, d_model)
        for block in self.blocks:
            x = block(x)
        return self.head(self.final_norm(x))  # (batch, T, V)


def steps_per_second(model: nn.Module, batches: list[tuple[torch.Tensor, torch.Tensor]]) -> float:
    """Training steps per second (AdamW, as ``train_gpt``) over ``batches`` of (inputs, targets)."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=YARDSTICK_LR)
    start = time.perf_counter()
    for inputs, targets in batches:
        logits = model(inputs)  # (batch, T, V)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return len(batches) / (time.perf_counter() - start)


def speed_vs_reference(config: GPTConfig, data: torch.Tensor, rounds: int, steps: int, device: torch.device) -> float:
    """Median over alternating rounds of (our GPT's step rate) / (the reference's), on the same batches."""
    generator = torch.Generator().manual_seed(0)
    batches = [tuple(t.to(device) for t in random_windows(data, config.block_size, YARDSTICK_BATCH_SIZE, generator))
               for _ in range(steps)]
    ours, reference = GPT(config).to(device), ReferenceGPT(config).to(device)
    steps_per_second(ours, batches[:5]), steps_per_second(reference, batches[:5])  # warm up both
    ratios = [steps_per_second(ours, batches) / steps_per_second(reference, batches) for _ in range(rounds)]
    return statistics.median(ratios)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 steps only: checks the script, not the model")
    parser.add_argument("--steps", type=int, default=None, help="training steps (default 1500)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    steps = args.steps or (20 if args.quick else 1500)
    eval_windows = 16 if args.quick else 512

    text = python_docs()
    tokenizer = CharTokenizer(text)
    train, valid = train_valid_split(tokenizer.encode(text), valid_fraction=0.1)
    device = get_device()
    set_seed(args.seed)
    config = yardstick_config(len(tokenizer))
    model = GPT(config).to(device)
    history = train_gpt(model, train, steps, batch_size=YARDSTICK_BATCH_SIZE, lr=YARDSTICK_LR, seed=args.seed)
    val_loss = evaluate_lm_loss(model, valid, config.block_size, windows=eval_windows)
    bigram = baseline_losses(train, valid, len(tokenizer))["bigram"]
    relative_speed = speed_vs_reference(config, train, rounds=1 if args.quick else 5, steps=5 if args.quick else 60,
                                        device=device)

    print(f"{steps} steps, batch {YARDSTICK_BATCH_SIZE}, {config.num_layers} blocks of width {config.d_model}, context "
          f"{config.block_size}, on {device}; held-out loss of the bigram baseline {bigram:.3f}")
    goal_met = val_loss <= 1.5 and history.seconds <= 60 and relative_speed >= 0.95
    print(f"val_loss={val_loss:.3f} seconds={history.seconds:.1f} steps_per_s={steps / history.seconds:.1f} "
          f"speed_vs_reference={relative_speed:.2f} steps={steps} goal_met={str(goal_met).lower()} "
          f"device={device.type}")


if __name__ == "__main__":
    main()
