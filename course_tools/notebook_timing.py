"""A pytest plugin that adds up the time nbval spends on each notebook and prints a table at the end."""

from __future__ import annotations

from collections import defaultdict

_seconds: defaultdict[str, float] = defaultdict(float)


def pytest_runtest_logreport(report) -> None:
    path = report.nodeid.split("::")[0]
    if path.endswith(".ipynb"):
        _seconds[path] += report.duration


def pytest_terminal_summary(terminalreporter) -> None:
    if not _seconds:
        return
    terminalreporter.section("time per notebook (kernel start and every cell)")
    for path, seconds in sorted(_seconds.items()):
        terminalreporter.write_line(f"{seconds:7.1f} s  {path}")
    terminalreporter.write_line(f"{sum(_seconds.values()):7.1f} s  in all")
