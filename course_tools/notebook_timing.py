"""A pytest plugin that adds up the time nbval spends on each notebook and prints a table at the end
(one column per hardware setting when the notebook step runs the matrix)."""

from __future__ import annotations

from collections import defaultdict

from .notebook_matrix import leg_of

_seconds: defaultdict[str, defaultdict[str, float]] = defaultdict(lambda: defaultdict(float))  # leg -> path -> s


def pytest_runtest_logreport(report) -> None:
    path = report.nodeid.split("::")[0]
    if path.endswith(".ipynb"):
        _seconds[leg_of(report)][path] += report.duration


def pytest_terminal_summary(terminalreporter) -> None:
    if not _seconds:
        return
    legs = sorted(_seconds)
    terminalreporter.section("time per notebook in seconds (kernel start and every cell)")
    for index, leg in enumerate(legs, start=1):
        terminalreporter.write_line(f"  [{index}] {leg or 'this machine'}")
    terminalreporter.write_line("".join(f"{f'[{i}]':>8}" for i in range(1, len(legs) + 1)) + "  notebook")
    paths = sorted({path for table in _seconds.values() for path in table})
    for path in paths:
        terminalreporter.write_line("".join(f"{_seconds[leg].get(path, 0.0):8.1f}" for leg in legs) + f"  {path}")
    terminalreporter.write_line("".join(f"{sum(_seconds[leg].values()):8.1f}" for leg in legs) + "  in all")
