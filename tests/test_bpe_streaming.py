"""``BPETokenizer.encode_iterable``: the ids of ``encode`` on the whole text, however the text is cut into chunks
(pieces and special tokens that straddle a cut included), yielded lazily, with a peak memory that does not grow with
the input (tracemalloc, benchmarks/bpe_streaming.py's measurement, at small sizes here; the benchmark itself
streams files of tens of MiB)."""

import importlib.util
import io
import random
from itertools import cycle, islice
from pathlib import Path

import pytest

from transformer_lib import bpe
from transformer_lib.bpe import BPETokenizer, train_bpe
from transformer_lib.data import python_docs

DOCS = python_docs()
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
BENCHMARK = Path(__file__).resolve().parent.parent / "benchmarks" / "bpe_streaming.py"
# Texts whose pieces depend on what comes after a cut: a whitespace run going on, a contraction after its
# apostrophe, a special token cut in two, a special token that a longer one continues.
STRADDLING = [
    "a\n   b\n\n\n  c  \t\n",
    "x'll y're z's don't we'",
    "Hello<|endoftext|>World<|im_start|>user\nWhat's 2+2?<|im_end|>\n",
    "<|endoftext <|im_start| <|endoftext|><|endoftext|> \n<|im_end|>",
    "naïve café 😀 ²½ Ⅻ   東京  ",
]


@pytest.fixture(scope="module")
def tokenizer():
    return train_bpe(DOCS, 300, special_tokens=SPECIAL)


def load_benchmark():
    spec = importlib.util.spec_from_file_location("bpe_streaming", BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def random_cuts(text: str, rng: random.Random) -> list[str]:
    cuts = sorted(rng.sample(range(1, len(text)), k=min(len(text) - 1, rng.randrange(1, 12)))) if len(text) > 1 else []
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]


def test_streaming_a_files_lines_gives_the_ids_of_the_whole_text(tokenizer):
    assert list(tokenizer.encode_iterable(io.StringIO(DOCS))) == tokenizer.encode(DOCS)


def test_any_cut_gives_the_ids_of_the_whole_text(tokenizer):
    rng = random.Random(0)
    for text in STRADDLING:
        whole = tokenizer.encode(text)
        assert list(tokenizer.encode_iterable(text)) == whole  # one character at a time
        for _ in range(50):
            assert list(tokenizer.encode_iterable(random_cuts(text, rng))) == whole, text
    for start in range(0, 200_000, 20_000):
        text = DOCS[start:start + 2000]
        assert list(tokenizer.encode_iterable(random_cuts(text, rng))) == tokenizer.encode(text)


def test_special_tokens_that_continue_one_another_are_held_back_until_decided():
    bpe_ab = BPETokenizer([bytes([b]) for b in range(256)], [], ["<|a|>", "<|a|><|b|>"])
    for chunks in (["x<|a|>", "<|b|>y"], ["x<|a|>", "<|b", "|>"], ["x<|a|>", " y"], list("x<|a|><|b|>")):
        assert list(bpe_ab.encode_iterable(chunks)) == bpe_ab.encode("".join(chunks)), chunks


def test_encoding_each_chunk_alone_would_differ():
    # the control: the chunks' own ids differ from the whole text's, which encode_iterable gives
    small = train_bpe("it's what's that's\n    indented\n    lines " * 20, 40, special_tokens=SPECIAL)
    for chunks in (["x\n", "    indented"], ["it'", "s"], ["<|endof", "text|>"]):
        alone = [i for chunk in chunks for i in small.encode(chunk)]
        assert alone != small.encode("".join(chunks)) == list(small.encode_iterable(chunks)), chunks


def test_ids_come_out_before_the_input_ends(tokenizer):
    endless = cycle(DOCS.splitlines(keepends=True))  # never ends: only a lazy encoder gives its first ids
    assert list(islice(tokenizer.encode_iterable(endless), 5000)) == tokenizer.encode(DOCS[:20_000])[:5000]


def test_peak_memory_does_not_grow_with_the_input(tokenizer, monkeypatch):
    benchmark = load_benchmark()

    def peak(num_chars: int) -> int:  # a fresh tokenizer, its cache read now from bpe.PIECE_CACHE_SIZE
        fresh = BPETokenizer(tokenizer.vocab, tokenizer.merges, tokenizer.special_tokens)
        return benchmark.streaming_peak(fresh, benchmark.numbered_lines(num_chars))[1]

    monkeypatch.setattr(bpe, "PIECE_CACHE_SIZE", 300)  # full after a few thousand lines: the bound shows early
    small, large = peak(2**15), peak(2**17)  # 32 KiB and 128 KiB of text, about 650 and 2 600 new numbers
    assert large < 1.2 * small
    monkeypatch.setattr(bpe, "PIECE_CACHE_SIZE", None)  # the control: a cache without a bound keeps every piece
    small, large = peak(2**15), peak(2**17)
    assert large > 2 * small
