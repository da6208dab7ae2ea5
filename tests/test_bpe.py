"""Byte-level BPE: training, encoding and decoding, proven against Hugging Face ``tokenizers`` given the same
vocabulary, merges and special tokens (its GPT-2 pre-tokenizer, ``ByteLevel(use_regex=True)``); GPT-2's pattern
checked on every assigned code point; special tokens never split or merged; tokenizers read from a ``tokenizer.json``
(one trained by Hugging Face, and GPT-2's own where this machine's Hugging Face cache holds it); a lossless round
trip on random Unicode text. Streaming is in tests/test_bpe_streaming.py."""

import random
import unicodedata
from collections import Counter
from itertools import accumulate

import pytest
import transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

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
GERMAN = (
    "Die Straße führt über die Brücke zum Bahnhof. Größere Städte wie München, Köln und Düsseldorf haben „Übergänge“ "
    "für Fußgänger – das weiß jedes Kind. Hätt' ich's gewusst, wär's einfacher gewesen! Die "
    "Donaudampfschifffahrtsgesellschaftskapitänsmütze kostet 12,50 € (Stand: 3. Oktober 2026).\n"
)
UNICODE = (
    "Ελληνικά, русский, עברית, العربية ١٢٣, हिन्दी ४२, ไทย, 한국어, 日本語のテキスト, 中文。\n"
    "Emoji: 👩‍👩‍👧‍👦 🇩🇪 👍🏽; combining: e\u0301 n\u0303; fullwidth ＡＢＣ１２３; numbers ² ½ Ⅻ ٣; "
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢; spaces:\u00a0\u2003\u3000end\u2028line\x85next\x1c\x0b\x0c\r\n"
)
TEXTS = [
    "",
    "Hello, world!",
    "The  quick brown fox\tjumps over 13 lazy dogs.\n\n",
    "def f(x):\n    return x ** 2  # squared\n",
    "don't, isn't, I'm, you're, we've, they'll, she'd, it's; DON'T, O'Neil's 'quoted' '' 'll",
    "café naïve Ærøskøbing, 東京, Привет мир, 🙂🚀 emoji",
    "   leading and trailing spaces   ",
    "numbers 3.14159 and 1,000,000 and 0xFF",
    "tabs\tand\r\nwindows line ends\x0bvertical tab\x0cform feed",
    "\u00a0no-break space\u3000ideographic space\u2028line separator",
    GERMAN,
    UNICODE,
]
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]  # GPT-2's end of text; a chat template's markers
WITH_SPECIAL = [
    "<|endoftext|>",
    "Hello<|endoftext|>World",
    "one document.<|endoftext|>\n\nThe next one",
    "<|im_start|>user\nWhat's 2+2?<|im_end|>\n<|im_start|>assistant\nIt's 4.<|im_end|>\n",
    "<|endoftext|><|endoftext|> <|endoftext|>  \n<|endoftext|>",
    "almost: <|endoftext <|im_start| |endoftext|> <|EndOfText|> <<|im_end|>>",
]


@pytest.fixture(scope="module")
def tokenizer():
    return train_bpe(DOCS, 300, special_tokens=SPECIAL)


def hf_tokenizer(bpe: BPETokenizer) -> Tokenizer:
    """Hugging Face's byte-level BPE with GPT-2's pre-tokenizer, given our vocabulary, merges and special tokens."""
    vocab, merges = bpe.hf_vocab_and_merges()
    hf = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    hf.decoder = decoders.ByteLevel()
    hf.add_special_tokens(bpe.special_tokens)  # ids after the vocabulary's, in this order
    return hf


def hf_pieces_end(text: str) -> list[int]:
    """Where each piece of Hugging Face's GPT-2 pre-tokenizer ends, in characters of ``text``."""
    return [end for _, (_, end) in pre_tokenizers.ByteLevel(add_prefix_space=False).pre_tokenize_str(text)]


def assigned(code: int) -> bool:
    """A code point Python's ``unicodedata`` counts as assigned (not unassigned, not a surrogate half)."""
    return unicodedata.category(chr(code)) not in ("Cn", "Cs")


def random_unicode(rng: random.Random, specials: list[str] = ()) -> str:
    """A random string: ASCII, apostrophes, whitespace, any assigned code point and, if given, special tokens."""
    def char() -> str:
        kind = rng.random()
        if kind < 0.35:
            return chr(rng.randrange(0x20, 0x7F))
        if kind < 0.45:
            return rng.choice(" \t\n\r\x0b\x0c\x85\xa0\u2028\u3000'")
        if kind < 0.5 and specials:
            return rng.choice(specials)
        while not assigned(code := rng.randrange(0x110000)):
            pass
        return chr(code)
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


# -- GPT-2's pre-tokenizer -----------------------------------------------------------------------------------------


