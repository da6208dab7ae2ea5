"""How long ``compare_models`` takes on a model of GPT-2 small's shape, with and without a planted mistake.

The course's GPT is loaded from a randomly initialised Hugging Face ``GPT2LMHeadModel`` of GPT-2 small's shape
(12 layers, d_model 768, 12 heads, 50 257 tokens; nothing is downloaded) and compared with it on one sequence of 64
tokens, first as loaded (no difference expected), then with block 6's attention scores left unscaled (the comparison
must find ``blocks.6.self_attn`` and name ``unscaled-scores``). The seconds include both forward passes, the hooks
and the diagnosis; ``forward_seconds`` is the two plain forward passes alone, and every time is taken after one
untimed comparison (the first touches of a new model's memory take several times longer).

Last line: ``seconds=<unplanted comparison> planted_seconds=<planted comparison> forward_seconds=<two forwards>
overhead=<seconds / forward_seconds> differs=<true|false> found=<true|false> named=<true|false> …``.
Run: ``python benchmarks/compare_models.py`` or ``--quick`` (7 layers, d_model 64).
"""

from __future__ import annotations

import argparse
import time
import types

import torch
import transformers

from transformer_lib.compare import Comparison, compare_models
from transformer_lib.device import set_seed
from transformer_lib.gpt import GPT

PLANTED_BLOCK = 6


def gpt2_pair(quick: bool) -> tuple[GPT, torch.nn.Module]:
    """(the course's GPT, Hugging Face's GPT2LMHeadModel) with the same random weights, in eval mode."""
    set_seed(0)
    sizes = dict(n_layer=PLANTED_BLOCK + 1, n_embd=64, n_head=4, vocab_size=1000) if quick else {}
    hf = transformers.GPT2LMHeadModel(transformers.GPT2Config(**sizes)).eval()
    return GPT.from_hf_gpt2(hf).eval(), hf


def unscaled_attention(self: torch.nn.Module, x: torch.Tensor, cache: object = None,
                       need_weights: bool = False) -> tuple[torch.Tensor, None]:
    """The course's causal self-attention with its scores not scaled by 1/√d_k."""
    output = torch.nn.functional.scaled_dot_product_attention(
        *(t.view(*x.shape[:2], self.num_heads, -1).transpose(1, 2) for t in (self.q_proj(x), self.k_proj(x),
                                                                            self.v_proj(x))),
        is_causal=True, scale=1.0,
    )  # (batch, heads, T, d_head)
    return self.out_proj(output.transpose(1, 2).flatten(2)), None


def forward_seconds(ours: GPT, hf: torch.nn.Module, tokens: torch.Tensor) -> float:
    """Seconds of one plain forward pass of each model, without gradients."""
    start = time.perf_counter()
    with torch.no_grad():
        ours(tokens), hf(tokens)
    return time.perf_counter() - start


def timed(ours: GPT, hf: torch.nn.Module, tokens: torch.Tensor) -> tuple[Comparison, float]:
    start = time.perf_counter()
    comparison = compare_models(ours, hf, tokens)
    return comparison, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small model for tests (7 layers, d_model 64)")
    args = parser.parse_args()
    ours, hf = gpt2_pair(args.quick)
    tokens = torch.randint(0, hf.config.vocab_size, (1, 64), generator=torch.Generator().manual_seed(1))  # (1, T)
    timed(ours, hf, tokens)  # warm-up
    plain = forward_seconds(ours, hf, tokens)
    clean, seconds = timed(ours, hf, tokens)
    attention = ours.blocks[PLANTED_BLOCK].self_attn
    attention.forward = types.MethodType(unscaled_attention, attention)
    planted, planted_seconds = timed(ours, hf, tokens)
    found = planted.culprit == f"blocks.{PLANTED_BLOCK}.self_attn"
    named = planted.mistakes[:1] == ["unscaled-scores"]

    c = hf.config
    print(f"GPT-2 shape: {c.n_layer} layers, d_model {c.n_embd}, {c.n_head} heads, {c.vocab_size} tokens; 1 x 64 "
          "tokens")
    print(f"  as loaded: {'a difference' if clean.differs else 'no difference'} in {seconds:.2f} s")
    print(f"  block {PLANTED_BLOCK}'s scores unscaled: {planted.headline()[1]}; {planted.mistakes} "
          f"in {planted_seconds:.2f} s")
    print(f"  two plain forward passes: {plain:.2f} s")
    print(f"seconds={seconds:.2f} planted_seconds={planted_seconds:.2f} forward_seconds={plain:.2f} "
          f"overhead={seconds / plain:.1f} differs={str(clean.differs).lower()} "
          f"found={str(found).lower()} named={str(named).lower()} rows={len(clean.rows)} "
          f"threads={torch.get_num_threads()} device=cpu")


if __name__ == "__main__":
    main()
