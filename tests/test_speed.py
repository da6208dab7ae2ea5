"""The yardstick measures a positive speed without touching the caller's random state, and times scale to the
reference machine in proportion to the speed of the machine that took them."""

import pytest
import torch

from transformer_lib import REFERENCE_STEPS_PER_S, at_reference, machine_speed, single_thread, yardstick_config


def test_the_yardstick_measures_a_positive_speed_and_leaves_the_random_state_alone():
    before = torch.get_rng_state()
    with single_thread():
        steps_per_s = machine_speed(seconds=0.3)
    assert steps_per_s > 0
    assert torch.equal(torch.get_rng_state(), before)


def test_the_yardstick_is_the_gpt_benchmarks_model():
    config = yardstick_config(vocab_size=103)
    assert (config.num_layers, config.d_model, config.num_heads, config.d_ff, config.block_size) == (4, 128, 4, 512, 64)
    assert config.vocab_size == 103


def test_times_scale_with_the_machines_speed():
    assert at_reference(10.0, REFERENCE_STEPS_PER_S) == 10.0  # the reference machine itself
    assert at_reference(10.0, 2 * REFERENCE_STEPS_PER_S) == 20.0  # twice as fast: the reference takes twice as long
    assert at_reference(9.0, 5.0) == pytest.approx(3.0)  # a third of the reference's speed
    with pytest.raises(ValueError, match="steps_per_s must be positive, got 0"):
        at_reference(1.0, 0.0)


def test_a_measurement_needs_time_and_rounds():
    with pytest.raises(ValueError, match="seconds > 0 and rounds >= 1, got seconds=0, rounds=5"):
        machine_speed(seconds=0)
