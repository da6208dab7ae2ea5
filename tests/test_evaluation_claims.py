"""Lesson 17's trained claims, as bounds over seeds (tests/bounds.py): bits per byte against the loss per token, the
translator's multiple-choice test and its controls, the paired comparison, the leak and its membership check, and
the ratings from games. Seed 0 is the lesson's run; ``course.py bounds`` adds seeds and kernel settings."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bounds import asserted_by, bound, bound_seeds
from transformer_lib import (
    ChoiceItem,
    TrainingConfig,
    Transformer,
    best_threshold,
    bigram_probabilities,
    bits_per_byte,
    bradley_terry,
    chunk_bits_per_byte,
    difference_interval,
    elo_ratings,
    leaked_char_gpt,
    mcnemar_test,
    order_disagreements,
    python_docs_split,
    set_seed,
    shortest_share,
    three_ways,
    token_byte_counts,
    token_losses,
    train_bpe_gpt,
    train_char_gpt,
    train_translation_model,
    translation_choices,
    translation_model_config,
    unigram_probabilities,
)

CPU = torch.device("cpu")
CHUNK = 256


def _chunks(text: str, ids: torch.Tensor, nats: torch.Tensor, tokenizer) -> np.ndarray:
    return chunk_bits_per_byte(text, ids, nats, token_byte_counts(tokenizer), CHUNK).numpy()


@pytest.mark.trained
@asserted_by("Lesson 17")
@pytest.mark.parametrize("seed", bound_seeds((0,)))  # the lesson's seed: its runs load from the cache
def test_lesson_17s_bits_per_byte_leak_and_ratings(seed):
    """Section 1 (per token the character GPT, per byte the BPE GPT), section 4 (the leak and the membership check)
    and section 5 (Bradley-Terry order-free and in the order of the mean, Elo not order-free)."""
    _, held_out = python_docs_split()
    char_run, bpe_run = train_char_gpt(300, CPU, seed=seed), train_bpe_gpt(150, device=CPU, seed=seed)
    valid = char_run.valid
    char_nats, bpe_nats = token_losses(char_run.model, valid), token_losses(bpe_run.model, bpe_run.valid)
    char_bytes, bpe_bytes = token_byte_counts(char_run.tokenizer), token_byte_counts(bpe_run.tokenizer)
    bound("BPE minus character GPT, nats per token", bpe_nats.mean().item() - char_nats.mean().item(), at_least=1.0)
    char_bpb = bits_per_byte(char_nats, char_bytes[valid[1:]])
    bpe_bpb = bits_per_byte(bpe_nats, bpe_bytes[bpe_run.valid[1:]])
    bound("character minus BPE GPT, bits per byte", char_bpb - bpe_bpb, at_least=0.2)
    bigram = bigram_probabilities(char_run.train, len(char_run.tokenizer))
    bigram_nats = -bigram[valid[:-1], valid[1:]].log()
    bound("bigram minus the worse GPT, bits per byte",
          bits_per_byte(bigram_nats, char_bytes[valid[1:]]) - max(char_bpb, bpe_bpb), at_least=0.2)
    char_chunks = _chunks(held_out, valid, char_nats, char_run.tokenizer)
    bpe_chunks = _chunks(held_out, bpe_run.valid, bpe_nats, bpe_run.tokenizer)
    bound("share of chunks where the BPE GPT is better", float(np.mean(bpe_chunks < char_chunks)), at_least=0.7)
    bound("paired interval of the chunk difference, low end", difference_interval(char_chunks, bpe_chunks)[0],
          at_least=0.0)

    texts = [held_out[i : i + CHUNK] for i in range(0, len(held_out), CHUNK)]
    leaked_ids = np.random.default_rng(seed).choice(len(texts), len(texts) // 4, replace=False)
    is_leaked = np.isin(np.arange(len(texts)), leaked_ids)
    leaked_text = "".join(texts[i] for i in sorted(leaked_ids.tolist()))
    leaked = _chunks(held_out, valid, token_losses(leaked_char_gpt(60, leaked_text, 160, device=CPU, seed=seed).model,
                                                   valid), char_run.tokenizer)
    control = _chunks(held_out, valid, token_losses(leaked_char_gpt(60, device=CPU, seed=seed).model, valid),
                      char_run.tokenizer)
    drop = leaked - control
    bound("leak's drop on unseen minus on leaked chunks", drop[~is_leaked].mean() - drop[is_leaked].mean(),
          at_least=0.15)
    with_reference = sum(best_threshold(drop[is_leaked], drop[~is_leaked])[1:])
    without_reference = sum(best_threshold(leaked[is_leaked], leaked[~is_leaked])[1:])
    bound("membership errors at the best threshold, without minus with a reference",
          without_reference - with_reference, at_least=0.0)

    players = {"char GPT": char_chunks, "control": control, "leaked": leaked, "BPE GPT": bpe_chunks}
    names = list(players)
    games = [(a, b, float(players[a][c] < players[b][c]))
             for c in range(len(texts)) for i, a in enumerate(names) for b in names[i + 1 :]]
    orders = np.random.default_rng(0)
    shuffled_elo = [elo_ratings([games[i] for i in orders.permutation(len(games))]) for _ in range(20)]
    bt, bt_shuffled = bradley_terry(games), bradley_terry([games[i] for i in orders.permutation(len(games))])
    bound("Bradley-Terry's largest change with the order", max(abs(bt[n] - bt_shuffled[n]) for n in names),
          at_most=1e-6)
    bound("Elo's largest range over 20 orders",
          max(max(r[n] for r in shuffled_elo) - min(r[n] for r in shuffled_elo) for n in names), at_least=100)
    bound("pairs of players Bradley-Terry and the mean order apart", len(order_disagreements(
        bt, {n: -players[n].mean() for n in names})), at_most=1)
    unigram_nats = -unigram_probabilities(char_run.train, len(char_run.tokenizer))[valid[1:]].log()
    unigram_bigram = [_chunks(held_out, valid, nats, char_run.tokenizer) for nats in (unigram_nats, bigram_nats)]
    bound("share of games the counting models win", float(np.mean(
        [(c < p).mean() for c in unigram_bigram for p in players.values()])), at_most=0.02)


@pytest.mark.trained
@pytest.mark.parametrize("seed", bound_seeds((0,)))  # the lesson's seed: its runs load from the cache
def test_lesson_17s_multiple_choice_claims(seed):
    """Section 2 (three ways to take the test with lesson 09's short translators, the length bias, choosing against
    writing, the shuffled-source control) and section 3 (the paired interval narrower than the unpaired one, 50
    items too few)."""
    short = TrainingConfig(steps=150, warmup_steps=40, seed=seed)  # lesson 09's two short runs
    with_positions = train_translation_model(short, CPU, progress=False)
    without_positions = train_translation_model(short, CPU, progress=False, positions=False)
    task = with_positions.task
    set_seed(seed)
    untrained = Transformer(translation_model_config(task))
    right = {}
    for name, model in (("with", with_positions.model), ("without", without_positions.model), ("untrained", untrained)):
        for split in ("test", "unseen"):
            items = translation_choices(getattr(task, split))
            picks = three_ways(model, task, items)
            answers = torch.tensor([it.answer for it in items])
            right[name, split] = {m: (p == answers).numpy() for m, p in picks.items()}
            if name == "untrained":
                shortest = [shortest_share(picks[m], items) for m in ("sum", "per token")]
                bound(f"untrained, {split}: sum picks the shortest", shortest[0], at_least=0.95)
                bound(f"untrained, {split}: per token picks the shortest", shortest[1], at_least=1 / 3)
                bound(f"untrained, {split}: sum minus per token, shortest", shortest[0] - shortest[1], at_least=0.2)
    for method in ("write", "sum", "per token"):
        bound(f"with positions, test, {method}", right["with", "test"][method].mean(), at_least=0.95)
    bound("without positions, test, write", right["without", "test"]["write"].mean(), at_most=0.6)
    for method in ("sum", "per token"):
        bound(f"without positions, test, {method}", right["without", "test"][method].mean(), at_least=0.9)
    bound("with positions, unseen: sum minus write", right["with", "unseen"]["sum"].mean()
          - right["with", "unseen"]["write"].mean(), at_least=0.01)
    items = translation_choices(task.test)
    shuffle = np.random.default_rng(0).permutation(len(items))
    shuffled = [ChoiceItem(items[j].source, it.options, it.answer) for it, j in zip(items, shuffle, strict=True)]
    answers = torch.tensor([it.answer for it in items])
    for method, picks in three_ways(with_positions.model, task, shuffled).items():
        bound(f"shuffled sources, {method}", (picks == answers).float().mean().item(), at_most=0.5)
    with_right, without_right = right["with", "unseen"]["sum"], right["without", "unseen"]["sum"]
    paired = difference_interval(with_right, without_right, paired=True)
    unpaired = difference_interval(with_right, without_right, paired=False)
    bound("unpaired minus paired interval width", (unpaired[1] - unpaired[0]) - (paired[1] - paired[0]), at_least=0.0)
    bound("McNemar's p on the first 50 unseen items", mcnemar_test(with_right[:50], without_right[:50])[2],
          at_least=0.05)
