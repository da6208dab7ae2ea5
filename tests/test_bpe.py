"""Byte-level BPE: training, encoding and decoding, proven against Hugging Face ``tokenizers`` given the same
vocabulary and merges, and a lossless round trip on random Unicode text."""

import random
from collections import Counter

import pytest
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

from transformer_lib.bpe import (
    SPLIT_PATTERN,
    BPETokenizer,
    bpe_merge_steps,
    bytes_to_unicode,
    merge_pair,
    pair_counts,
    pretokenize,
    train_bpe,
)
from transformer_lib.data import python_docs

DOCS = python_docs()  # Python's own documentation, the course's stored copy
TEXTS = [
    "",
    "Hello, world!",
    "The  quick brown fox\tjumps over 13 lazy dogs.\n\n",
    "def f(x):\n    return x ** 2  # squared\n",
    "café naïve Ærøskøbing, 東京, Привет мир, 🙂🚀 emoji",
    "   leading and trailing spaces   ",
    "numbers 3.14159 and 1,000,000 and 0xFF",
    "tabs\tand\r\nwindows line ends\x0bvertical tab\x0cform feed",
    "\u00a0no-break space\u3000ideographic space\u2028line separator",
]


@pytest.fixture(scope="module")
def tokenizer():
    return train_bpe(DOCS, 300)


def hf_tokenizer(bpe: BPETokenizer) -> Tokenizer:
    """Hugging Face's byte-level BPE, given our vocabulary, merges and split pattern."""
    vocab, merges = bpe.hf_vocab_and_merges()
    hf = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    hf.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    hf.decoder = decoders.ByteLevel()
    return hf


def random_unicode(rng: random.Random) -> str:
    """A random string: ASCII, whitespace and any code point but the surrogates (which are not text)."""
    def char() -> str:
        kind = rng.random()
        if kind < 0.4:
            return chr(rng.randrange(0x20, 0x7F))
        if kind < 0.5:
            return rng.choice(" \t\n\r\x0b\x0c\x85\xa0\u2028\u3000")
        code = rng.randrange(0x110000 - 0x800)
        return chr(code if code < 0xD800 else code + 0x800)  # skip U+D800 … U+DFFF
    return "".join(char() for _ in range(rng.randrange(60)))


def train_by_recounting(text: str, num_merges: int) -> list[tuple[int, int]]:
    """The textbook algorithm: count every pair again before each merge."""
    pieces = Counter(pretokenize(text))
    words, counts = [list(p.encode()) for p in pieces], list(pieces.values())
    vocab, merges = [bytes([b]) for b in range(256)], []
    for _ in range(num_merges):
        pairs = pair_counts(words, counts)
        pair = min(pairs, key=lambda p: (-pairs[p], p))
        token = vocab[pair[0]] + vocab[pair[1]]
        new_id = vocab.index(token) if token in vocab else len(vocab)
        if new_id == len(vocab):
            vocab.append(token)
        merges.append(pair)
        words = [merge_pair(w, pair, new_id) for w in words]
    return merges


def test_merge_pair_scans_left_to_right_without_overlaps():
    assert merge_pair([1, 1, 1], (1, 1), 9) == [9, 1]
    assert merge_pair([1, 1, 1, 1], (1, 1), 9) == [9, 9]
    assert merge_pair([5, 1, 2, 1, 2, 3], (1, 2), 7) == [5, 7, 7, 3]
    assert merge_pair([2, 1], (1, 2), 7) == [2, 1]


def test_the_pieces_cover_the_text_exactly():
    for text in [*TEXTS, DOCS[:5000]]:
        assert "".join(pretokenize(text)) == text
    assert pretokenize("Hello  world, 42!") == ["Hello", " ", " world", ",", " 42", "!"]


def test_incremental_training_learns_what_recounting_learns():
    text = DOCS[:20_000]
    assert train_bpe(text, 120).merges == train_by_recounting(text, 120)


def test_vocabulary_holds_distinct_tokens(tokenizer):
    assert len(tokenizer.merges) == 300
    assert len(set(tokenizer.vocab)) == len(tokenizer) <= 256 + 300
    assert tokenizer.vocab[:256] == [bytes([b]) for b in range(256)]


def test_training_stops_when_no_pair_is_left():
    assert train_bpe("aaaa", 10).merges == [(97, 97), (256, 256)]
    with pytest.raises(ValueError, match="num_merges"):
        train_bpe("text", -1)


def test_encoding_compresses_the_training_text(tokenizer):
    ids = tokenizer.encode(DOCS)
    assert len(ids) < 0.45 * len(DOCS.encode())


def test_hugging_face_tokenizers_gives_the_same_ids(tokenizer):
    hf = hf_tokenizer(tokenizer)
    for text in [*TEXTS, DOCS]:
        ids = tokenizer.encode(text)
        assert hf.encode(text).ids == ids, text[:60]
        assert hf.decode(ids) == text


def test_random_unicode_round_trips_and_matches_hugging_face(tokenizer):
    hf, rng = hf_tokenizer(tokenizer), random.Random(12)
    for _ in range(400):
        text = random_unicode(rng)
        ids = tokenizer.encode(text)
        assert tokenizer.decode(ids) == text
        assert hf.encode(text).ids == ids, repr(text)


def test_the_byte_table_is_gpt2s():
    table = bytes_to_unicode()
    assert sorted(table) == list(range(256))
    assert set(table.values()) == set(pre_tokenizers.ByteLevel.alphabet())
    assert table[ord(" ")] == "Ġ" and table[ord("\n")] == "Ċ" and table[ord("A")] == "A"


def test_decoding_a_cut_character_gives_the_replacement_character(tokenizer):
    assert tokenizer.decode([0xC3]) == "\ufffd"  # the first of the two bytes of "é"
    assert tokenizer.decode([0xC3, 0xA9]) == "é"


def test_merge_steps_replay_training_on_the_text():
    text = "low lower lowest newer newest wider widest, naïve 🙂"
    tokenizer, steps = bpe_merge_steps(text, 12)
    assert tokenizer.merges == train_bpe(text, 12).merges and len(steps) == 13
    assert steps[0] == list(text.encode("utf-8"))
    for k, ids in enumerate(steps):
        assert ids == train_bpe(text, k).encode(text)  # the ids after k merges are what k merges encode
        assert tokenizer.decode(ids) == text
    assert all(len(before) > len(after) for before, after in zip(steps, steps[1:], strict=False))


def test_merge_steps_stop_when_every_piece_is_one_token():
    tokenizer, steps = bpe_merge_steps("aaa bb", 10)
    assert [tokenizer.vocab[i] for i in steps[-1]] == [b"aaa", b" bb"]
    assert len(steps) == len(tokenizer.merges) + 1 < 11
