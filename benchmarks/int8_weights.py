"""int8 weights (one scale per output channel, dequantized on the fly) against float32, on a trained GPT.

The model is lesson 11's character-level GPT, 4 blocks of width 128, trained on Python's documentation for a fixed,
seeded number of steps. Every linear layer is replaced by ``Int8Linear`` (``quantize_linear_layers``). Goals: the
linear weights' memory (int8 values plus float32 scales) at most 0.3 of float32, and a held-out loss at most 2 %
above float32's, measured on the same fixed windows. Per-tensor scales are measured beside it.

Last line: ``memory_ratio=<int8 / float32 bytes of the linear weights> loss_increase=<relative> …``.
Run: ``python benchmarks/int8_weights.py`` or ``--quick`` (20 steps, a smoke test).
"""

from __future__ import annotations

import argparse

from transformer_lib import (
    GPT,
    CharTokenizer,
    GPTConfig,
    evaluate_lm_loss,
    get_device,
    python_docs,
    set_seed,
    train_gpt,
    train_valid_split,
)
from transformer_lib.quantization import quantize_linear_layers, state_nbytes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 training steps (a smoke test)")
    args = parser.parse_args()
    device = get_device()
    text = python_docs()
    tokenizer = CharTokenizer(text)
    train, valid = train_valid_split(tokenizer.encode(text), valid_fraction=0.1)
    set_seed(0)
    config = GPTConfig(vocab_size=len(tokenizer), block_size=64, d_model=128, num_heads=4, num_layers=4, d_ff=512)
    model = GPT(config).to(device)
    train_gpt(model, train, steps=20 if args.quick else 1000, batch_size=12, lr=1e-3)
    model.eval()
    per_channel = quantize_linear_layers(model)
    per_tensor = quantize_linear_layers(model, per_channel=False)
    windows = 32 if args.quick else 256
    losses = {name: evaluate_lm_loss(m, valid, config.block_size, windows=windows)
              for name, m in (("float32", model), ("per_channel", per_channel), ("per_tensor", per_tensor))}
    memory_ratio = state_nbytes(per_channel, linear_weights_only=True) / state_nbytes(model, linear_weights_only=True)
    whole_ratio = state_nbytes(per_channel) / state_nbytes(model)
    increase = losses["per_channel"] / losses["float32"] - 1
    tensor_increase = losses["per_tensor"] / losses["float32"] - 1
    print(f"held-out loss on {windows} windows: " + ", ".join(f"{k} {v:.4f}" for k, v in losses.items()))
    print(f"linear weights: {memory_ratio:.3f} of float32; whole state {whole_ratio:.3f}")
    goal_met = memory_ratio <= 0.3 and increase <= 0.02
    print(
        f"memory_ratio={memory_ratio:.3f} loss_increase={increase:.4f} per_tensor_increase={tensor_increase:.4f} "
        f"state_ratio={whole_ratio:.3f} val_loss={losses['float32']:.3f} goal_met={str(goal_met).lower()} "
        f"device={device.type}"
    )


if __name__ == "__main__":
    main()
