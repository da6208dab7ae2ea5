"""Turning a trained encoder-decoder into translations: decoding strategies.

Shape legend: batch, S = source length, T = generated length.
"""

from __future__ import annotations

import torch

from .model import Transformer


@torch.no_grad()
def greedy_decode(
    model: Transformer,
    src: torch.Tensor,
    bos_id: int,
    eos_id: int,
    max_len: int,
    src_mask: torch.Tensor | None = None,
    use_cache: bool = True,
) -> torch.Tensor:
    """Pick the most likely next token at every step, for a batch of sources at once.

    ``src``: (batch, S) token ids; ``src_mask``: e.g. ``padding_mask(src, pad_id)``. Returns (batch, 1 + T) ids that
    start with ``bos_id``; generation stops when every sentence has produced ``eos_id`` or after ``max_len`` new
    tokens, and a finished sentence is padded with ``eos_id``. With ``use_cache`` each step feeds only the newest
    token and reuses the keys and values of earlier steps; without it, each step recomputes the whole prefix.
    """
    model.eval()
    memory = model.encode(src, src_mask)  # (batch, S, d_model)
    tokens = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)  # (batch, 1)
    finished = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)  # (batch,)
    cache = model.new_cache() if use_cache else None
    for _ in range(max_len):
        decoder_input = tokens[:, -1:] if use_cache else tokens  # (batch, 1) or (batch, t)
        logits = model.decode(decoder_input, memory, memory_mask=src_mask, cache=cache)  # (batch, ·, V)
        next_token = logits[:, -1].argmax(dim=-1)  # (batch,)
        next_token = torch.where(finished, torch.full_like(next_token, eos_id), next_token)
        tokens = torch.cat((tokens, next_token[:, None]), dim=1)  # (batch, t + 1)
        finished |= next_token == eos_id
        if finished.all():
            break
    return tokens


# --- sampling: temperature, top-k and top-p (nucleus) filters


def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the ``k`` largest logits of each row and set the others to ``-inf`` (their probability becomes 0).

    ``logits``: (…, V) -> (…, V). Tokens tied with the k-th largest logit are kept too.
    """
    if not 1 <= k <= logits.shape[-1]:
        raise ValueError(f"top_k={k} must be between 1 and the vocabulary size {logits.shape[-1]}")
    kth_largest = logits.topk(k, dim=-1).values[..., -1:]  # (…, 1)
    return logits.masked_fill(logits < kth_largest, float("-inf"))  # (…, V)


def top_p_filter(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Nucleus filter: keep the fewest most-likely tokens whose probabilities add up to at least ``p``.

    ``logits``: (…, V) -> (…, V), the dropped tokens set to ``-inf``. The most likely token is always kept.
    """
    if not 0.0 < p <= 1.0:
        raise ValueError(f"top_p={p} must be in (0, 1]: it is the probability mass to keep, e.g. 0.9")
    sorted_logits, order = logits.sort(dim=-1, descending=True)  # (…, V), most likely first
    sorted_probs = sorted_logits.softmax(dim=-1)  # (…, V)
    mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs  # (…, V): probability of the tokens ranked above
    drop_sorted = mass_before >= p  # the nucleus already holds p without this token
    drop = drop_sorted.scatter(-1, order, drop_sorted)  # (…, V): back in vocabulary order
    return logits.masked_fill(drop, float("-inf"))


def sampling_distribution(
    logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None
) -> torch.Tensor:
    """The probabilities :func:`sample_next_token` draws from: ``softmax(logits / temperature)`` after the optional
    top-k and top-p filters.

    ``logits``: (…, V) -> (…, V) probabilities, 0 for every token a filter dropped.
    """
    if temperature <= 0:
        raise ValueError(f"temperature={temperature} must be > 0; for the most likely token use greedy decoding")
    logits = logits / temperature  # (…, V): < 1 sharpens the distribution, > 1 flattens it
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None:
        logits = top_p_filter(logits, top_p)
    return logits.softmax(dim=-1)  # (…, V)


