"""The cost of fine-tuning: LoRA against full fine-tuning, side by side on one GPT, in one run.

The model is a character GPT over Python's documentation (6 blocks of width 384, d_ff 1536, context 64; its weights
are as initialised: the cost of a step does not depend on them), trained on batches of lesson 15's instructions with
the loss on the responses only (``fine_tune``'s step). Full fine-tuning trains every parameter; LoRA (rank 8, alpha
16, on every linear layer of every block) trains only its adapters. Reported for each: the trainable parameters, the
peak memory a training run adds to the process once the model is built (gradients, AdamW's two moments per trained
parameter, activations), and the median time of a training step. Each method runs in two fresh subprocesses: one
measures memory as ``attention_memory.py`` does (``VmHWM`` with ``MALLOC_MMAP_THRESHOLD_=131072`` on the CPU,
``torch.cuda.max_memory_allocated`` on a GPU), the other times the steps with the allocator's default settings (that
threshold makes every large allocation a fresh mapping: on a 2-core CPU it slowed the steps many times over, full
fine-tuning's most, which allocate a gradient for every weight, and so overstated LoRA's saving in time). A LoRA
step skips the frozen weights' gradients and AdamW's update of them, but its forward and backward passes still run
through every frozen weight.

Last line: ``trainable_full=… trainable_lora=… trainable_share=… memory_ratio=<LoRA / full> … time_ratio=…``.
Run: ``python benchmarks/fine_tuning.py`` or ``--quick`` (a small model, 3 steps, one subprocess per method whose
step times are those of the memory run: a smoke test of the script, not a measurement).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch
from attention_memory import peak_rss_bytes

from transformer_lib import GPT, CharTokenizer, GPTConfig, get_device, python_docs, set_seed
from transformer_lib.lora import add_lora, trainable_parameters
from transformer_lib.sft import END, encode_instruction, make_instruction_data, sft_batch, sft_loss

METHODS = ("full", "lora")
MIB = 2**20


def measure(method: str, quick: bool, steps: int) -> dict[str, float]:
    """Run in the subprocess: build the model, then train it; the trainable count, peak bytes and step times."""
    device = get_device()
    tokenizer = CharTokenizer(python_docs())
    width, layers = (64, 2) if quick else (384, 6)
    set_seed(0)
    model = GPT(GPTConfig(vocab_size=len(tokenizer), block_size=64, d_model=width, num_heads=4, num_layers=layers,
                          d_ff=4 * width)).to(device)
    if method == "lora":
        add_lora(model, rank=8, alpha=16.0)
    trainable, total = trainable_parameters(model)
    pairs = [encode_instruction(tokenizer, instruction) for instruction in make_instruction_data().train[:512]]
    generator = torch.Generator().manual_seed(0)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    seconds = []
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        start = torch.cuda.memory_allocated()
    else:
        start = peak_rss_bytes()
    model.train()
    for _ in range(steps):
        chosen = torch.randint(len(pairs), (32,), generator=generator).tolist()
        inputs, labels = sft_batch([pairs[i] for i in chosen], tokenizer.ids[END])  # (32, T) each
        started = time.perf_counter()
        loss = sft_loss(model, inputs.to(device), labels.to(device))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        seconds.append(time.perf_counter() - started)
    peak = torch.cuda.max_memory_allocated() - start if device.type == "cuda" else peak_rss_bytes() - start
    return {"trainable": trainable, "total": total, "peak_bytes": peak,
            "step_s": statistics.median(seconds[1:])}  # the first step allocates AdamW's state: left out


def measure_in_subprocess(method: str, quick: bool, memory: bool) -> dict[str, float]:
    """One fresh process: for ``memory``, 3 steps (AdamW's state exists from the first) under the allocator setting
    that makes ``VmHWM`` count what is freed; otherwise 30 timed steps (3 with ``quick``) with the default one."""
    env = dict(os.environ)
    env.pop("MALLOC_MMAP_THRESHOLD_", None)
    if memory:
        env["MALLOC_MMAP_THRESHOLD_"] = "131072"
    steps = 3 if quick or memory else 30
    command = [sys.executable, __file__, "--measure", method, "--steps", str(steps), *(["--quick"] if quick else [])]
    finished = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return json.loads(finished.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small model and 3 steps (a smoke test)")
    parser.add_argument("--measure", choices=METHODS, help=argparse.SUPPRESS)  # internal: one subprocess's job
    parser.add_argument("--steps", type=int, default=30, help=argparse.SUPPRESS)  # internal: that job's steps
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.quick, args.steps)))
        return
    results = {}
    for method in METHODS:
        memory = measure_in_subprocess(method, args.quick, memory=True)
        timed = memory if args.quick else measure_in_subprocess(method, args.quick, memory=False)
        results[method] = {**memory, "step_s": timed["step_s"]}
    full, lora = results["full"], results["lora"]
    print(f"{'':6s} {'trainable':>12s} {'of':>12s} {'peak MiB':>9s} {'of it, gradients + AdamW':>25s} {'step ms':>8s}")
    for method, r in results.items():
        state_mib = 3 * r["trainable"] * 4 / MIB  # a gradient and two moments per trained float32 parameter
        print(f"{method:6s} {r['trainable']:12,d} {r['total']:12,d} {r['peak_bytes'] / MIB:9.1f} {state_mib:25.1f} "
              f"{r['step_s'] * 1e3:8.1f}")
    memory_ratio = lora["peak_bytes"] / full["peak_bytes"] if full["peak_bytes"] else float("nan")
    print(
        f"trainable_full={full['trainable']} trainable_lora={lora['trainable']} "
        f"trainable_share={lora['trainable'] / lora['total']:.4f} peak_mib_full={full['peak_bytes'] / MIB:.1f} "
        f"peak_mib_lora={lora['peak_bytes'] / MIB:.1f} memory_ratio={memory_ratio:.3f} "
        f"step_ms_full={full['step_s'] * 1e3:.1f} step_ms_lora={lora['step_s'] * 1e3:.1f} "
        f"time_ratio={lora['step_s'] / full['step_s']:.3f} device={get_device().type}"
    )


if __name__ == "__main__":
    main()
