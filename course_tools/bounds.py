"""`course.py bounds`: every trained-claim test (pytest marker ``trained``) on more seeds and on several CPU kernel
settings, then a table of each bound's margin per setting and seed (CONTRIBUTING.md, "Tests and tools").

Each setting runs ``pytest -m trained tests`` with its own empty model cache, ``$COURSE_BOUND_SEEDS`` and
``$COURSE_BOUNDS_FILE``; tests/bounds.py appends every bound to that file as a JSON line, which is tabulated here.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import BOUND_SEEDS_VARIABLE, BOUNDS_FILE_VARIABLE, MODEL_CACHE_VARIABLE, ROOT
from .last_bits import LAST_BITS_VARIABLE, with_last_bits_moved
from .testrun import HARDWARE_VARIABLES

# (name, what it is, its variables): this machine's own kernels and threads; PyTorch's portable kernels on one thread
# with every matrix product's last bits moved (the test command's second notebook setting); the AVX2 kernels on one
# thread (what many AMD and older Intel CPUs run).
SETTINGS = (
    ("native", "this machine's kernels and thread count", {}),
    ("portable", "portable kernels, one thread, last bits moved",
     {"ATEN_CPU_CAPABILITY": "default", "OMP_NUM_THREADS": "1", LAST_BITS_VARIABLE: "1"}),
    ("avx2", "AVX2 kernels, one thread", {"ATEN_CPU_CAPABILITY": "avx2", "OMP_NUM_THREADS": "1"}),
)
DEFAULT_SEEDS = "0,1,2,3,4"
DEFAULT_MARKDOWN = ROOT / "build" / "bounds.md"
WORKERS = 2
FAILED = "✘"
MISSING = "–"  # a cell whose bound was not reached: the test failed or stopped before it


def say(message: str) -> None:
    print(f"[course] {message}", flush=True)


def parse_seeds(text: str) -> tuple[int, ...]:
    """``"0,1,2"`` -> ``(0, 1, 2)``."""
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise ValueError(f"seeds {text!r} must be integers separated by commas, e.g. {DEFAULT_SEEDS}") from None


def setting_environment(variables: dict[str, str], **extra: str) -> dict[str, str]:
    """This process's environment without any variable that chooses CPU kernels or threads, plus ``variables``."""
    kept = {name: value for name, value in os.environ.items() if name not in HARDWARE_VARIABLES}
    environ = {**kept, **variables, **extra}
    return with_last_bits_moved(environ) if variables.get(LAST_BITS_VARIABLE) == "1" else environ


def capability_under(variables: dict[str, str]) -> str:
    """The CPU kernels torch runs with ``variables`` set: it falls back silently to others when the CPU lacks them."""
    probe = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    return subprocess.run([sys.executable, "-c", probe], env=setting_environment(variables), capture_output=True,
                          text=True, check=True).stdout.strip()


def available_settings(settings=SETTINGS) -> list[tuple[str, str, dict[str, str]]]:
    """The settings this CPU can run; each one it cannot is named, with the kernels torch would run instead."""
    kept = []
    for name, description, variables in settings:
        wanted = variables.get("ATEN_CPU_CAPABILITY")
        runs = capability_under(variables) if wanted else None
        if runs is not None and runs.lower() != wanted.lower():
            say(f"{name} ({description}): this CPU has no {wanted} kernels (torch would run {runs}): left out")
            continue
        kept.append((name, description, variables))
    return kept


def pytest_command(keyword: str | None) -> list[str]:
    command = [sys.executable, "-m", "pytest", "tests", "-m", "trained", "-q", "-rs", "-p", "no:cacheprovider",
               "-n", str(WORKERS), "--dist", "loadfile"]
    return command + (["-k", keyword] if keyword else [])


def read_records(path: Path) -> list[dict]:
    """The bounds a run appended to ``path``, one JSON object a line (none when nothing was recorded)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def run_setting(name: str, variables: dict[str, str], seeds: str, keyword: str | None,
                scratch: Path) -> tuple[int, list[dict]]:
    """Run the trained-claim tests in one setting, from an empty model cache; pytest's exit status and the bounds."""
    folder = scratch / name
    folder.mkdir()
    bounds_file = folder / "bounds.jsonl"
    env = setting_environment(variables, **{MODEL_CACHE_VARIABLE: str(folder / "model-cache"),
                                            BOUND_SEEDS_VARIABLE: seeds, BOUNDS_FILE_VARIABLE: str(bounds_file),
                                            "PYTHONHASHSEED": "0", "TRANSFORMER_LIB_DEVICE": "cpu"})
    code = subprocess.call(pytest_command(keyword), cwd=ROOT, env=env)
    return code, read_records(bounds_file)


def strip_seed(nodeid: str, seed: int | None) -> str:
    """``tests/test_x.py::test_y[3]`` -> ``test_x.py::test_y`` for seed 3: every seed's bound shares one row."""
    test, bracket, parameters = nodeid.removeprefix("tests/").partition("[")
    parts = parameters.removesuffix("]").split("-")
    if bracket and str(seed) in parts:
        parts.remove(str(seed))
    return test + (f"[{'-'.join(parts)}]" if bracket and parts else "")