def test_the_pattern_is_gpt2s():
    # character for character the pattern of openai/gpt-2's src/encoder.py
    assert SPLIT_PATTERN == r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
    assert pretokenize("Hello  world, 42!") == ["Hello", " ", " world", ",", " 42", "!"]
    assert pretokenize("don't café naïve") == ["don", "'t", " café", " naïve"]
    assert pretokenize("They'll pay ²½ Ⅻ") == ["They", "'ll", " pay", " ²½", " Ⅻ"]  # \p{N}: any script's numbers
    assert pretokenize("DON'T") == ["DON", "'", "T"]  # GPT-2's contractions are lower case only


def test_the_pieces_cover_the_text_exactly():
    for text in [*TEXTS, *WITH_SPECIAL, DOCS[:5000]]:
        assert "".join(pretokenize(text)) == text
        assert "".join(pretokenize(text, SPECIAL)) == text


def test_hugging_faces_gpt2_pre_tokenizer_cuts_like_ours_on_every_assigned_code_point():
    # each character between a letter, a digit, a symbol and a space: the piece it joins tells its class
    chars = [chr(c) for c in range(0x110000) if assigned(c) and (c < 0x10000 or unicodedata.category(chr(c)) != "Co")]
    text = "".join(f"a{c}1{c}!{c} " for c in chars)
    assert list(accumulate(map(len, pretokenize(text)))) == hf_pieces_end(text)
    for text in [*TEXTS, DOCS]:
        assert list(accumulate(map(len, pretokenize(text)))) == hf_pieces_end(text), text[:60]


# -- training --------------------------------------------------------------------------------------------------------


def test_merge_pair_scans_left_to_right_without_overlaps():
    assert merge_pair([1, 1, 1], (1, 1), 9) == [9, 1]
    assert merge_pair([1, 1, 1, 1], (1, 1), 9) == [9, 9]
    assert merge_pair([5, 1, 2, 1, 2, 3], (1, 2), 7) == [5, 7, 7, 3]
    assert merge_pair([2, 1], (1, 2), 7) == [2, 1]


def test_incremental_training_learns_what_recounting_learns():
    text = DOCS[:20_000]
    assert train_bpe(text, 120).merges == train_by_recounting(text, 120)


def test_ties_go_to_the_smaller_pair_of_ids():
    # "zyxw": three pairs, once each; the smallest, (x, w), is the last in the text, not the first
    assert train_bpe("zyxw", 1).merges == [(ord("x"), ord("w"))]
    assert train_bpe("acab", 1).merges == [(ord("a"), ord("b"))]  # equal first ids: the smaller second id
    assert train_bpe("zyzy ab", 1).merges == [(ord("z"), ord("y"))]  # but a more frequent pair beats any tie


def test_vocabulary_holds_distinct_tokens(tokenizer):
    assert len(tokenizer.merges) == 300
    assert len(set(tokenizer.vocab)) == len(tokenizer.vocab) <= 256 + 300
    assert len(tokenizer) == len(tokenizer.vocab) + len(SPECIAL)
    assert tokenizer.vocab[:256] == [bytes([b]) for b in range(256)]


def test_training_stops_when_no_pair_is_left():
    assert train_bpe("aaaa", 10).merges == [(97, 97), (256, 256)]
    with pytest.raises(ValueError, match="num_merges"):
        train_bpe("text", -1)


def test_special_tokens_take_no_part_in_training():
    text = "ab<|endoftext|>ab<|endoftext|>ab"
    trained = train_bpe(text, 50, special_tokens=["<|endoftext|>"])
    assert trained.merges == train_bpe("ab ab ab".replace(" ", "\n"), 50).merges[:1] == [(97, 98)]
    assert len(trained.merges) == 1 and trained.encode(text) == [256, 257, 256, 257, 256]
    assert train_bpe(text, 50).merges != trained.merges  # without them, "<|" and "|>" would be merged


def test_encoding_compresses_the_training_text(tokenizer):
    ids = tokenizer.encode(DOCS)
    assert len(ids) < 0.45 * len(DOCS.encode())


# -- special tokens --------------------------------------------------------------------------------------------------


def test_special_tokens_are_one_id_each_never_split_or_merged(tokenizer):
    end, start, stop = (tokenizer.special_tokens.index(t) + len(tokenizer.vocab) for t in SPECIAL)
    assert tokenizer.encode("<|endoftext|>") == [end]
    ids = tokenizer.encode("Hello<|endoftext|>World")
    assert ids == [*tokenizer.encode("Hello"), end, *tokenizer.encode("World")]
    assert tokenizer.encode("<|im_start|>user") == [start, *tokenizer.encode("user")]
    assert tokenizer.encode("x<|im_end|>") == [*tokenizer.encode("x"), stop]
    assert end not in train_bpe(DOCS[:5000], 30).encode("<|endoftext|>")  # a tokenizer without it spells it out
    for text in WITH_SPECIAL:
        assert tokenizer.decode(tokenizer.encode(text)) == text


