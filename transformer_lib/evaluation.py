"""Evaluating a translator: greedy translations, exact match, chrF (a character n-gram F-score) and BLEU (a word
n-gram precision); and measuring a character-level language model (lesson 11's GPT): its mean loss on fixed windows
of a split, and the losses of three baselines that need no neural network (uniform, unigram and bigram character
models).

Exact match counts a translation only if every word is right; chrF (Popović, 2015) gives partial credit: it compares
the character n-grams (n = 1 … 6, spaces removed) of the translations with those of the references; BLEU (Papineni
et al., 2002) the word n-grams (n = 1 … 4), by precision only, with a penalty for translations shorter than the
references.

Every language-model loss is a cross-entropy in nats per character: the mean of ``-ln p(next character)``; ``ln V`` is
the loss of a uniform guess over V characters. Bits per byte divides the same nats by the text's bytes instead, so
that models whose tokens are not characters compare with it. Shape legend: N = characters in a split, V = vocabulary
size.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .data import TranslationTask, random_windows
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


def _word_ngrams(words: Sequence[str], n: int) -> Counter[tuple[str, ...]]:
    return Counter(tuple(words[i : i + n]) for i in range(len(words) - n + 1))


def bleu(hypotheses: Sequence[Sequence[str]], references: Sequence[Sequence[str]], max_n: int = 4) -> float:
    """Corpus BLEU in [0, 100] (Papineni et al., 2002) with one reference per sentence, on the words as given.

    For each n = 1 … max_n, the modified precision p_n is the number of hypothesis n-grams that the reference has,
    each counted at most as often as the reference has it (clipped), over the number of hypothesis n-grams, both
    summed over all sentences. BLEU is the geometric mean of p_1 … p_max_n times the brevity penalty
    BP = min(1, exp(1 - r / c)), r and c the total lengths of references and hypotheses. There is no smoothing: an
    order without a single match (or without a hypothesis n-gram) makes the score 0.
    """
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references: pass one per sentence")
    log_precisions = []
    for n in range(1, max_n + 1):
        matches = total = 0
        for hypothesis, reference in zip(hypotheses, references, strict=True):
            hyp, ref = _word_ngrams(hypothesis, n), _word_ngrams(reference, n)
            matches += sum((hyp & ref).values())  # clipped: an n-gram counts at most as often as the reference has it
            total += sum(hyp.values())
        if matches == 0:
            return 0.0
        log_precisions.append(math.log(matches / total))
    hyp_length, ref_length = sum(map(len, hypotheses)), sum(map(len, references))
    brevity_penalty = min(1.0, math.exp(1 - ref_length / hyp_length))
    return 100 * brevity_penalty * math.exp(sum(log_precisions) / max_n)


# --- language models: the loss on fixed windows, and the baselines that count characters


@torch.no_grad()
def evaluate_lm_loss(
    model: nn.Module, data: torch.Tensor, block_size: int, windows: int = 64, batch_size: int = 32, seed: int = 1234
) -> float:
    """Mean next-character loss of ``model`` over ``windows`` windows of ``data`` (N,), drawn from a fixed seed.

    The same seed gives the same windows at every call, so training and held-out splits, and a model at different
    steps, are measured the same way. Puts the model in eval mode (no dropout).
    """
    model.eval()
    device = next(model.parameters()).device
    generator = torch.Generator().manual_seed(seed)
    total, count = 0.0, 0
    for start in range(0, windows, batch_size):
        inputs, targets = random_windows(data, block_size, min(batch_size, windows - start), generator)
        logits = model(inputs.to(device))  # (batch, T, V)
        total += F.cross_entropy(logits.flatten(0, 1), targets.to(device).flatten(), reduction="sum").item()
        count += targets.numel()
    return total / count



def bits_per_byte(token_nats: torch.Tensor, token_bytes: torch.Tensor) -> float:
    """Bits per byte of text: the nats a language model pays for its predicted tokens, summed, over ln 2 times the
    UTF-8 bytes those tokens stand for, summed (as nanochat's ``evaluate_bpb``). Tokens of 0 bytes (special tokens,
    masked positions) count in neither sum. Unlike the mean loss per token, it does not depend on how a tokenizer
    cuts the text, so a character model and a BPE model compare on one scale.

    ``token_nats``: (N,) each predicted token's -ln p; ``token_bytes``: (N,) the bytes of its text."""
    if token_nats.shape != token_bytes.shape:
        raise ValueError(f"need one byte count per token: got {tuple(token_nats.shape)} losses and "
                         f"{tuple(token_bytes.shape)} byte counts")
    counted = token_bytes > 0  # (N,)
    if not counted.any():
        raise ValueError("no token stands for any byte of text: nothing to measure")
    return token_nats[counted].double().sum().item() / (math.log(2) * token_bytes[counted].sum().item())

def unigram_probabilities(train: torch.Tensor, vocab_size: int, smoothing: float = 1.0) -> torch.Tensor:
    """How often each character occurs in ``train`` (N,), plus ``smoothing`` each, normalised: (V,) float64."""
    counts = torch.bincount(train, minlength=vocab_size).double() + smoothing  # (V,)
    return counts / counts.sum()


def bigram_probabilities(train: torch.Tensor, vocab_size: int, smoothing: float = 1.0) -> torch.Tensor:
    """P(next | previous) counted over the neighbouring pairs of ``train`` (N,), plus ``smoothing`` each:
    (V, V) float64, row = previous character, each row summing to 1."""
    pairs = train[:-1] * vocab_size + train[1:]  # (N - 1,): one id per (previous, next) pair
    counts = torch.bincount(pairs, minlength=vocab_size**2).double().view(vocab_size, vocab_size) + smoothing
    return counts / counts.sum(dim=1, keepdim=True)  # (V, V)


def baseline_losses(train: torch.Tensor, valid: torch.Tensor, vocab_size: int) -> dict[str, float]:
    """Held-out loss (nats per character, on ``valid``) of three models counted on ``train``.

    ``uniform``: every character equally likely, ``ln V``; ``unigram``: each character's frequency; ``bigram``:
    the frequency of each character after the previous one. Add-one smoothing gives unseen characters and pairs a
    small probability instead of 0 (a loss of infinity).
    """
    unigram = unigram_probabilities(train, vocab_size)  # (V,)
    bigram = bigram_probabilities(train, vocab_size)  # (V, V)
    return {
        "uniform": math.log(vocab_size),
        "unigram": -unigram[valid].log().mean().item(),
        "bigram": -bigram[valid[:-1], valid[1:]].log().mean().item(),  # each character predicted from the one before
    }
