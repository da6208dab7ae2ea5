"""Turning a trained model into text: one generation loop with a pluggable picker, beam search, and the KV cache.

Shape legend: batch, S = source length, T = generated length, V = vocabulary size.

Greedy decoding and sampling are the same loop: read the logits of the last position, **pick** the next token,
append it, stop at the end token. Only the picker differs (as in minGPT's single ``generate(do_sample, top_k)``):
:func:`greedy_pick` takes the argmax, :func:`sampling_picker` draws from the filtered distribution.
:func:`generate_tokens` is that loop; :func:`generate` runs it on either model, a decoder-only ``GPT`` continuing a
prompt or an encoder-decoder ``Transformer`` translating ``src``, with or without the KV cache;
:func:`generate_translation`, :func:`greedy_decode` and :func:`sample` are its translation shortcuts.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch

from .data import check_token_ids
from .gpt import GPT
from .model import DecoderCache, Transformer

Picker = Callable[[torch.Tensor], torch.Tensor]  # logits (batch, V) -> next token ids (batch,)


def greedy_pick(logits: torch.Tensor) -> torch.Tensor:
    """The greedy picker: the most likely token of each row, (batch, V) -> (batch,)."""
    return logits.argmax(dim=-1)


def top_two_gap(logits: torch.Tensor) -> torch.Tensor:
    """How far each row's largest logit leads the runner-up, (..., V) -> (...).

    A greedy choice is the same on every machine only when it leads by more than the logits' rounding error (about
    1e-6 of their size in float32): two code paths, or two CPUs, may otherwise break a near-tie differently.
    """
    best_two = logits.topk(2, dim=-1).values  # (..., 2)
    return best_two[..., 0] - best_two[..., 1]


class GreedyWithMargin:
    """:func:`greedy_pick` that also records ``smallest_gap``, the least lead (:func:`top_two_gap`) of any token it
    picked, so a test can show its tokens were chosen with a margin before comparing them exactly."""

    def __init__(self) -> None:
        self.smallest_gap = float("inf")

    def __call__(self, logits: torch.Tensor) -> torch.Tensor:  # (batch, V) -> (batch,)
        self.smallest_gap = min(self.smallest_gap, top_two_gap(logits).min().item())
        return greedy_pick(logits)


@torch.no_grad()
def generate_tokens(
    next_logits: Callable[[torch.Tensor], torch.Tensor],
    tokens: torch.Tensor,
    max_new_tokens: int,
    pick: Picker = greedy_pick,
    eos_id: int | None = None,
) -> torch.Tensor:
    """The generation loop: ``max_new_tokens`` times, ``pick`` a token from ``next_logits(tokens)`` and append it.

    ``tokens``: (batch, T0) the start (``<bos>`` or a prompt); ``next_logits``: (batch, t) -> (batch, V), the logits
    of the token that follows each row. With an ``eos_id``, a row that has produced it is padded with ``eos_id``
    and the loop stops once every row has. Returns (batch, T0 + T).
    """
    finished = torch.zeros(tokens.shape[0], dtype=torch.bool, device=tokens.device)  # (batch,)
    for _ in range(max_new_tokens):
        next_token = pick(next_logits(tokens))  # (batch,)
        if eos_id is not None:
            next_token = next_token.masked_fill(finished, eos_id)  # a finished row only repeats the end token
            finished |= next_token == eos_id
        tokens = torch.cat((tokens, next_token[:, None]), dim=1)  # (batch, t + 1)
        if finished.all():
            break
    return tokens


def _translation_next_logits(
    model: Transformer, src: torch.Tensor, src_mask: torch.Tensor | None, use_cache: bool
) -> Callable[[torch.Tensor], torch.Tensor]:
    """``next_logits`` for an encoder-decoder: encode ``src`` once, then decode the target prefix."""
    memory = model.encode(src, src_mask)  # (batch, S, d_model): computed once
    cache = model.new_cache() if use_cache else None

    def next_logits(tokens: torch.Tensor) -> torch.Tensor:  # (batch, t) -> (batch, V)
        decoder_input = tokens[:, -1:] if use_cache else tokens  # (batch, 1) or (batch, t)
        return model.decode(decoder_input, memory, memory_mask=src_mask, cache=cache)[:, -1]  # the last position

    return next_logits


def _gpt_next_logits(model: GPT, use_cache: bool) -> Callable[[torch.Tensor], torch.Tensor]:
    """``next_logits`` for a decoder-only model. With the cache, each call feeds only the tokens the cache has not
    seen; once the text outgrows ``block_size`` (learned positions end there), every step recomputes the last
    ``block_size`` tokens, as generation without the cache always does."""
    block_size = model.config.block_size
    cache = model.new_cache() if use_cache else None

    def next_logits(tokens: torch.Tensor) -> torch.Tensor:  # (batch, t) -> (batch, V)
        if cache is None or tokens.shape[1] > block_size:
            return model(tokens[:, -block_size:])[:, -1]  # recompute the (cropped) context
        return model(tokens[:, len(cache) :], cache=cache)[:, -1]  # (batch, t_new) in, the last position out

    return next_logits


@torch.no_grad()
def generate(
    model: GPT | Transformer,
    tokens: torch.Tensor,
    max_new_tokens: int,
    pick: Picker = greedy_pick,
    eos_id: int | None = None,
    *,
    src: torch.Tensor | None = None,
    src_mask: torch.Tensor | None = None,
    use_cache: bool = True,
) -> torch.Tensor:
    """Continue ``tokens`` (batch, T0) by up to ``max_new_tokens`` tokens chosen by ``pick`` -> (batch, T0 + T).

    A ``GPT`` continues its prompt; a ``Transformer`` needs ``src`` (batch, S) (and ``src_mask`` for padding) and
    continues the target prefix, e.g. a column of ``<bos>``. ``pick``: :func:`greedy_pick` or a
    :func:`sampling_picker` (temperature, top-k, top-p). ``eos_id``: see :func:`generate_tokens`. With
    ``use_cache`` each step runs only the new tokens and reuses the keys and values of earlier ones; the tokens are
    the same as without it (``tests/test_decoding.py``).
    """
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens={max_new_tokens} must be >= 0: it counts the tokens to add")
    model.eval()
    if isinstance(model, GPT):
        if src is not None:
            raise ValueError("a GPT has no encoder, so it takes no src: pass the prompt as tokens")
        check_token_ids(tokens, model.config.vocab_size, "prompt")  # also when max_new_tokens is 0
        next_logits = _gpt_next_logits(model, use_cache)
    else:
        if src is None:
            raise ValueError("an encoder-decoder needs the source sentence: pass src=(batch, S) token ids")
        next_logits = _translation_next_logits(model, src, src_mask, use_cache)
    return generate_tokens(next_logits, tokens, max_new_tokens, pick, eos_id)


def generate_translation(
    model: Transformer,
    src: torch.Tensor,
    bos_id: int,
    eos_id: int,
    max_len: int,
    pick: Picker = greedy_pick,
    src_mask: torch.Tensor | None = None,
    use_cache: bool = True,
) -> torch.Tensor:
    """Run :func:`generate` on an encoder-decoder, for a batch of sources at once.

    ``src``: (batch, S) token ids; ``src_mask``: e.g. ``padding_mask(src, pad_id)``. Returns (batch, 1 + T) ids that
    start with ``bos_id``; generation stops when every sentence has produced ``eos_id`` or after ``max_len`` new
    tokens, and a finished sentence is padded with ``eos_id``. With ``use_cache`` each step feeds only the newest
    token and reuses the keys and values of earlier steps; without it, each step recomputes the whole prefix.
    """
    start = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)  # (batch, 1)
    return generate(model, start, max_len, pick, eos_id, src=src, src_mask=src_mask, use_cache=use_cache)


def greedy_decode(
    model: Transformer,
    src: torch.Tensor,
    bos_id: int,
    eos_id: int,
    max_len: int,
    src_mask: torch.Tensor | None = None,
    use_cache: bool = True,
) -> torch.Tensor:
    """:func:`generate_translation` with :func:`greedy_pick`: the most likely next token at every step.

    ``src``: (batch, S) -> (batch, 1 + T) ids starting with ``bos_id``, finished rows padded with ``eos_id``.
    """
    return generate_translation(model, src, bos_id, eos_id, max_len, greedy_pick, src_mask, use_cache)


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
    ``torch.Generator``) if given, so a seed gives the same random numbers on every device; the same machine and
    settings then give the same tokens, while another machine, whose probabilities can differ in their last bits,
    can pick another token where a random number falls near the boundary between two tokens.
    """
    if logits.dim() != 2:
        raise ValueError(
            f"sample_next_token expects logits shaped (batch, V), got {tuple(logits.shape)}: for one row pass "
            "logits[None]; for a model's output (batch, T, V) pass the last position, logits[:, -1]"
        )
    probs = sampling_distribution(logits.float(), temperature, top_k, top_p).cpu()  # (batch, V)
    return torch.multinomial(probs, 1, generator=generator)[:, 0].to(logits.device)  # (batch,)