def test_of_two_special_tokens_the_leftmost_then_the_longest_wins():
    for specials, text in [(["<|a|>", "<|a|><|b|>"], "x<|a|><|b|>y<|a|>"), (["ab", "bc"], "abc bcab"),
                           (["bc", "abcd"], "abcd abc")]:
        bpe = BPETokenizer([bytes([b]) for b in range(256)], [], specials)
        assert bpe.encode(text) == hf_tokenizer(bpe).encode(text).ids, (specials, text)
    bpe = BPETokenizer([bytes([b]) for b in range(256)], [], ["<|a|>", "<|a|><|b|>"])
    assert bpe.encode("<|a|><|b|>") == [257]


def test_bad_vocabularies_and_special_tokens_are_refused():
    with pytest.raises(ValueError, match="every single byte"):
        BPETokenizer([bytes([b]) for b in range(255)], [])
    with pytest.raises(ValueError, match="distinct"):
        BPETokenizer([bytes([b]) for b in range(256)], [], ["<|x|>", "<|x|>"])
    with pytest.raises(ValueError, match="non-empty"):
        BPETokenizer([bytes([b]) for b in range(256)], [], [""])


# -- the reference: Hugging Face's tokenizers ------------------------------------------------------------------------


def test_hugging_face_tokenizers_gives_the_same_ids(tokenizer):
    hf = hf_tokenizer(tokenizer)
    assert [hf.token_to_id(t) for t in SPECIAL] == [len(tokenizer.vocab) + k for k in range(len(SPECIAL))]
    for text in [*TEXTS, *WITH_SPECIAL, DOCS]:
        ids = tokenizer.encode(text)
        assert hf.encode(text).ids == ids, text[:60]
        assert hf.decode(ids, skip_special_tokens=False) == tokenizer.decode(ids) == text


def test_random_unicode_round_trips_and_matches_hugging_face(tokenizer):
    hf, rng = hf_tokenizer(tokenizer), random.Random(12)
    for _ in range(400):
        text = random_unicode(rng, SPECIAL)
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


# -- tokenizers read from a tokenizer.json ---------------------------------------------------------------------------


def test_a_tokenizer_json_of_ours_reads_back_as_the_same_tokenizer(tokenizer):
    assert BPETokenizer.from_hf_json(hf_tokenizer(tokenizer).to_str()) == tokenizer


def test_a_tokenizer_trained_by_hugging_face_encodes_alike():
    # Hugging Face's own trainer: other merges, and the single bytes in another order than ids 0-255
    hf = Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    hf.train_from_iterator([DOCS[:100_000]], trainers.BpeTrainer(
        vocab_size=600, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    hf.add_special_tokens(SPECIAL)
    ours = BPETokenizer.from_hf_json(hf.to_str())
    assert ours.vocab[:256] != [bytes([b]) for b in range(256)] and len(ours) == hf.get_vocab_size() == 603
    for text in [*TEXTS, *WITH_SPECIAL, DOCS[:50_000]]:
        assert ours.encode(text) == hf.encode(text).ids, text[:60]
        assert ours.decode(ours.encode(text)) == text


def test_a_tokenizer_json_of_another_kind_is_refused(tokenizer):
    hf = hf_tokenizer(tokenizer)
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    with pytest.raises(ValueError, match="add_prefix_space=False"):
        BPETokenizer.from_hf_json(hf.to_str())


def gpt2_tokenizer_or_skip():
    """GPT-2's tokenizer from this machine's Hugging Face cache, never downloaded (lesson 12's DOWNLOAD fetches it)."""
    try:
        gpt2 = transformers.AutoTokenizer.from_pretrained("openai-community/gpt2", local_files_only=True)
    except OSError:
        pytest.skip("GPT-2's tokenizer is not in this machine's Hugging Face cache (lesson 12: DOWNLOAD = True)")
    if len(gpt2) != 50257:
        pytest.skip("only GPT-2's model is in this machine's Hugging Face cache, not its tokenizer")
    return gpt2


def test_gpt2s_own_vocabulary_gives_gpt2s_ids():
    gpt2 = gpt2_tokenizer_or_skip()
    ours = BPETokenizer.from_hf_json(gpt2.backend_tokenizer.to_str())
    assert len(ours) == 50257 and len(ours.merges) == 50000 and ours.special_tokens == ["<|endoftext|>"]
    for text in [*TEXTS, *WITH_SPECIAL[:3], DOCS]:
        assert ours.encode(text) == gpt2.encode(text), text[:60]
    assert ours.encode("<|endoftext|>") == [50256]


# -- the lesson's replay of training ---------------------------------------------------------------------------------


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
