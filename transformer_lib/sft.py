"""Supervised fine-tuning (SFT): teaching a pretrained text predictor to answer instructions.

The task: a small family of instructions whose answers a program can check exactly (``TASKS``: the first letter,
the last letter or the number of letters of 3 to 6 random letters), written in one template with three special
characters::

    {last abcd}d~        prompt "{last abcd}", response "d~"

``{`` opens the instruction, ``}`` closes it and starts the answer, ``~`` ends the answer (generation stops there).
A character tokenizer has no room for new tokens, so the template reserves three characters of lesson 11's
vocabulary that no instruction or answer contains. Held-out instructions (``InstructionData.test``) never occur in
the training set.

Training is next-token prediction on prompt + response, with the loss on the response tokens only: every label whose
token belongs to the prompt, and every padding position, is ``IGNORE_INDEX``, which ``F.cross_entropy`` skips
(:func:`sft_batch`). Right padding needs no attention mask in a causal model: a real position never sees a later one.

:func:`fine_tuned` is the cached recipe lessons and tests share: lesson 11's character GPT (``train_char_gpt``, the
run lesson 11 trains) fine-tuned in full or with LoRA adapters (:mod:`~transformer_lib.lora`).

Shape legend: batch, T_p = prompt length, T_r = response length, T = longest T_p + T_r - 1, V = vocabulary size.
"""

from __future__ import annotations

import copy
import random
import string
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from .data import CharTokenizer
from .decoding import Picker, generate_tokens, greedy_pick
from .device import get_device, set_seed, single_thread
from .gpt import GPT
from .lora import LORA_TARGETS, add_lora
from .model_cache import cached_training
from .recipes import CharGPTRun, train_char_gpt
from .training import optimiser_step, warmup_linear_decay_lr

BEGIN, ANSWER, END = "{", "}", "~"  # the template's special characters: instruction start, answer start, answer end
IGNORE_INDEX = -100  # a label F.cross_entropy skips (its default ignore_index)


def random_letters(rng: random.Random) -> str:
    """3 to 6 lower-case letters: every instruction's argument."""
    return "".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 6)))


# task name -> the answer to its argument
TASKS: dict[str, Callable[[str], str]] = {
    "first": lambda letters: letters[0],
    "last": lambda letters: letters[-1],
    "count": lambda letters: str(len(letters)),
}


@dataclass(frozen=True)
class Instruction:
    """One instruction of a task in ``TASKS`` and its argument, e.g. ``Instruction("last", "abc")``."""

    task: str
    argument: str

    @property
    def answer(self) -> str:
        return TASKS[self.task](self.argument)

    @property
    def prompt(self) -> str:
        return f"{BEGIN}{self.task} {self.argument}{ANSWER}"

    @property
    def response(self) -> str:
        return f"{self.answer}{END}"


@dataclass
class InstructionData:
    """Training and held-out instructions; no (task, argument) pair is in both."""

    train: list[Instruction]
    test: list[Instruction]


def make_instruction_data(num_train: int = 4000, test_per_task: int = 50, seed: int = 0) -> InstructionData:
    """Draw ``test_per_task`` distinct held-out instructions of every task first, then ``num_train`` training ones
    (tasks in turn) among the rest. Python's seeded ``random.Random``: the same lists on every machine."""
    rng = random.Random(seed)
    test: list[Instruction] = []
    for task in TASKS:
        arguments: set[str] = set()
        while len(arguments) < test_per_task:
            arguments.add(random_letters(rng))
        test += [Instruction(task, argument) for argument in sorted(arguments)]
    held_out = set(test)
    train: list[Instruction] = []
    tasks = list(TASKS)
    while len(train) < num_train:
        task = tasks[len(train) % len(tasks)]
        instruction = Instruction(task, random_letters(rng))
        if instruction not in held_out:
            train.append(instruction)
    return InstructionData(train, test)


def encode_instruction(tokenizer: CharTokenizer, instruction: Instruction) -> tuple[torch.Tensor, torch.Tensor]:
    """The prompt's ids (T_p,) and the response's ids (T_r,)."""
    return tokenizer.encode(instruction.prompt), tokenizer.encode(instruction.response)