def seed_label(seed: int | None) -> str:
    return "all" if seed is None else f"s{seed}"  # None: a bound over all the seeds at once


def margin_cell(margin: float) -> str:
    return f"{margin:.3g}" + ("" if margin >= 0 else f" {FAILED}")  # NaN fails too


def worst(margins: list[float]) -> float:
    return min(margins, key=lambda margin: -math.inf if math.isnan(margin) else margin)


def tabulate(records_by_setting: dict[str, list[dict]]) -> list[list[str]]:
    """The margins as rows of cells, the header first: one row per bound (test, name, limit), one column per
    (setting, seed), in the settings' order and the seeds', then the smallest margin; a failed bound is marked ✘."""
    columns = [(setting, seed) for setting, records in records_by_setting.items()
               for seed in sorted({r["seed"] for r in records}, key=lambda s: (s is None, s or 0))]
    rows: dict[tuple, dict[tuple, list[float]]] = {}
    for setting, records in records_by_setting.items():
        for r in records:
            key = (strip_seed(r["test"], r["seed"]), r["name"], f"{r['kind']} {r['limit']:g}")
            rows.setdefault(key, {}).setdefault((setting, r["seed"]), []).append(r["margin"])
    header = ["test", "bound", "limit", *(f"{setting} {seed_label(seed)}" for setting, seed in columns), "min margin"]
    body = []
    for key in sorted(rows, key=lambda key: key[0]):  # stable: a test's bounds stay in the order it asserts them
        cells = rows[key]
        body.append([*key, *(margin_cell(worst(cells[c])) if c in cells else MISSING for c in columns),
                     margin_cell(worst([m for margins in cells.values() for m in margins]))])
    return [header, *body]


def as_text(table: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
                     for row in table)


def as_markdown(table: list[list[str]]) -> str:
    def line(row: list[str]) -> str:
        return "| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |"

    return "\n".join([line(table[0]), line(["---"] * len(table[0])), *(line(row) for row in table[1:])])


def describe_settings(records_by_setting: dict[str, list[dict]]) -> list[str]:
    """One line per setting: the kernels and threads torch ran, as its tests recorded them."""
    lines = []
    for setting, records in records_by_setting.items():
        seen = records[0]["setting"] if records else None
        ran = f"{seen['capability']} kernels, {seen['threads']} thread(s)" if seen else "no bound recorded"
        lines.append(f"{setting}: {ran}")
    return lines


def write_markdown(path: Path, seeds: str, settings: list[str], table: list[list[str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    intro = [f"# Trained bounds: margins on seeds {seeds}", "", "Margin: how far each figure lies inside its bound, "
             f"in the bound's own units ({FAILED}: failed; {MISSING}: not reached).", "",
             *(f"- {line}" for line in settings), ""]
    path.write_text("\n".join([*intro, as_markdown(table), ""]))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="course.py bounds",
        description="Run every trained-claim test (marker `trained`) on several seeds in each CPU kernel setting "
                    "(native; portable kernels on one thread; AVX2 kernels on one thread) and print each bound's "
                    "margin per setting and seed. Exits 1 if any bound failed.")
    parser.add_argument("--seeds", default=DEFAULT_SEEDS, help=f"comma-separated seeds (default {DEFAULT_SEEDS})")
    parser.add_argument("-k", dest="keyword", metavar="EXPR", help="only the tests pytest's -k EXPR selects")
    parser.add_argument("--markdown", type=Path, default=DEFAULT_MARKDOWN, metavar="PATH",
                        help=f"write the table there too (default {DEFAULT_MARKDOWN.relative_to(ROOT)})")
    args = parser.parse_args(argv)
    try:
        seeds = ",".join(map(str, parse_seeds(args.seeds)))
    except ValueError as error:
        parser.error(str(error))

    settings = available_settings()
    records, codes = {}, {}
    with tempfile.TemporaryDirectory(prefix="course-bounds-") as scratch:
        for number, (name, description, variables) in enumerate(settings, 1):
            shown = " ".join(f"{k}={v}" for k, v in variables.items()) or "no variables"
            say(f"── setting {number}/{len(settings)}: {name}, {description} ({shown}); seeds {seeds}")
            started = time.perf_counter()
            codes[name], records[name] = run_setting(name, variables, seeds, args.keyword, Path(scratch))
            say(f"{name}: {len(records[name])} bounds recorded in {time.perf_counter() - started:.0f} s")
    return report(records, codes, seeds, args.markdown)


def report(records: dict[str, list[dict]], codes: dict[str, int], seeds: str, markdown: Path) -> int:
    """Print the table and write it to ``markdown``; 1 if a bound failed or a run failed otherwise."""
    table = tabulate(records)
    print("\n" + as_text(table) + "\n", flush=True)
    write_markdown(markdown, seeds, describe_settings(records), table)
    failed = sum(not r["passed"] for run in records.values() for r in run)
    say(f"{len(table) - 1} bounds, {failed} failed record(s) ({FAILED}); the table is also in {markdown}")
    broken = [name for name, code in codes.items() if code != 0]
    if broken:
        say(f"pytest failed in: {', '.join(broken)} (a failed bound, or an error before a bound: see above)")
    return 1 if failed or broken else 0
