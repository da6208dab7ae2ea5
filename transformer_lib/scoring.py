"""Lesson 17's measurements: every token's loss over a long text, bits per byte chunk by chunk, multiple-choice items
scored three ways, and a membership check for test items that leaked into training.

- :func:`token_losses`: ``-ln p`` of every token of a long text after the first, each predicted from a window of at
  most ``block_size`` earlier tokens that slides by ``stride`` (every token after the first window sees at least
  ``block_size - stride`` tokens before it).
- :func:`chunk_bits_per_byte`: the same text cut into chunks of characters; each token's nats and bytes go to the
  chunk that holds its first byte, so models with different tokenizers are scored on the same chunks.
- :func:`translation_choices`, :func:`option_log_probs`, :func:`pick_by_log_prob`, :func:`pick_by_generation` and
  :func:`three_ways`: the translator of lesson 09 as a multiple-choice taker. Each item is a source sentence with
  three translations: the reference, the reference with an adjective put before its noun (the same length) and the
  reference with that adjective dropped (one word shorter). :func:`shortest_share`: how often picks favour length.
- :func:`membership_error_rates`: flag an item as "seen in training" when its score passes a threshold, and count the
  flags that are wrong both ways; :func:`best_threshold`: the threshold with the fewest errors.

Shape legend: N = tokens in a text, C = chunks, I = items, O = options per item, V = vocabulary size.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .bpe import BPETokenizer
from .data import ADJECTIVES, CharTokenizer, TranslationTask
from .evaluation import translate
from .masks import padding_mask
from .model import Transformer
from .training import shift_for_teacher_forcing

IGNORE = -100  # a label F.cross_entropy skips


@torch.no_grad()
def token_losses(model: nn.Module, ids: torch.Tensor, stride: int | None = None, batch_size: int = 64) -> torch.Tensor:
    """``-ln p(token)`` for tokens 1 … N-1 of ``ids`` (N,), from windows of the model's ``block_size`` tokens that
    start every ``stride`` tokens (default: half a window): (N-1,) float32. Token 0 has no context and is not scored.
    Puts the model in eval mode."""
    block = model.config.block_size
    stride = stride or block // 2
    if not 0 < stride <= block:
        raise ValueError(f"stride={stride} must lie in 1 … block_size={block}")
    if ids.dim() != 1 or len(ids) < 2:
        raise ValueError(f"need ids shaped (N,) with N >= 2, got shape {tuple(ids.shape)}")
    model.eval()
    device = next(model.parameters()).device
    last = max(len(ids) - 1 - block, 0)  # the last window's start
    starts = sorted({*range(0, last, stride), last})
    width = min(block, len(ids) - 1)
    losses = torch.empty(len(ids) - 1)
    scored = 0  # tokens 1 … scored are done
    for first in range(0, len(starts), batch_size):
        batch = torch.tensor(starts[first : first + batch_size])  # (batch,)
        positions = batch[:, None] + torch.arange(width)  # (batch, width)
        logits = model(ids[positions].to(device))  # (batch, width, V)
        nats = F.cross_entropy(logits.transpose(1, 2), ids[positions + 1].to(device), reduction="none").cpu()
        for start, row in zip(batch.tolist(), nats, strict=True):
            new = scored - start  # the window's first token not scored yet: token start + 1 + new
            losses[scored : start + width] = row[new:]
            scored = start + width
    return losses


def token_byte_counts(tokenizer: CharTokenizer | BPETokenizer) -> torch.Tensor:
    """The UTF-8 bytes each token of the vocabulary stands for: (V,) long; 0 for a special token."""
    if isinstance(tokenizer, CharTokenizer):
        return torch.tensor([len(char.encode()) for char in tokenizer.chars])
    return torch.tensor([len(token) for token in tokenizer.vocab] + [0] * len(tokenizer.special_tokens))


def chunk_bits_per_byte(
    text: str, ids: torch.Tensor, nats: torch.Tensor, byte_counts: torch.Tensor, chunk_chars: int
) -> torch.Tensor:
    """Bits per byte of each chunk of ``chunk_chars`` characters of ``text``, as a model that encodes ``text`` into
    ``ids`` (N,) scores tokens 1 … N-1 with ``nats`` (N-1,): (C,) float64. A token belongs to the chunk that holds
    its first byte; ``byte_counts`` (V,) is :func:`token_byte_counts` of the tokenizer."""
    token_bytes = byte_counts[ids]  # (N,)
    if token_bytes.sum().item() != len(text.encode()):
        raise ValueError("ids do not encode text: their bytes add up to another length")
    token_starts = torch.cumsum(token_bytes, 0) - token_bytes  # (N,) each token's first byte
    chunk_starts = torch.tensor([len(text[:start].encode()) for start in range(0, len(text), chunk_chars)])  # (C,)
    chunk = torch.searchsorted(chunk_starts, token_starts[1:], right=True) - 1  # (N-1,) the scored tokens' chunks
    total_nats = torch.zeros(len(chunk_starts), dtype=torch.float64).index_add_(0, chunk, nats.double())
    total_bytes = torch.zeros(len(chunk_starts), dtype=torch.float64).index_add_(0, chunk, token_bytes[1:].double())
    return total_nats / (np.log(2) * total_bytes)


@dataclass
class ChoiceItem:
    """A source sentence, its candidate translations (lists of words) and the index of the right one."""

    source: list[str]
    options: list[list[str]]
    answer: int


def translation_choices(pairs: Sequence[tuple[list[str], list[str]]], seed: int = 0) -> list[ChoiceItem]:
    """One item per pair whose target has an adjective: the reference, the reference with its first adjective moved
    before the noun it follows, and the reference without that adjective, in an order shuffled by ``seed``."""
    rng = random.Random(seed)
    adjectives = set(ADJECTIVES.values())
    items = []
    for source, target in pairs:
        where = next((i for i, word in enumerate(target) if word in adjectives), None)
        if where is None:
            continue
        swapped = [*target[: where - 1], target[where], target[where - 1], *target[where + 1 :]]
        dropped = target[:where] + target[where + 1 :]
        order = rng.sample(range(3), 3)  # order[k]: which of (reference, swapped, dropped) is option k
        options = [target, swapped, dropped]
        items.append(ChoiceItem(source, [options[k] for k in order], order.index(0)))
    return items


@torch.no_grad()
def option_log_probs(model: Transformer, task: TranslationTask, items: Sequence[ChoiceItem]
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """The translator's ``ln p(option | source)``, summed over the option's words and its ``<eos>``, and the number
    of those tokens: two (I, O) tensors. Puts the model in eval mode."""
    model.eval()
    device = next(model.parameters()).device
    pairs = [(item.source, option) for item in items for option in item.options]
    src, tgt = task.encode_pairs(pairs)  # (I·O, S), (I·O, T)
    decoder_input, labels = shift_for_teacher_forcing(tgt)  # (I·O, T-1) each
    pad = task.tgt_vocab.pad_id
    logits = model(src.to(device), decoder_input.to(device), src_mask=padding_mask(src, pad).to(device))
    labels = labels.masked_fill(labels == pad, IGNORE)  # (I·O, T-1)
    nats = F.cross_entropy(logits.transpose(1, 2), labels.to(device), ignore_index=IGNORE, reduction="none")
    options = len(items[0].options)
    return -nats.sum(dim=1).view(-1, options).cpu(), (labels != IGNORE).sum(dim=1).view(-1, options)


def pick_by_log_prob(log_probs: torch.Tensor, lengths: torch.Tensor, per_token: bool = False) -> torch.Tensor:
    """Each item's most likely option (I,): by the summed log-probability, or by it divided by the option's tokens
    (``per_token``: the length-normalised score)."""
    return (log_probs / lengths if per_token else log_probs).argmax(dim=1)


def pick_by_generation(model: Transformer, task: TranslationTask, items: Sequence[ChoiceItem]) -> torch.Tensor:
    """The option equal to the model's greedy translation of each item's source, -1 where it equals none: (I,)."""
    translations = translate(model, task, [item.source for item in items])
    return torch.tensor([item.options.index(t) if t in item.options else -1
                         for item, t in zip(items, translations, strict=True)])


def three_ways(model: Transformer, task: TranslationTask, items: Sequence[ChoiceItem]) -> dict[str, torch.Tensor]:
    """Each way of taking the test's picks (I,): ``"write"`` (:func:`pick_by_generation`), ``"sum"`` and
    ``"per token"`` (:func:`pick_by_log_prob`)."""
    log_probs, lengths = option_log_probs(model, task, items)  # (I, O) each
    return {"write": pick_by_generation(model, task, items), "sum": pick_by_log_prob(log_probs, lengths),
            "per token": pick_by_log_prob(log_probs, lengths, per_token=True)}


def shortest_share(picks: torch.Tensor, items: Sequence[ChoiceItem]) -> float:
    """The share of items whose pick (I,) is one of their shortest options (a pick of -1, none, never is)."""
    return sum(p >= 0 and len(item.options[p]) == min(map(len, item.options))
               for p, item in zip(picks.tolist(), items, strict=True)) / len(items)


def membership_error_rates(leaked: Sequence[float], unseen: Sequence[float], threshold: float) -> tuple[float, float]:
    """Flag an item as leaked when its score is below ``threshold``; return (the share of unseen items flagged,
    the share of leaked items missed): the false-positive and false-negative rates."""
    leaked, unseen = np.asarray(leaked), np.asarray(unseen)
    return float(np.mean(unseen < threshold)), float(np.mean(leaked >= threshold))


def best_threshold(leaked: Sequence[float], unseen: Sequence[float]) -> tuple[float, float, float]:
    """The threshold whose two error rates (:func:`membership_error_rates`) add up to the least, tried at every
    score and above the largest: (threshold, false-positive rate, false-negative rate). It is chosen knowing which
    items leaked, so its errors flatter the check: a real audit must fix the threshold beforehand."""
    scores = np.concatenate((np.asarray(leaked, dtype=float), np.asarray(unseen, dtype=float)))
    candidates = np.append(np.unique(scores), scores.max() + 1)
    errors = [membership_error_rates(leaked, unseen, t) for t in candidates]
    best = int(np.argmin([sum(e) for e in errors]))
    return float(candidates[best]), *errors[best]
