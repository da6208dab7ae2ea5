"""What lesson 16's preference and reward runs share: the model they start from and the task they improve.

The start is lesson 15's control run, its full fine-tuning recipe from random weights (``LESSON_RECIPES["full"]``
with ``pretrained=False``): it answers ``first`` and ``count`` well but ``last`` poorly, so ``last`` leaves room to
improve. Both :mod:`~transformer_lib.dpo` and :mod:`~transformer_lib.rl` train a copy of it on ``last``
instructions and score it on the held-out ones.
"""

from __future__ import annotations

import copy
from dataclasses import replace

import torch
from torch import nn

from .device import get_device
from .sft import LESSON_RECIPES, Instruction, SFTRun, fine_tuned

START_RECIPE = replace(LESSON_RECIPES["full"], pretrained=False)  # lesson 15's control: no pretraining
TASK = "last"  # the task the start model solves worst


def start_run(device: torch.device | None = None) -> SFTRun:
    """Lesson 15's run from random weights (cached like every :func:`~transformer_lib.sft.fine_tuned` run)."""
    return fine_tuned(START_RECIPE, device or get_device())


def task_instructions(instructions: list[Instruction], task: str = TASK) -> list[Instruction]:
    """The instructions of one task, in their order."""
    return [instruction for instruction in instructions if instruction.task == task]


def frozen_copy(model: nn.Module) -> nn.Module:
    """The reference model: a deep copy in eval mode whose parameters never get a gradient."""
    return copy.deepcopy(model).requires_grad_(False).eval()
