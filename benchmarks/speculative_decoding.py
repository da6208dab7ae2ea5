"""Speculative decoding against plain greedy decoding of the target, side by side, with two of the course's GPTs.

Both models are lesson 11's character-level GPT trained on Python's documentation for a fixed, seeded number of
steps with its recipe ``train_char_gpt`` (cached, so a second run loads them): a target of 6 blocks of width 192 and a
draft of 1 block of width 48. Everything runs on one CPU thread, as lesson 14 does. Plain decoding is the library's
``generate`` with the KV cache; speculative decoding is ``speculative_generate`` (both models cached), for every k
from 1 to 8, timed in alternating rounds on the same prompts from the held-out split. Goal on 2 CPU cores: a speed-up
of at least 1.5 at the best k, with tokens identical to the target's greedy output.

Beside the measured speed-up it prints the prediction of Leviathan et al.'s formula (``expected_speedup``) from the
measured acceptance rate α (kept over examined proposals), the draft's cost per call c and the target's cost v of a
pass over k + 1 tokens relative to one, both timed inside the models' forward passes (``ForwardTimer``) against the
target's one-token pass of plain decoding.

Identical tokens are checked where the comparison means something: the same prompts are decoded again with float64
copies of both models, where the two code paths agree to about 1e-15, and ``smallest_gap`` is the least lead of a
greedy pick over the runner-up there (``tests/test_benchmarks.py`` requires it above 1e-9 before it trusts
``identical``).

Last line: ``speedup=<plain time / speculative time at the best k> best_k=<k> identical=<true|false> predicted=<…>
c=<…> alpha=<…> …``.
Run: ``python benchmarks/speculative_decoding.py`` or ``--quick`` (tiny models, a smoke test).
"""

from __future__ import annotations

import argparse
import copy
import time

import torch

from transformer_lib import (
    CharTokenizer,
    GPTConfig,
    GreedyWithMargin,
    generate,
    get_device,
    python_docs,
    train_char_gpt,
)
from transformer_lib.speculative import ForwardTimer, expected_speedup, speculative_generate

PROMPT_LENGTH = 16


def trained(d_model: int, num_layers: int, steps: int, lr: float, device: torch.device):
    """Lesson 11's recipe at these sizes, batches of 16 (a cached run is loaded)."""
    config = GPTConfig(vocab_size=len(CharTokenizer(python_docs())), block_size=64, d_model=d_model, num_heads=4,
                       num_layers=num_layers, d_ff=4 * d_model)
    return train_char_gpt(steps, device, config=config, batch_size=16, lr=lr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny models, few tokens (a smoke test)")
    args = parser.parse_args()
    device = get_device()
    torch.set_num_threads(1)  # tiny models: one CPU thread is as fast, and steadier beside other programs
    if args.quick:
        target_run, draft_run = trained(32, 2, 20, 3e-3, device), trained(16, 1, 20, 1e-2, device)
        new_tokens, prompts_n, ks = 16, 2, [1, 2, 4]
    else:
        target_run, draft_run = trained(192, 6, 600, 2e-3, device), trained(48, 1, 600, 1e-2, device)
        new_tokens, prompts_n, ks = 48, 8, list(range(1, 9))
    target, draft, valid = target_run.model.eval(), draft_run.model.eval(), target_run.valid
    starts = torch.arange(prompts_n) * (len(valid) // prompts_n)
    prompts = [valid[s : s + PROMPT_LENGTH][None].to(device) for s in starts.tolist()]

    def plain() -> list[torch.Tensor]:
        return [generate(target, prompt, new_tokens) for prompt in prompts]

    def speculative(k: int) -> list[torch.Tensor]:
        return [speculative_generate(target, draft, prompt, new_tokens, k).tokens for prompt in prompts]

    def timed(function, *arguments) -> float:
        started = time.perf_counter()
        function(*arguments)
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - started

    plain(), speculative(2)  # warm-up
    plain_s, spec_s = [], {k: [] for k in ks}
    for _ in range(1 if args.quick else 3):  # alternating rounds: a busy machine slows both alike
        plain_s.append(timed(plain))
        for k in ks:
            spec_s[k].append(timed(speculative, k))
    plain_best = min(plain_s)
    speedups = {k: plain_best / min(spec_s[k]) for k in ks}
    best_k = max(ks, key=speedups.__getitem__)
    with ForwardTimer(target) as plain_calls:
        plain()
    predictions = {}  # k -> (α, c, predicted speed-up)
    for k in ks:
        with ForwardTimer(target) as verify_calls, ForwardTimer(draft) as draft_calls:
            runs = [speculative_generate(target, draft, prompt, new_tokens, k) for prompt in prompts]
        alpha = sum(r.accepted for r in runs) / sum(r.examined for r in runs)
        c, v = draft_calls.per_call / plain_calls.per_call, verify_calls.per_call / plain_calls.per_call
        predictions[k] = (alpha, c, expected_speedup(alpha, k, c, v))
    print(f"{len(prompts)} prompts x {new_tokens} tokens on {device}; plain greedy {plain_best:.3f} s")
    for k in ks:
        alpha, c, predicted = predictions[k]
        print(f"  k = {k}: speculative {min(spec_s[k]):.3f} s, speed-up {speedups[k]:.2f} (α {alpha:.3f}, c {c:.3f}, "
              f"predicted {predicted:.2f})")

    target64, draft64 = copy.deepcopy(target).double(), copy.deepcopy(draft).double()
    identical, smallest_gap = True, float("inf")
    for prompt in prompts:
        picker = GreedyWithMargin()
        reference = generate(target64, prompt, new_tokens, picker)
        smallest_gap = min(smallest_gap, picker.smallest_gap)
        identical &= torch.equal(speculative_generate(target64, draft64, prompt, new_tokens, best_k).tokens, reference)
    goal_met = speedups[best_k] >= 1.5 and identical
    print(
        f"speedup={speedups[best_k]:.2f} best_k={best_k} identical={str(identical).lower()} "
        f"predicted={predictions[best_k][2]:.2f} c={predictions[best_k][1]:.3f} alpha={predictions[best_k][0]:.3f} "
        f"smallest_gap={smallest_gap:.2e} tokens={new_tokens} prompts={len(prompts)} "
        f"goal_met={str(goal_met).lower()} device={device.type}"
    )


if __name__ == "__main__":
    main()