def sft_batch(
    pairs: Sequence[tuple[torch.Tensor, torch.Tensor]], pad_id: int, prompt_in_loss: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and labels for next-token training on prompt + response, right-padded.

    ``pairs``: (prompt ids (T_p,), response ids (T_r,)) per example. Returns inputs (batch, T), the sequence without its
    last token, padded with ``pad_id``; and labels (batch, T), the next token at each position, ``IGNORE_INDEX`` at
    padding and, unless ``prompt_in_loss``, wherever the next token is still part of the prompt. Position T_p - 1 (the
    prompt's last token) is the first to keep its label: the first response token.
    """
    if not pairs:
        raise ValueError("sft_batch got no examples: pass a list of (prompt ids, response ids) pairs")
    length = max(len(prompt) + len(response) for prompt, response in pairs) - 1
    inputs = torch.full((len(pairs), length), pad_id, dtype=torch.long)  # (batch, T)
    labels = torch.full((len(pairs), length), IGNORE_INDEX, dtype=torch.long)  # (batch, T)
    for row, (prompt, response) in enumerate(pairs):
        sequence = torch.cat((prompt, response))  # (T_p + T_r,)
        n = len(sequence) - 1
        inputs[row, :n] = sequence[:-1]
        labels[row, :n] = sequence[1:]
        if not prompt_in_loss:
            labels[row, : len(prompt) - 1] = IGNORE_INDEX  # those labels are prompt tokens
    return inputs, labels


def sft_loss(model: nn.Module, inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the labels that are not ``IGNORE_INDEX``; inputs, labels (batch, T) on the model's
    device."""
    logits = model(inputs)  # (batch, T, V)
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE_INDEX)


@dataclass
class SFTHistory:
    """What :func:`fine_tune` records: the loss of every batch, and the seconds spent training."""

    step_loss: list[float] = field(default_factory=list)
    seconds: float = 0.0


def fine_tune(
    model: nn.Module, tokenizer: CharTokenizer, instructions: Sequence[Instruction], steps: int, batch_size: int = 32,
    lr: float = 1e-3, seed: int = 0, prompt_in_loss: bool = False,
) -> SFTHistory:
    """Train the parameters of ``model`` that require gradients (all of them, or only LoRA's) with AdamW for
    ``steps`` batches of ``batch_size`` instructions drawn from a generator seeded with ``seed``: the learning rate
    warms up linearly to ``lr`` over the first tenth of the steps and decays linearly to 0 at the last; gradient
    norm clipped to 1."""
    device = next(model.parameters()).device
    pairs = [encode_instruction(tokenizer, instruction) for instruction in instructions]
    pad_id = tokenizer.ids[END]  # any id would do: padded positions carry no label, and no real position sees them
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr, foreach=True)
    history = SFTHistory()
    model.train()
    started = time.perf_counter()
    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = warmup_linear_decay_lr(step, lr, warmup_steps=steps // 10, total_steps=steps)
        chosen = torch.randint(len(pairs), (batch_size,), generator=generator).tolist()
        inputs, labels = sft_batch([pairs[i] for i in chosen], pad_id, prompt_in_loss)  # (batch, T) each
        loss = sft_loss(model, inputs.to(device), labels.to(device))
        optimiser_step(model, optimizer, loss, clip_norm=1.0)
        history.step_loss.append(loss.item())
    history.seconds = time.perf_counter() - started
    model.eval()
    return history


@torch.no_grad()
def complete_prompts(
    model: nn.Module, tokenizer: CharTokenizer, prompts: Sequence[str], max_new: Sequence[int],
    pick: Picker = greedy_pick,
) -> list[str]:
    """Each prompt's continuation up to and including ``END``, or, if ``END`` never comes, as many characters as the
    largest ``max_new`` of its batch (not its own ``max_new[i]``): prompts of one length run as one batch, shortest
    first. :func:`~transformer_lib.decoding.generate_tokens` with ``pick`` choosing each character (greedy by
    default; :func:`~transformer_lib.decoding.sampling_picker` to sample)."""
    model.eval()
    device = next(model.parameters()).device
    end_id = tokenizer.ids[END]
    completions = [""] * len(prompts)
    by_length: dict[int, list[int]] = {}
    for index, prompt in enumerate(prompts):
        by_length.setdefault(len(prompt), []).append(index)
    for length, indices in sorted(by_length.items()):
        tokens = torch.stack([tokenizer.encode(prompts[i]) for i in indices]).to(device)  # (batch, T_p)
        tokens = generate_tokens(lambda ids: model(ids)[:, -1], tokens, max(max_new[i] for i in indices), pick,
                                 end_id)  # (batch, T_p + generated)
        for row, index in enumerate(indices):
            text = tokenizer.decode(tokens[row, length:].cpu())
            completions[index] = text[: text.index(END) + 1] if END in text else text
    return completions


def greedy_answers(model: nn.Module, tokenizer: CharTokenizer, instructions: Sequence[Instruction]) -> list[str]:
    """Each instruction's greedy continuation of its prompt, up to and including ``END`` (or as long as the longest
    response of its batch plus 2 characters, if ``END`` never comes)."""
    return complete_prompts(model, tokenizer, [i.prompt for i in instructions],
                            [len(i.response) + 2 for i in instructions])


def exact_match_by_task(instructions: Sequence[Instruction], answers: Sequence[str]) -> dict[str, float]:
    """Share of answers equal to the response (answer and ``END``), per task and over all (``"all"``)."""
    correct = [answer == instruction.response for instruction, answer in zip(instructions, answers, strict=True)]
    scores = {task: sum(c for c, i in zip(correct, instructions, strict=True) if i.task == task)
              / sum(i.task == task for i in instructions) for task in dict.fromkeys(i.task for i in instructions)}
    return {**scores, "all": sum(correct) / len(correct)}


@torch.no_grad()
def answer_probabilities(
    model: nn.Module, tokenizer: CharTokenizer, prompt: str, expected: str = "", max_new: int = 10
) -> list[tuple[str, float, float | None]]:
    """The greedy answer to ``prompt`` character by character: each chosen character, the probability the model gave
    it, and the probability it gave the character of ``expected`` at that place (None past its end). Stops after
    ``END`` or ``max_new`` characters."""
    model.eval()
    device = next(model.parameters()).device
    tokens = tokenizer.encode(prompt)[None].to(device)  # (1, T_p)
    steps: list[tuple[str, float, float | None]] = []
    for place in range(max_new):
        probabilities = model(tokens)[0, -1].softmax(dim=-1)  # (V,)
        best = int(probabilities.argmax())
        right = float(probabilities[tokenizer.ids[expected[place]]]) if place < len(expected) else None
        steps.append((tokenizer.chars[best], float(probabilities[best]), right))
        tokens = torch.cat((tokens, torch.tensor([[best]], device=device)), dim=1)
        if tokenizer.chars[best] == END:
            break
    return steps


# --- the recipe lessons and tests share

BASE_STEPS = 600  # lesson 11's recipe and number of steps


def instruction_base(device: torch.device | None = None) -> CharGPTRun:
    """The base model: lesson 11's character GPT on Python's documentation, ``BASE_STEPS`` steps, with lesson 11's
    evaluations along the way (they change no weight), so lesson 11's run and this one are one entry of the model
    cache."""
    return train_char_gpt(steps=BASE_STEPS, device=device or get_device(), eval_every=100, eval_windows=32)


@dataclass(frozen=True)
class SFTRecipe:
    """A fine-tuning run of the base model: ``method`` "full" (every parameter trains) or "lora" (adapters of rank
    ``rank`` and scale ``alpha`` / ``rank`` on the layers named in ``targets``, the rest frozen). With ``pretrained``
    False the run starts instead from a randomly initialised GPT of the base's shape (the control for pretraining)."""

    method: str = "full"
    steps: int = 200
    batch_size: int = 32
    lr: float = 3e-3
    rank: int = 2
    alpha: float = 16.0
    targets: tuple[str, ...] = LORA_TARGETS
    prompt_in_loss: bool = False
    pretrained: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        if self.method not in ("full", "lora"):
            raise ValueError(f"method={self.method!r} is unknown: choose 'full' or 'lora'")


# The runs lesson 15 shows and tests/test_sft.py repeats on other seeds: full fine-tuning for 200 steps, and LoRA of
# rank 2 on every linear layer of both blocks (under 5 % of the parameters) at a higher peak learning rate. LoRA
# needs 900 steps of the same batches to come within 10 points of the full run on every seed and CPU kernel set
# (`course.py bounds`): at 200 or 300 steps it stayed far below; at 600 one seed in five missed on AVX2 kernels,
# and raising the rate instead made runs diverge.
LESSON_RECIPES = {
    "full": SFTRecipe("full"),
    "lora": SFTRecipe("lora", steps=900, lr=5e-3),
}


@dataclass
class SFTRun:
    """The result of :func:`fine_tuned`: the tuned model, its history, the base run and the instructions."""

    model: nn.Module
    history: SFTHistory
    base: CharGPTRun
    data: InstructionData


def fine_tuned(recipe: SFTRecipe, device: torch.device | None = None) -> SFTRun:
    """Fine-tune a copy of :func:`instruction_base` on ``make_instruction_data()``'s training instructions as
    ``recipe`` says, seeded with ``recipe.seed`` (the batches and LoRA's A), on one CPU thread. A run already in the
    model cache is loaded instead (:mod:`~transformer_lib.model_cache`)."""
    device = device or get_device()
    base = instruction_base(device)
    data = make_instruction_data()

    def build() -> nn.Module:
        set_seed(recipe.seed)
        model = copy.deepcopy(base.model) if recipe.pretrained else GPT(base.model.config).to(device)
        return add_lora(model, recipe.rank, recipe.alpha, recipe.targets) if recipe.method == "lora" else model

    def run(model: nn.Module) -> SFTHistory:
        with single_thread():  # a tiny model: one CPU thread is as fast, and steadier beside other work
            return fine_tune(model, base.tokenizer, data.train, recipe.steps, recipe.batch_size, recipe.lr,
                             recipe.seed, recipe.prompt_in_loss)

    model, history = cached_training("sft", {"recipe": recipe, "base steps": BASE_STEPS}, build, run, SFTHistory,
                                     device)
    return SFTRun(model, history, base, data)
