"""Byte-level byte-pair encoding (BPE), the tokenizer family of GPT-2 and most of today's LLMs.

Text is first cut at its special tokens (``<|endoftext|>``, a chat template's markers), which become one id each and
are never split or merged. The rest is cut into pieces by GPT-2's pattern (English contractions, words with their
leading space, numbers, punctuation runs, whitespace); each piece becomes its UTF-8 bytes (so any text can be
encoded and nothing is ever unknown). Training repeatedly merges the most frequent adjacent pair of tokens into a new
token; encoding replays the learned merges, earliest first, inside each piece.

The vocabulary and merges export to Hugging Face ``tokenizers`` (GPT-2's byte-to-character table,
:func:`bytes_to_unicode`), which the tests use as an independent reference, and import from its ``tokenizer.json``,
GPT-2's own included.

Shape legend: ids are plain ``list[int]``; a "word" is the list of token ids of one piece of text.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import pairwise

import regex

SPLIT_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
"""How text is cut before BPE: GPT-2's pattern, character for character (``encoder.py`` of openai/gpt-2, and
Hugging Face's ``ByteLevel(use_regex=True)``). ``\\p{L}`` is a letter of any script, ``\\p{N}`` a number of any
script; Python's ``re`` has neither class, so the third-party ``regex`` module runs it, as GPT-2's own code does. A
word, a number or a run of other symbols takes one space before it; a whitespace run's last space stays with the
word after it. The pieces cover the text exactly, so joining them gives the text back.

``regex`` and Oniguruma (the engine inside ``tokenizers``) read ``\\p{L}`` from their own copies of the Unicode
tables, and ``regex``'s is newer: the two can cut a text apart differently only where it holds a character assigned
after the older table. The tests check every code point that Python's ``unicodedata`` counts as assigned."""

_SPLIT = regex.compile(SPLIT_PATTERN)
LOOKAHEAD = 3
"""How far past a piece's end (or, for the contractions, past its start) the pattern reads: at most 2 characters
(``'ll`` after its apostrophe); :meth:`BPETokenizer.encode_iterable` holds back one more, as a margin."""
PIECE_CACHE_SIZE = 2**14
"""Pieces whose ids a tokenizer remembers (the most recently used ones): encoding a frequent word costs one lookup,
and memory stays bounded however much text passes through."""


@lru_cache(maxsize=64)
def _special_splitter(special_tokens: tuple[str, ...]) -> re.Pattern[str]:
    """Splits a text at its special tokens, keeping them (a capturing group): the leftmost occurrence first and, of
    two that start at the same character, the longer (as Hugging Face's added tokens are matched)."""
    longest_first = sorted(special_tokens, key=len, reverse=True)
    return re.compile("(" + "|".join(re.escape(token) for token in longest_first) + ")")


