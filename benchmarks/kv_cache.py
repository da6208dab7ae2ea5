"""Generating tokens with and without the KV cache, side by side, with the same small encoder-decoder.

Without the cache every step runs the decoder over the whole prefix again (step t costs about t positions); with it,
each step runs only the newest token and reuses the keys and values stored for the earlier ones. The model is
untrained (speed does not depend on the weights) and no end token is given, so both runs generate every token.

The tokens of the two runs are the same only if no greedy choice is a near-tie that the two code paths' rounding
could break differently: ``smallest_gap`` is the least lead of a chosen token's logit over the runner-up, in either
run (``tests/test_benchmarks.py`` requires it to be far above float32's rounding before it trusts ``identical``).

Last line: ``speedup=<uncached time / cached time> identical=<true|false> smallest_gap=<least lead> …``.
Run: ``python benchmarks/kv_cache.py`` (512 tokens) or ``--quick`` (64 tokens).
"""

from __future__ import annotations

import argparse
import time

import torch

from transformer_lib.decoding import GreedyWithMargin, generate_translation
from transformer_lib.device import get_device, set_seed
from transformer_lib.model import Transformer, TransformerConfig

NO_END_TOKEN = -1  # never produced, so generation runs for all max_len steps
SOURCE_LENGTH = 32


def small_decoder(max_len: int, device: torch.device) -> Transformer:
    """An untrained Transformer: d_model 256, 4 heads, 2 encoder and 2 decoder layers, d_ff 1024."""
    set_seed(0)
    config = TransformerConfig(
        src_vocab_size=1000,
        tgt_vocab_size=1000,
        d_model=256,
        num_heads=4,
        num_encoder_layers=2,
        num_decoder_layers=2,
        d_ff=1024,
        dropout=0.0,
        max_len=max(max_len + 1, SOURCE_LENGTH),
    )
    return Transformer(config).to(device).eval()


def timed_generation(
    model: Transformer, src: torch.Tensor, tokens: int, use_cache: bool
) -> tuple[torch.Tensor, float, float]:
    """Greedy tokens, seconds, and the smallest lead of a chosen token over the runner-up."""
    picker = GreedyWithMargin()
    start = time.perf_counter()
    generated = generate_translation(model, src, 1, NO_END_TOKEN, tokens, pick=picker, use_cache=use_cache)
    if src.device.type == "cuda":
        torch.cuda.synchronize()
    return generated, time.perf_counter() - start, picker.smallest_gap


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small size for tests (64 tokens)")
    parser.add_argument("--tokens", type=int, default=None, help="tokens to generate (default 512)")
    args = parser.parse_args()
    tokens = args.tokens or (64 if args.quick else 512)

    device = get_device()
    model = small_decoder(tokens, device)
    src = torch.randint(3, 1000, (1, SOURCE_LENGTH), generator=torch.Generator().manual_seed(0)).to(device)  # (1, S)
    timed_generation(model, src, 8, use_cache=True)  # warm-up
    cached, cached_s, cached_gap = timed_generation(model, src, tokens, use_cache=True)
    uncached, uncached_s, uncached_gap = timed_generation(model, src, tokens, use_cache=False)
    identical = torch.equal(cached, uncached)

    print(f"{tokens} tokens, 1 sentence, d_model 256, 2 decoder layers, on {device}")
    print(f"  with the KV cache    {cached_s:7.2f} s  ({cached_s / tokens * 1e3:.1f} ms per token)")
    print(f"  without (recompute)  {uncached_s:7.2f} s  ({uncached_s / tokens * 1e3:.1f} ms per token)")
    print(
        f"speedup={uncached_s / cached_s:.2f} identical={str(identical).lower()} "
        f"smallest_gap={min(cached_gap, uncached_gap):.2e} tokens={tokens} "
        f"cached_s={cached_s:.2f} uncached_s={uncached_s:.2f} device={device.type}"
    )


if __name__ == "__main__":
    main()