def sampling_picker(
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> Picker:
    """A picker for :func:`generate_tokens` that draws each token with :func:`sample_next_token`."""
    return partial(sample_next_token, temperature=temperature, top_k=top_k, top_p=top_p, generator=generator)


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
    """:func:`generate_translation` (with the cache) with :func:`sampling_picker`: each next token is drawn.

    ``src``: (batch, S). Returns (batch, 1 + T) ids starting with ``bos_id``, finished rows padded with ``eos_id``.
    """
    pick = sampling_picker(temperature, top_k, top_p, generator)
    return generate_translation(model, src, bos_id, eos_id, max_len, pick, src_mask)


# --- beam search


def length_normalised_score(log_prob: float, length: int, length_penalty: float) -> float:
    """``log_prob / ((5 + length) / 6) ** length_penalty``, the length penalty of Wu et al. (2016, GNMT), whose
    ``length_penalty`` α = 0.6 the Transformer paper used: α = 0 ranks by total log-probability (short outputs
    win); a larger α divides longer outputs' totals by more. The 5 softens the penalty for short outputs, and
    dividing by 6 makes it 1 at one token."""
    return log_prob / ((5 + length) / 6) ** length_penalty


Finished = list[tuple[float, torch.Tensor]]  # (normalised score, tokens (1 + T,)) of each ended hypothesis


def beam_search_step(
    prefixes: torch.Tensor,
    scores: torch.Tensor,
    log_probs: torch.Tensor,
    beam_size: int,
    eos_id: int,
    length_penalty: float,
) -> tuple[torch.Tensor, torch.Tensor, Finished]:
    """One step of beam search: extend every prefix by every token and keep the best.

    ``prefixes``: (beams, t) ids starting with ``<bos>``; ``scores``: (beams,) their total log-probabilities;
    ``log_probs``: (beams, V) each prefix's next-token log-probabilities. The ``2 * beam_size`` extensions with the
    best total log-probability are visited best first: one that ends in ``eos_id`` is finished, scored by
    :func:`length_normalised_score` over its t generated tokens (``<eos>`` counts, ``<bos>`` does not); the others
    are kept until ``beam_size`` are. Returns the kept prefixes (k, t + 1), their total log-probabilities (k,)
    (not normalised: they keep growing) and the finished hypotheses.
    """
    candidates = scores[:, None] + log_probs  # (beams, V): total log-probability of every extension
    vocab_size = candidates.shape[1]
    top_scores, top_indices = candidates.flatten().topk(min(2 * beam_size, candidates.numel()))
    kept, kept_scores, finished = [], [], []
    for score, index in zip(top_scores.tolist(), top_indices.tolist(), strict=True):
        beam, token = divmod(index, vocab_size)  # which prefix, which new token
        extended = torch.cat((prefixes[beam], prefixes.new_tensor([token])))  # (t + 1,)
        if token == eos_id:
            finished.append((length_normalised_score(score, len(extended) - 1, length_penalty), extended))
        else:
            kept.append(extended)
            kept_scores.append(score)
            if len(kept) == beam_size:
                break
    kept_prefixes = torch.stack(kept) if kept else prefixes.new_empty((0, prefixes.shape[1] + 1))  # (k, t + 1)
    return kept_prefixes, scores.new_tensor(kept_scores), finished


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

    ``src``: (1, S), one sentence. Each step is a :func:`beam_search_step`. The search stops when ``beam_size``
    hypotheses have finished (or after ``max_len`` tokens, when the unfinished ones compete too), and returns the
    one with the best :func:`length_normalised_score`, shaped (1, 1 + T) and starting with ``bos_id``. Every step
    recomputes the kept prefixes (no cache), which keeps the code short.
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
    finished: Finished = []
    for _ in range(max_len):
        beams = prefixes.shape[0]
        logits = model.decode(prefixes, memory.expand(beams, -1, -1), memory_mask=src_mask)  # (beams, t, V)
        log_probs = logits[:, -1].log_softmax(dim=-1)  # (beams, V)
        prefixes, scores, ended = beam_search_step(prefixes, scores, log_probs, beam_size, eos_id, length_penalty)
        finished += ended
        if len(finished) >= beam_size or prefixes.shape[0] == 0:
            break
    else:  # max_len reached: unfinished prefixes compete too
        length = prefixes.shape[1] - 1
        for score, prefix in zip(scores.tolist(), prefixes, strict=True):
            finished.append((length_normalised_score(score, length, length_penalty), prefix))
    _, best_tokens = max(finished, key=lambda pair: pair[0])
    return best_tokens[None]  # (1, 1 + T)


# --- the KV cache's memory


def cache_nbytes(cache: DecoderCache) -> int:
    """Bytes held by the key and value tensors of a decoder's cache: every layer's self-attention keys/values
    (growing with the target) and cross-attention keys/values (fixed by the source)."""
    return sum(
        tensor.nbytes
        for layer in cache.layers
        for attention_cache in (layer.self_attn, layer.cross_attn)
        for tensor in (attention_cache.key, attention_cache.value)
        if tensor is not None
    )