def pretokenize(text: str, special_tokens: Sequence[str] = ()) -> list[str]:
    """Cut ``text`` into the pieces that BPE merges within (never across): each occurrence of a special token is one
    piece of its own, and the text between them is cut by :data:`SPLIT_PATTERN`."""
    if not special_tokens:
        return _SPLIT.findall(text)
    parts = _special_splitter(tuple(special_tokens)).split(text)  # text, special, text, special, ..., text
    return [piece for k, part in enumerate(parts) for piece in ([part] if k % 2 else _SPLIT.findall(part))]


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
    """A byte-level BPE: ``vocab[id]`` is a token's bytes, ``merges`` are the learned pairs of ids, in order, and
    ``special_tokens`` the texts that are always one token each, with the ids after the vocabulary's
    (``len(vocab)``, ``len(vocab) + 1``, …; GPT-2's ``<|endoftext|>`` is 50256 after its 50256 tokens).

    The vocabulary holds all 256 single bytes: :func:`train_bpe` gives them ids 0-255, GPT-2's files another order.
    A merge whose bytes already form a token reuses that token's id (as Hugging Face's trainer does), so the
    vocabulary can be smaller than 256 + ``len(merges)``.
    """

    vocab: list[bytes]
    merges: list[tuple[int, int]]
    special_tokens: list[str] = field(default_factory=list)
    _ranks: dict[tuple[int, int], int] = field(init=False, repr=False, compare=False)
    _ids: dict[bytes, int] = field(init=False, repr=False, compare=False)
    _special_ids: dict[str, int] = field(init=False, repr=False, compare=False)
    _byte_ids: list[int] = field(init=False, repr=False, compare=False)  # byte value -> its token's id
    _merge_piece: Callable[[str], tuple[int, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._ids = {token: i for i, token in enumerate(self.vocab)}
        missing = [b for b in range(256) if bytes([b]) not in self._ids]
        if len(self._ids) != len(self.vocab) or missing:
            raise ValueError(f"the vocabulary must hold distinct tokens and every single byte: {len(self.vocab)} "
                             f"tokens, {len(self._ids)} distinct, single bytes missing: {missing[:8]}")
        if "" in self.special_tokens or len(set(self.special_tokens)) != len(self.special_tokens):
            raise ValueError(f"special tokens must be distinct, non-empty texts: got {self.special_tokens}")
        self._ranks = {pair: rank for rank, pair in enumerate(self.merges)}
        self._special_ids = {token: len(self.vocab) + k for k, token in enumerate(self.special_tokens)}
        self._byte_ids = [self._ids[bytes([b])] for b in range(256)]
        self._merge_piece = lru_cache(maxsize=PIECE_CACHE_SIZE)(self._merge_piece_uncached)

    def __len__(self) -> int:
        return len(self.vocab) + len(self.special_tokens)

    def merged_id(self, pair: tuple[int, int]) -> int:
        """The id of the token that merging ``pair`` makes."""
        return self._ids[self.vocab[pair[0]] + self.vocab[pair[1]]]

    def _merge_piece_uncached(self, piece: str) -> tuple[int, ...]:
        ids = [self._byte_ids[b] for b in piece.encode("utf-8")]
        while len(ids) > 1:
            pair = min(pairwise(ids), key=lambda p: self._ranks.get(p, len(self._ranks)))
            if pair not in self._ranks:
                break
            ids = merge_pair(ids, pair, self.merged_id(pair))
        return tuple(ids)

    def encode_piece(self, piece: str) -> list[int]:
        """One piece's ids: start from its bytes, apply the earliest-learned merge present, until none applies."""
        return list(self._merge_piece(piece))

    def _piece_ids(self, piece: str) -> tuple[int, ...]:
        special = self._special_ids.get(piece)  # a piece equal to a special token's text can only be that token
        return (special,) if special is not None else self._merge_piece(piece)

    def encode(self, text: str) -> list[int]:
        """``text`` -> token ids (any Unicode text: every character is made of known bytes); each special token in
        the text becomes its one id."""
        return [i for piece in pretokenize(text, self.special_tokens) for i in self._piece_ids(piece)]

    def encode_iterable(self, chunks: Iterable[str]) -> Iterator[int]:
        """The ids of the text ``"".join(chunks)``, exactly ``encode``'s, yielded as the chunks arrive (a file's lines:
        ``encode_iterable(open(path))``): memory holds the last few pieces, not the text.

        A piece near the end of what has arrived may still change (a whitespace run may go on, ``'`` + ``ll`` may
        become the contraction ``'ll``, ``<|endof`` may become a special token), so the pieces that end within
        :data:`LOOKAHEAD` characters of the end, or of a possible special token's start, wait for the next chunk.
        """
        pending = ""
        for chunk in chunks:
            pending += chunk
            unsure = min(len(pending), self._special_prefix_start(pending)) - LOOKAHEAD
            done = 0  # characters of pending whose pieces are final
            for piece in pretokenize(pending, self.special_tokens):
                if done + len(piece) >= unsure:
                    break
                yield from self._piece_ids(piece)
                done += len(piece)
            pending = pending[done:]
        yield from self.encode(pending)

    def _special_prefix_start(self, text: str) -> int:
        """Where the earliest suffix of ``text`` that a special token continues starts (``len(text)`` if none)."""
        starts = [len(text) - k for token in self.special_tokens for k in range(1, len(token))
                  if text.endswith(token[:k])]
        return min(starts, default=len(text))

    def decode(self, ids: list[int]) -> str:
        """Token ids -> text; bytes that do not form valid UTF-8 (a cut-off sequence) become U+FFFD."""
        n = len(self.vocab)
        return b"".join(self.vocab[i] if i < n else self.special_tokens[i - n].encode("utf-8") for i in ids).decode(
            "utf-8", errors="replace")

    def hf_vocab_and_merges(self) -> tuple[dict[str, int], list[tuple[str, str]]]:
        """The vocabulary and merges written as Hugging Face ``tokenizers.models.BPE`` expects them: each byte as
        GPT-2's printable character (:func:`bytes_to_unicode`), e.g. the space as ``Ġ``. The special tokens are not
        in them: Hugging Face adds them with ``add_special_tokens``, after the vocabulary, as here."""
        table = bytes_to_unicode()

        def spell(token: bytes) -> str:
            return "".join(table[b] for b in token)

        vocab = {spell(token): i for i, token in enumerate(self.vocab)}
        merges = [(spell(self.vocab[a]), spell(self.vocab[b])) for a, b in self.merges]
        return vocab, merges

    @classmethod
    def from_hf_json(cls, text: str) -> BPETokenizer:
        """The tokenizer a Hugging Face ``tokenizer.json`` describes (GPT-2's own:
        ``BPETokenizer.from_hf_json(gpt2_tokenizer.backend_tokenizer.to_str())``): byte-level BPE after GPT-2's
        pattern, its added tokens as special tokens. Raises ``ValueError`` for a tokenizer that works otherwise."""
        spec = json.loads(text)
        model, pre = spec["model"], spec.get("pre_tokenizer") or {}
        unlike = [what for what, differs in [
            ("a model other than BPE", model.get("type") != "BPE"),
            ("a normalizer", spec.get("normalizer") is not None),
            ("a pre-tokenizer other than ByteLevel(add_prefix_space=False, use_regex=True)",
             pre.get("type") != "ByteLevel" or pre.get("add_prefix_space") or not pre.get("use_regex", True)),
            ("BPE dropout, a subword prefix, a word suffix or whole words looked up before merging",
             any(model.get(option) for option in ("dropout", "continuing_subword_prefix", "end_of_word_suffix",
                                                   "ignore_merges"))),
        ] if differs]
        if unlike:
            raise ValueError(f"this tokenizer.json is not GPT-2's kind of byte-level BPE: it has {'; '.join(unlike)}")
        added = sorted(spec.get("added_tokens", []), key=lambda token: token["id"])
        special = [token["content"] for token in added]
        regular = {token: i for token, i in model["vocab"].items() if token not in special}
        if sorted(regular.values()) != list(range(len(regular))) or [t["id"] for t in added] != list(
                range(len(regular), len(regular) + len(added))):
            raise ValueError("the vocabulary's ids must run 0, 1, 2, ... with the added tokens last, as GPT-2's do")
        byte_of = {char: byte for byte, char in bytes_to_unicode().items()}
        vocab = [bytes(byte_of[char] for char in token) for token in sorted(regular, key=regular.__getitem__)]
        pairs = [pair.split(" ") if isinstance(pair, str) else pair for pair in model["merges"]]  # "a b" or [a, b]
        return cls(vocab, [(regular[a], regular[b]) for a, b in pairs], special)


def train_bpe(text: str, num_merges: int, special_tokens: Sequence[str] = ()) -> BPETokenizer:
    """Learn ``num_merges`` merges on ``text``: each time, merge the most frequent adjacent pair everywhere.

    Ties go to the smaller pair of ids (compared as tuples: first ids, then second ids), so training is
    deterministic. Stops early when no pair is left. ``special_tokens`` are cut out of ``text`` and take no part in
    training; they get the ids after the learned ones.
    """
    if num_merges < 0:
        raise ValueError(f"num_merges={num_merges} must be >= 0: it is the number of new tokens to learn")
    pieces = Counter(piece for piece in pretokenize(text, special_tokens) if piece not in special_tokens)
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
    return BPETokenizer(vocab, merges, list(special_tokens))


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
