"""Streaming a file through the BPE tokenizer: peak memory (tracemalloc) at three file sizes, and the ids checked.

The file is Python's documentation (the course's copy), its lines repeated with each line's running number in front,
so that new pieces keep coming, as in a real corpus (every number is a piece never seen before). The tokenizer is
lesson 12's (300 merges learned on the documentation, GPT-2's special token). ``encode_iterable(open(path))`` holds
only the last few pieces of the text and a piece cache of bounded size (``PIECE_CACHE_SIZE``), so its peak memory
should not grow with the file; the ids of the smallest file are compared with ``encode`` of the whole text.

Last line: ``growth=<peak at the largest size / peak at the smallest> peak_mib=<at the largest> identical=<true|false>
mib=<sizes> device=cpu``. Run: ``python benchmarks/bpe_streaming.py`` (8, 16 and 32 MiB, a few minutes) or
``--quick`` (0.25, 0.5 and 1 MiB, with a cache of 1000 pieces, so that it fills at that size too).
"""

from __future__ import annotations

import argparse
import tempfile
import time
import tracemalloc
from collections.abc import Iterable, Iterator
from itertools import count
from pathlib import Path

from transformer_lib import bpe
from transformer_lib.data import python_docs

MIB = 2**20


def numbered_lines(num_chars: int) -> Iterator[str]:
    """The documentation's lines again and again, each with its running number in front, ``num_chars`` in all (the
    last line cut short). The documentation is read now, the lines made as they are asked for."""
    lines = python_docs().splitlines(keepends=True)

    def made() -> Iterator[str]:
        left = num_chars
        for n in count():
            line = f"{n} {lines[n % len(lines)]}"[:left]
            yield line
            left -= len(line)
            if not left:
                return

    return made()


def lesson_tokenizer() -> bpe.BPETokenizer:
    """Lesson 12's tokenizer, with a piece cache of ``bpe.PIECE_CACHE_SIZE`` pieces (read when it is made)."""
    return bpe.train_bpe(python_docs(), 300, special_tokens=["<|endoftext|>"])


def streaming_peak(tokenizer: bpe.BPETokenizer, chunks: Iterable[str]) -> tuple[int, int]:
    """How many ids ``encode_iterable(chunks)`` yields, and the peak of the memory Python allocated meanwhile."""
    tracemalloc.start()
    try:
        num_ids = sum(1 for _ in tokenizer.encode_iterable(chunks))
        return num_ids, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="0.25, 0.5 and 1 MiB, a cache of 1000 pieces")
    args = parser.parse_args()
    sizes = [0.25, 0.5, 1.0] if args.quick else [8.0, 16.0, 32.0]
    if args.quick:
        bpe.PIECE_CACHE_SIZE = 1000
    tokenizer = lesson_tokenizer()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "corpus.txt"
        peaks = []
        for size in sizes:
            path.write_text("".join(numbered_lines(int(size * MIB))), encoding="utf-8")
            fresh = bpe.BPETokenizer(tokenizer.vocab, tokenizer.merges, tokenizer.special_tokens)  # an empty cache
            start = time.perf_counter()
            with path.open(encoding="utf-8", newline="") as lines:  # newline="": the text exactly as written
                num_ids, peak = streaming_peak(fresh, lines)
            seconds = time.perf_counter() - start
            peaks.append(peak)
            print(f"{size:5.2f} MiB file, {num_ids:,} ids: peak {peak / MIB:.2f} MiB under tracemalloc, "
                  f"{seconds:.1f} s (tracemalloc slows Python down)")
    text = "".join(numbered_lines(int(sizes[0] * MIB)))
    identical = list(tokenizer.encode_iterable(text.splitlines(keepends=True))) == tokenizer.encode(text)
    print(f"growth={peaks[-1] / peaks[0]:.3f} peak_mib={peaks[-1] / MIB:.2f} identical={str(identical).lower()} "
          f"mib={','.join(f'{size:g}' for size in sizes)} cache={bpe.PIECE_CACHE_SIZE} device=cpu")


if __name__ == "__main__":
    main()
