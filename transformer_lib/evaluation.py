"""Evaluating a translator: greedy translations, exact match, and chrF (a character n-gram F-score).

Exact match counts a translation only if every word is right; chrF (Popović, 2015) gives partial credit: it compares
the character n-grams (n = 1 … 6, spaces removed) of the translations with those of the references.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import torch

from .data import TranslationTask
from .decoding import greedy_decode
from .masks import padding_mask
from .model import Transformer


@torch.no_grad()
def translate(
    model: Transformer, task: TranslationTask, sources: list[list[str]], max_len: int | None = None
) -> list[list[str]]:
    """Greedy translations of source sentences (lists of words) into lists of target words, at most ``max_len``
    tokens each (default: as many as the model has positions)."""
    max_len = max_len or model.config.max_len - 1
    device = next(model.parameters()).device
    src = task.encode_pairs([(s, []) for s in sources])[0].to(device)  # (batch, S)
    tokens = greedy_decode(
        model, src, task.tgt_vocab.bos_id, task.tgt_vocab.eos_id, max_len,
        src_mask=padding_mask(src, task.src_vocab.pad_id),
    )
    return [task.tgt_vocab.decode(row) for row in tokens.cpu()]


def exact_match(model: Transformer, task: TranslationTask, split: str = "test", batch_size: int = 500) -> float:
    """Fraction of a split's sentences whose greedy translation equals the reference word for word."""
    model.eval()
    pairs = getattr(task, split)
    correct = 0
    for start in range(0, len(pairs), batch_size):
        chunk = pairs[start : start + batch_size]
        predictions = translate(model, task, [s for s, _ in chunk])
        correct += sum(p == t for p, (_, t) in zip(predictions, chunk, strict=True))
    return correct / len(pairs)


def _char_ngrams(words: Sequence[str], n: int) -> Counter[str]:
    text = "".join(words)  # spaces do not count
    return Counter(text[i : i + n] for i in range(len(text) - n + 1))


def chrf(hypotheses: Sequence[Sequence[str]], references: Sequence[Sequence[str]], max_n: int = 6,
         beta: float = 2.0) -> float:
    """Corpus chrF in [0, 100]: character n-gram counts are summed over all sentences; for each n = 1 … max_n,
    precision = matches / hypothesis n-grams and recall = matches / reference n-grams; both are averaged over the
    orders n that the references have and combined as F_beta = (1 + beta²) P R / (beta² P + R). beta = 2 weighs
    recall more (sacreBLEU's default, chrF2)."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references: pass one per sentence")
    precisions, recalls = [], []
    for n in range(1, max_n + 1):
        matches = hyp_total = ref_total = 0
        for hypothesis, reference in zip(hypotheses, references, strict=True):
            hyp, ref = _char_ngrams(hypothesis, n), _char_ngrams(reference, n)
            matches += sum((hyp & ref).values())  # clipped: an n-gram counts at most as often as the reference has it
            hyp_total += sum(hyp.values())
            ref_total += sum(ref.values())
        if ref_total:  # orders longer than every reference are left out of the averages
            precisions.append(matches / hyp_total if hyp_total else 0.0)
            recalls.append(matches / ref_total)
    if not recalls:
        return 0.0
    precision, recall = sum(precisions) / len(precisions), sum(recalls) / len(recalls)
    if precision + recall == 0:
        return 0.0
    return 100 * (1 + beta**2) * precision * recall / (beta**2 * precision + recall)
