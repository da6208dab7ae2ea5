"""A test setting that rounds as another CPU's BLAS might: every floating matrix product's result moves by up to one
unit in the last place (ulp), pseudo-randomly, while staying correct.

Two machines compute the same product in other orders (MKL takes other code paths on AMD CPUs than on Intel ones,
Apple's Accelerate and OpenBLAS others again), so their results differ in the last bits. A stored output or an
assertion that passes on one machine only because two code paths happened to round alike there (``torch.equal`` of
our attention against PyTorch's, cached against uncached decoding) fails under this setting, on any machine.

What moves: the results of ``torch.matmul`` and ``@``, ``mm``, ``bmm``, ``addmm``, ``baddbmm``, ``F.linear`` (so every
``nn.Linear``) and ``F.scaled_dot_product_attention``, in float32 and float64. Each entry moves one ulp up or down,
by a hash of its bits and of the code path (which product, and its operands' shapes and memory layout): the same
computation moves alike every time and wherever it is called from, as a real machine rounds alike every time, and
the global random stream, so every seeded output, is untouched. A result whose low bits are all zero (0, small
integers, 0.25) is left alone: any BLAS returns those exactly, because every partial sum of such a product is exact.

Switched on in a process by setting ``LAST_BITS_VARIABLE`` to 1 and putting ``STARTUP_DIR`` on
``PYTHONPATH``: its ``sitecustomize.py`` calls ``install_when_torch_loads()`` at start-up.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import os
import sys
import zlib
from pathlib import Path

LAST_BITS_VARIABLE = "COURSE_MOVE_LAST_BITS"  # "1" switches the setting on
STARTUP_DIR = Path(__file__).resolve().parent / "last_bits_startup"  # holds the sitecustomize.py that installs it

# How each float type's bits are read as an integer of the same width: the integer type, the low fraction bits that
# must not all be zero for an entry to move (8 of float32's 23, 16 of float64's 52: a rounded result ends in such
# zeros by chance once in 256 or 65 536), the exponent bits (all ones for inf and NaN, which stay as they are), and
# the right shift that leaves the hash's top two bits.
_LAYOUT = {
    "float32": ("int32", 0xFF, 0x7F800000, 30),
    "float64": ("int64", 0xFFFF, 0x7FF0000000000000, 62),
}
_MIX = {"int32": 0x9E3779B1 - 2**32, "int64": 0x9E3779B97F4A7C15 - 2**64}  # Knuth's multiplicative hash, signed
_CHUNK = 1 << 16  # entries moved at a time, so a large product needs almost no extra memory

_TORCH_FUNCTIONS = ("matmul", "mm", "bmm", "addmm", "baddbmm")
_TENSOR_METHODS = ("matmul", "mm", "bmm", "addmm", "baddbmm", "__matmul__", "__rmatmul__")
_FUNCTIONAL = ("linear", "scaled_dot_product_attention")
_SAME_PRODUCT = {"__matmul__": "matmul"}  # `a @ b` is `torch.matmul(a, b)`


def _signed(value: int, integer_type: str) -> int:
    bits = 32 if integer_type == "int32" else 64
    value %= 2**bits
    return value - 2**bits if value >= 2 ** (bits - 1) else value


def _move_in_place(values, salt: int) -> None:
    """Move each entry of the 1-D float32/float64 NumPy array ``values`` one ulp up or down in magnitude, in place.

    On the entry's bits read as an integer, +1 is the next float away from zero and -1 the next towards it; which one
    is a hash of the bits and ``salt``. Exact-looking entries (low bits all zero), inf and NaN are kept. NumPy, not
    torch: on the small products of a training step its operations cost a tenth as much.
    """
    integer_type, low, exponent, shift = _LAYOUT[values.dtype.name]
    salt, mix = _signed(salt, integer_type), _MIX[integer_type]
    bits = values.view(integer_type)
    for start in range(0, bits.size, _CHUNK):
        chunk = bits[start : start + _CHUNK]
        step = (((chunk ^ salt) * mix) >> shift) | 1  # -1 or +1 (the product wraps around, as a hash should)
        step[((chunk & low) == 0) | ((chunk & exponent) == exponent)] = 0
        chunk += step


def move_last_bits(result, salt: int):
    """``result`` with each float32/float64 entry moved by one ulp (exact-looking entries, inf and NaN kept).

    The move is a function of the entry's bits and of ``salt`` alone, so one code path computed twice rounds alike,
    as on a real machine, and two code paths (other ``salt``) round differently.
    """
    import torch

    if not isinstance(result, torch.Tensor) or str(result.dtype).removeprefix("torch.") not in _LAYOUT:
        return result
    if result.device.type == "meta":  # shapes only (e.g. for FlopCounterMode): no numbers to move
        return result
    if result.is_contiguous() and result.device.type == "cpu":
        # In place, also under autograd: the product's backward needs its inputs, not this fresh output, and a
        # backward that reads the output (attention's) reads the moved one, as the forward returned it.
        _move_in_place(result.detach().view(-1).numpy(), salt)
        return result
    with torch.no_grad():
        moved = result.detach().to("cpu", copy=True).contiguous()
        _move_in_place(moved.view(-1).numpy(), salt)
        delta = moved.to(result.device) - result.detach()  # exact: neighbouring floats subtract without rounding
    return result + delta  # the gradient flows through `result` as before


def _code_path_salt(name: str, args) -> int:
    """A number for the code path a product takes: which product, and its operands' shapes and memory layout.

    These pick the BLAS routine and its blocking, so they decide the rounding; where in Python it is called does
    not, so the same product called twice from two places rounds alike, as on a real machine.
    """
    layouts = [(tuple(arg.shape), arg.stride()) for arg in args if hasattr(arg, "stride")]
    return zlib.crc32(f"{_SAME_PRODUCT.get(name, name)} {layouts}".encode())


def _moving(function, name: str):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        return move_last_bits(function(*args, **kwargs), _code_path_salt(name, args))

    return wrapper


def install() -> None:
    """Wrap every matrix product of torch in this process so its result moves by up to one ulp."""
    import torch
    import torch.nn.functional as F

    for owner, names in ((torch, _TORCH_FUNCTIONS), (torch.Tensor, _TENSOR_METHODS), (F, _FUNCTIONAL)):
        for name in names:
            setattr(owner, name, _moving(getattr(owner, name), name))


class _AfterTorchLoads(importlib.abc.MetaPathFinder):
    """Finds nothing itself; when ``torch`` is imported, lets it load, then installs the wrappers."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            install()

        spec.loader.exec_module = exec_module
        return spec


def with_last_bits_moved(environ: dict[str, str]) -> dict[str, str]:
    """``environ`` for a process in which the setting is on: the variable set and the start-up folder first on
    PYTHONPATH."""
    pythonpath = os.pathsep.join(filter(None, [str(STARTUP_DIR), environ.get("PYTHONPATH", "")]))
    return {**environ, LAST_BITS_VARIABLE: "1", "PYTHONPATH": pythonpath}


def install_when_torch_loads() -> None:
    """If ``LAST_BITS_VARIABLE`` is set, install the wrappers as soon as this process imports torch (start-up hook)."""
    if os.environ.get(LAST_BITS_VARIABLE) != "1":
        return
    if "torch" in sys.modules:
        install()
    else:
        sys.meta_path.insert(0, _AfterTorchLoads())
