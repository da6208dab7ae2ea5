"""Each benchmark runs at a tiny size and ends with a parseable ``key=value`` line of sane values.

These tests check that the scripts work and that their equality claims hold; they set no timing targets.
"""

import subprocess
import sys
from pathlib import Path

import pytest

from bounds import bound, bound_seeds
from grading_cases import sandbox_or_skip

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def last_line_values(script: str, *args: str) -> dict[str, str]:
    finished = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), "--quick", *args], capture_output=True, text=True, timeout=300
    )
    assert finished.returncode == 0, finished.stderr
    last_line = finished.stdout.strip().splitlines()[-1]
    values = dict(pair.split("=", 1) for pair in last_line.split())
    assert values["device"] in {"cpu", "cuda", "mps"}
    return values


def test_kv_cache_gives_identical_tokens():
    values = last_line_values("kv_cache.py", "--tokens", "24")
    assert float(values["smallest_gap"]) > 1e-3  # no near-tie: the two paths' rounding cannot flip a choice
    assert values["identical"] == "true"
    assert float(values["speedup"]) > 0 and int(values["tokens"]) == 24


def test_chunked_attention_is_exact_and_uses_less_memory():
    values = last_line_values("attention_memory.py", "--repeats", "1")
    assert float(values["max_abs_diff"]) < 1e-5
    assert 0 < float(values["memory_ratio"]) < 1
    assert float(values["naive_mib"]) > float(values["chunked_mib"])


def test_attention_speed_reports_readable_and_dispatch_ratios_and_the_goal():
    values = last_line_values("attention_speed.py", "--repeats", "3")
    for key in ("readable_vs_fused", "dispatch_vs_torch"):
        assert float(values[key]) > 0
    assert values["goal_met"] == str(float(values["dispatch_vs_torch"]) <= 1.5).lower()
    assert int(values["readable_at_T"]) == 16  # --quick times one size, T = 16


@pytest.mark.trained
@pytest.mark.parametrize("seed", bound_seeds((0,)))
def test_train_gpt_reports_held_out_loss_and_speed(seed):
    values = last_line_values("train_gpt.py", "--seed", str(seed))
    assert float(values["val_loss"]) > 0
    bound("held-out loss after 20 steps", float(values["val_loss"]), at_most=5.0)  # near ln(103) = 4.63, not the goal
    assert float(values["seconds"]) > 0 and float(values["steps_per_s"]) > 0
    assert float(values["speed_vs_reference"]) > 0  # our step rate over nanoGPT-shaped PyTorch modules'
    assert int(values["steps"]) == 20 and values["goal_met"] == "false"


def test_grading_benchmark_grades_the_class_with_and_without_the_sandbox():
    sandbox_or_skip()
    values = last_line_values("grading_sandbox.py")
    assert int(values["submissions"]) == 4
    assert float(values["sandboxed_s"]) > 0 and float(values["unsandboxed_s"]) > 0


def test_speculative_decoding_reports_speedup_and_identical_tokens():
    values = last_line_values("speculative_decoding.py")
    assert float(values["smallest_gap"]) > 1e-9  # float64: no near-tie the two code paths could break apart
    assert values["identical"] == "true"
    assert float(values["speedup"]) > 0 and int(values["best_k"]) in {1, 2, 4}


def test_compare_models_finds_no_difference_then_the_planted_one():
    values = last_line_values("compare_models.py")
    assert values["differs"] == "false" and values["found"] == "true" and values["named"] == "true"
    assert float(values["seconds"]) > 0 and float(values["planted_seconds"]) > 0 and int(values["rows"]) > 50


@pytest.mark.trained
def test_int8_weights_report_memory_and_loss():
    """The script trains with its own fixed seed (it takes no --seed): the bound is recorded without one."""
    values = last_line_values("int8_weights.py")
    assert 0.25 < float(values["memory_ratio"]) <= 0.3  # int8 values plus one float32 scale per row
    assert float(values["val_loss"]) > 0
    bound("int8 weights' held-out loss increase, either way", abs(float(values["loss_increase"])), at_most=0.05)


def test_data_parallel_reports_the_step_time_ratio():
    values = last_line_values("data_parallel.py")
    assert float(values["step_ratio"]) > 0 and int(values["steps"]) == 3


def test_fine_tuning_reports_lora_against_full_side_by_side():
    values = last_line_values("fine_tuning.py")
    assert 0 < int(values["trainable_lora"]) < int(values["trainable_full"])
    assert 0 < float(values["trainable_share"]) < 0.2  # rank 8 on every linear layer of the small --quick model
    assert float(values["step_ms_full"]) > 0 and float(values["step_ms_lora"]) > 0
    assert float(values["peak_mib_full"]) >= 0 and float(values["peak_mib_lora"]) >= 0
