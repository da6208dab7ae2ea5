"""Train lesson 11's character-level GPT for longer, on Python's documentation, and measure it on the held-out split.

The sizes of the measurement in the course's notes: 4 blocks of width 128, 4 heads, context 64, batch 12, AdamW at
1e-3. A fixed, seeded number of steps (not a time budget), so every run trains the same model on one machine; the
wall time is what varies. Goal on 2 CPU cores: a held-out loss of at most 1.5 nats per character within 60 s.

Last line: ``val_loss=<held-out loss> seconds=<training wall time> steps_per_s=<training steps per second> …``.
Run: ``python benchmarks/train_gpt.py`` (1500 steps) or ``--quick`` (20 steps, a smoke test).
"""

from __future__ import annotations

import argparse

from transformer_lib import (
    GPT,
    CharTokenizer,
    GPTConfig,
    baseline_losses,
    evaluate_lm_loss,
    get_device,
    python_docs,
    set_seed,
    train_gpt,
    train_valid_split,
)


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
    config = GPTConfig(len(tokenizer), block_size=64, d_model=128, num_heads=4, num_layers=4, d_ff=512)
    model = GPT(config).to(device)
    history = train_gpt(model, train, steps, batch_size=12, lr=1e-3, seed=args.seed)
    val_loss = evaluate_lm_loss(model, valid, config.block_size, windows=eval_windows)
    bigram = baseline_losses(train, valid, len(tokenizer))["bigram"]

    print(f"{steps} steps, batch 12, {config.num_layers} blocks of width {config.d_model}, context "
          f"{config.block_size}, on {device}; held-out loss of the bigram baseline {bigram:.3f}")
    print(f"val_loss={val_loss:.3f} seconds={history.seconds:.1f} steps_per_s={steps / history.seconds:.1f} "
          f"steps={steps} goal_met={str(val_loss <= 1.5 and history.seconds <= 60).lower()} device={device.type}")


if __name__ == "__main__":
    main()
