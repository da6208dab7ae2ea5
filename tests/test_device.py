"""get_device honours TRANSFORMER_LIB_DEVICE; set_seed makes draws repeat."""

import numpy as np
import pytest
import torch

from transformer_lib import get_device, set_seed, single_thread
from transformer_lib.device import DEVICE_ENV_VAR


def test_environment_variable_selects_the_cpu(monkeypatch):
    monkeypatch.setenv(DEVICE_ENV_VAR, "cpu")
    assert get_device() == torch.device("cpu")


def test_without_override_the_choice_follows_availability(monkeypatch):
    monkeypatch.delenv(DEVICE_ENV_VAR, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert get_device() == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert get_device() == torch.device("cuda")


def test_cuda_requested_without_cuda_is_a_clear_error(monkeypatch):
    monkeypatch.setenv(DEVICE_ENV_VAR, "cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match="CUDA is not available.*Unset TRANSFORMER_LIB_DEVICE"):
        get_device()


def test_a_misspelt_device_name_is_a_clear_error(monkeypatch):
    monkeypatch.setenv(DEVICE_ENV_VAR, "gpu")
    with pytest.raises(ValueError, match="'gpu' is not a device name: use cpu, cuda, cuda:N or mps"):
        get_device()


def test_set_seed_repeats_torch_and_numpy_draws():
    set_seed(123)
    first = (torch.rand(3), np.random.rand(3))
    set_seed(123)
    second = (torch.rand(3), np.random.rand(3))
    torch.testing.assert_close(first[0], second[0])
    np.testing.assert_array_equal(first[1], second[1])
    set_seed(124)
    assert not torch.equal(torch.rand(3), first[0])


def test_single_thread_runs_its_block_on_one_thread_and_restores_the_count_even_after_an_error():
    before = torch.get_num_threads()
    with single_thread():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with pytest.raises(ZeroDivisionError), single_thread():
        raise ZeroDivisionError
    assert torch.get_num_threads() == before