def sample_next_token(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Draw one token per row from ``softmax(logits / temperature)``, after the optional top-k and top-p filters.

    ``logits``: (batch, V) -> (batch,) token ids. The draw happens on the CPU, with ``generator`` (a CPU
    ``torch.Generator``) if given, so a seed gives the same tokens on every device.
    """
    if logits.dim() != 2:
        raise ValueError(
            f"sample_next_token expects logits shaped (batch, V), got {tuple(logits.shape)}: for one row pass "
            "logits[None]; for a model's output (batch, T, V) pass the last position, logits[:, -1]"
        )
    probs = sampling_distribution(logits.float(), temperature, top_k, top_p).cpu()  # (batch, V)
    return torch.multinomial(probs, 1, generator=generator)[:, 0].to(logits.device)  # (batch,)


@torch.no_grad()
def sample(
    model: Transformer,
    src: torch.Tensor,
    bos_id: int,
    eos_id: int,
    max_len: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    src_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Like :func:`greedy_decode` (with the cache), but each next token is drawn by :func:`sample_next_token`.

    ``src``: (batch, S). Returns (batch, 1 + T) ids starting with ``bos_id``, finished rows padded with ``eos_id``.
    """
    model.eval()
    memory = model.encode(src, src_mask)  # (batch, S, d_model)
    tokens = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)  # (batch, 1)
    finished = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)  # (batch,)
    cache = model.new_cache()
    for _ in range(max_len):
        logits = model.decode(tokens[:, -1:], memory, memory_mask=src_mask, cache=cache)  # (batch, 1, V)
        next_token = sample_next_token(logits[:, -1], temperature, top_k, top_p, generator)  # (batch,)
        next_token = torch.where(finished, torch.full_like(next_token, eos_id), next_token)
        tokens = torch.cat((tokens, next_token[:, None]), dim=1)  # (batch, t + 1)
        finished |= next_token == eos_id
        if finished.all():
            break
    return tokens


# --- beam search


def length_normalised_score(log_prob: float, length: int, length_penalty: float) -> float:
    """``log_prob / length ** length_penalty``: 0 ranks by total log-probability (short outputs win), 1 by the
    mean log-probability per token."""
    return log_prob / length**length_penalty


@torch.no_grad()
def beam_search(
    model: Transformer,
    src: torch.Tensor,
    bos_id: int,
    eos_id: int,
    max_len: int,
    beam_size: int = 4,
    length_penalty: float = 0.6,
    src_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Keep the ``beam_size`` most probable prefixes at every step instead of only the best one.

    ``src``: (1, S), one sentence. Each step extends every kept prefix by every token, scores each candidate by its
    total log-probability and keeps the best ``beam_size`` that have not ended; a candidate ending in ``eos_id`` is
    set aside as finished. The search stops when ``beam_size`` candidates have finished (or after ``max_len``
    tokens), and returns the one with the best :func:`length_normalised_score`, shaped (1, 1 + T) and starting
    with ``bos_id``. Every step recomputes the kept prefixes (no cache), which keeps the code short.
    """
    if src.shape[0] != 1:
        raise ValueError(
            f"beam_search translates one sentence at a time: src has shape {tuple(src.shape)}, pass src[i : i + 1]"
        )
    if beam_size < 1:
        raise ValueError(f"beam_size={beam_size} must be at least 1 (1 is greedy decoding)")
    model.eval()
    memory = model.encode(src, src_mask)  # (1, S, d_model)
    prefixes = torch.full((1, 1), bos_id, dtype=torch.long, device=src.device)  # (beams, t)
    scores = torch.zeros(1, device=src.device)  # (beams,): total log-probability of each prefix
    finished: list[tuple[float, torch.Tensor]] = []  # (normalised score, tokens)
    for _ in range(max_len):
        beams = prefixes.shape[0]
        logits = model.decode(prefixes, memory.expand(beams, -1, -1), memory_mask=src_mask)  # (beams, t, V)
        candidates = scores[:, None] + logits[:, -1].log_softmax(dim=-1)  # (beams, V)
        vocab_size = candidates.shape[1]
        top_scores, top_indices = candidates.flatten().topk(min(2 * beam_size, candidates.numel()))
        kept_prefixes, kept_scores = [], []
        for score, index in zip(top_scores.tolist(), top_indices.tolist(), strict=True):
            beam, token = divmod(index, vocab_size)
            extended = torch.cat((prefixes[beam], prefixes.new_tensor([token])))  # (t + 1,)
            if token == eos_id:
                finished.append((length_normalised_score(score, len(extended) - 1, length_penalty), extended))
            else:
                kept_prefixes.append(extended)
                kept_scores.append(score)
            if len(kept_prefixes) == beam_size:
                break
        if len(finished) >= beam_size or not kept_prefixes:
            break
        prefixes, scores = torch.stack(kept_prefixes), scores.new_tensor(kept_scores)
    else:  # max_len reached: unfinished prefixes compete too
        length = prefixes.shape[1] - 1
        for score, prefix in zip(scores.tolist(), prefixes, strict=True):
            finished.append((length_normalised_score(score, length, length_penalty), prefix))
    _, best_tokens = max(finished, key=lambda pair: pair[0])
    return best_tokens[None]  # (1, 1 + T)
