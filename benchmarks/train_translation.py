"""Train the lesson 09 translation model from scratch and measure it on the held-out test sentences.

A fixed, seeded number of steps (not a time budget), so every run trains the same model on the same device; the wall
time is what varies. Last line: ``exact_match=<fraction of test sentences translated exactly> seconds=<training wall
time> device=<device>``.
Run: ``python benchmarks/train_translation.py`` (the lesson's 400 steps) or ``--quick`` (30 steps, a smoke test).
"""

from __future__ import annotations

import argparse

from transformer_lib import TrainingConfig, exact_match, get_device, train_translation_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="30 steps only: checks the script, not the model")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    config = TrainingConfig(seed=args.seed, **({"steps": 30} if args.quick else {}))
    device = get_device()
    run = train_translation_model(config, device=device, progress=False)
    accuracy = exact_match(run.model, run.task, "test")
    print(f"{config.steps} steps, batch {config.batch_size}, on {device}: "
          f"final validation loss {run.history.valid_loss[-1]:.3f}")
    print(f"exact_match={accuracy:.4f} seconds={run.seconds:.1f} device={device.type}")


if __name__ == "__main__":
    main()
