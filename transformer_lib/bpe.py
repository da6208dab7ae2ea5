"""Byte-level byte-pair encoding (BPE), the tokenizer family of GPT-2 and most of today's LLMs.

Text is cut into pieces (words with their leading space, numbers, punctuation runs, whitespace), each piece becomes
its UTF-8 bytes (ids 0-255, so any text can be encoded and nothing is ever unknown), and training repeatedly merges
the most frequent adjacent pair of tokens into a new token. Encoding replays the learned merges, earliest first.

The vocabulary and merges export to Hugging Face ``tokenizers`` (GPT-2's byte-to-character table,
:func:`bytes_to_unicode`), which the tests use as an independent reference.

Shape legend: ids are plain ``list[int]``; a "word" is the list of token ids of one piece of text.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from itertools import pairwise

_SPACE = r" \t\n\r\f\v"  # ASCII whitespace, spelled out so that Python's re and Oniguruma agree on every character
SPLIT_PATTERN = (
    rf" ?[A-Za-z]+| ?[0-9]+| ?[^A-Za-z0-9{_SPACE}]+"  # a word, a number or other symbols, each with one space before
    rf"|[{_SPACE}]+(?![^{_SPACE}])|[{_SPACE}]+"  # whitespace: a run's last space stays with the word after it
)
"""How text is cut before BPE: GPT-2's pattern with ASCII classes (GPT-2 uses Unicode letters ``\\p{L}`` and digits
``\\p{N}`` of the ``regex`` module; ASCII classes are a choice: they mean the same in Python's ``re`` and in
Oniguruma, the engine of Hugging Face's ``tokenizers``) and without GPT-2's pieces for English contractions
(``'s``, ``'t``, ``'re``, ``'ve``, ``'m``, ``'ll``, ``'d``): ``" naïve"`` becomes ``" na"``, ``"ï"``, ``"ve"``, and
``"isn't"`` ends in ``"'"``, ``"t"`` (lesson 12 shows both splits). The pieces cover the text exactly, so joining
them gives the text back."""


def pretokenize(text: str) -> list[str]:
    """Cut ``text`` into the pieces that BPE merges within (never across)."""
    return re.findall(SPLIT_PATTERN, text)


def pair_counts(words: list[list[int]], counts: list[int]) -> Counter[tuple[int, int]]:
    """How often each adjacent pair of ids occurs, word ``i`` counted ``counts[i]`` times."""
    pairs: Counter[tuple[int, int]] = Counter()
    for word, count in zip(words, counts, strict=True):
        for pair in pairwise(word):
            pairs[pair] += count
    return pairs


def merge_pair(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """Replace every occurrence of ``pair`` in ``ids``, scanning left to right, by ``new_id``.

    Occurrences do not overlap: ``[a, a, a]`` with the pair ``(a, a)`` becomes ``[new_id, a]``.
    """
    merged, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
            merged.append(new_id)
            i += 2
        else:
            merged.append(ids[i])
            i += 1
    return merged


@dataclass
class BPETokenizer:
    """A trained byte-level BPE: ``vocab[id]`` is the token's bytes; ``merges`` are the learned pairs, in order.

    Ids 0-255 are the single bytes. A merge whose bytes already form a token reuses that token's id (as Hugging
    Face's trainer does), so the vocabulary can be smaller than 256 + ``len(merges)``.
    """

    vocab: list[bytes]
    merges: list[tuple[int, int]]
    _ranks: dict[tuple[int, int], int] = field(init=False, repr=False)
    _ids: dict[bytes, int] = field(init=False, repr=False)
    _memo: dict[str, list[int]] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        self._ranks = {pair: rank for rank, pair in enumerate(self.merges)}
        self._ids = {token: i for i, token in enumerate(self.vocab)}

    def __len__(self) -> int:
        return len(self.vocab)

    def merged_id(self, pair: tuple[int, int]) -> int:
        """The id of the token that merging ``pair`` makes."""
        return self._ids[self.vocab[pair[0]] + self.vocab[pair[1]]]

    def encode_piece(self, piece: str) -> list[int]:
        """One piece's ids: start from its bytes, apply the earliest-learned merge present, until none applies."""
        if piece not in self._memo:
            ids = list(piece.encode("utf-8"))
            while len(ids) > 1:
                pair = min(pairwise(ids), key=lambda p: self._ranks.get(p, len(self._ranks)))
                if pair not in self._ranks:
                    break
                ids = merge_pair(ids, pair, self.merged_id(pair))
            self._memo[piece] = ids
        return self._memo[piece]

    def encode(self, text: str) -> list[int]:
        """``text`` -> token ids (any Unicode text: every character is made of known bytes)."""
        return [i for piece in pretokenize(text) for i in self.encode_piece(piece)]

    def decode(self, ids: list[int]) -> str:
        """Token ids -> text; bytes that do not form valid UTF-8 (a cut-off sequence) become U+FFFD."""
        return b"".join(self.vocab[i] for i in ids).decode("utf-8", errors="replace")

    def hf_vocab_and_merges(self) -> tuple[dict[str, int], list[tuple[str, str]]]:
        """The vocabulary and merges written as Hugging Face ``tokenizers.models.BPE`` expects them: each byte as
        GPT-2's printable character (:func:`bytes_to_unicode`), e.g. the space as ``Ġ``."""
        table = bytes_to_unicode()

        def spell(token: bytes) -> str:
            return "".join(table[b] for b in token)

        vocab = {spell(token): i for i, token in enumerate(self.vocab)}
        merges = [(spell(self.vocab[a]), spell(self.vocab[b])) for a, b in self.merges]
        return vocab, merges


def train_bpe(text: str, num_merges: int) -> BPETokenizer:
    """Learn ``num_merges`` merges on ``text``: each time, merge the most frequent adjacent pair everywhere.

    Ties go to the pair of smaller ids, so training is deterministic. Stops early when no pair is left.
    """
    if num_merges < 0:
        raise ValueError(f"num_merges={num_merges} must be >= 0: it is the number of new tokens to learn")
    pieces = Counter(pretokenize(text))
    words = [list(piece.encode("utf-8")) for piece in pieces]  # each distinct piece once, as byte ids
    counts = list(pieces.values())
    vocab = [bytes([b]) for b in range(256)]
    ids = {token: i for i, token in enumerate(vocab)}
    merges: list[tuple[int, int]] = []
    pairs = pair_counts(words, counts)
    holders: defaultdict[tuple[int, int], set[int]] = defaultdict(set)  # pair -> the words that contain it
    for i, word in enumerate(words):
        for pair in pairwise(word):
            holders[pair].add(i)
    for _ in range(num_merges):
        if not pairs:
            break
        pair = min(pairs, key=lambda p: (-pairs[p], p))  # the most frequent; ties: the smaller pair
        token = vocab[pair[0]] + vocab[pair[1]]
        if token not in ids:
            ids[token] = len(vocab)
            vocab.append(token)
        merges.append(pair)
        for i in holders.pop(pair):  # only the words holding the pair change: recount just their pairs
            before, words[i] = words[i], merge_pair(words[i], pair, ids[token])
            for p, n in Counter(pairwise(before)).items():
                pairs[p] -= n * counts[i]
                if pairs[p] == 0:
                    del pairs[p]
            for p, n in Counter(pairwise(words[i])).items():
                pairs[p] += n * counts[i]
                holders[p].add(i)
    return BPETokenizer(vocab, merges)


def bpe_merge_steps(text: str, num_merges: int) -> tuple[BPETokenizer, list[list[int]]]:
    """Train on ``text`` and replay the training on it: the tokenizer, and ``text``'s ids after 0, 1, …, ``k`` merges.

    ``k = len(tokenizer.merges)`` (fewer than ``num_merges`` when no pair is left). Step ``s`` holds ``text``'s ids
    once the first ``s`` merges are applied, each to every piece (``steps[0]`` are its UTF-8 bytes); it equals
    ``train_bpe(text, s).encode(text)``. Merge ``s`` replaced ``len(steps[s - 1]) - len(steps[s])`` occurrences.
    """
    tokenizer = train_bpe(text, num_merges)
    words = [list(piece.encode("utf-8")) for piece in pretokenize(text)]  # every piece, in order, as byte ids
    steps = [[i for word in words for i in word]]
    for pair in tokenizer.merges:
        new_id = tokenizer.merged_id(pair)
        words = [merge_pair(word, pair, new_id) for word in words]
        steps.append([i for word in words for i in word])
    return tokenizer, steps


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's table from the 256 bytes to 256 printable characters: printable Latin-1 bytes map to themselves, the
    others (control bytes, the space, …) to characters from U+0100 on, so that every token is a readable string."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(256) if b not in printable]
    return {**{b: chr(b) for b in printable}, **{b: chr(256 + n) for n, b in enumerate(others)}}
