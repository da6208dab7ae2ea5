"""Every exercise check names at least three classic mistakes of its topic, each with a stable id, and a test shows
each one recognised as itself: `assert_diagnosed(check.x(wrong), "<id>")` in tests/test_checks_exNN.py.

The ids are what the grader's class report counts (README, "Which mistakes the class made"), so a check's mistakes are
read from its source: every `Hint(..., id="...")` its body uses, directly or through a module-level constant.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHECKS = sorted((ROOT / "transformer_lib" / "checks").glob("ex[0-9][0-9]_*.py"))
ID = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
MIN_MISTAKES = 3


def hint_ids(node: ast.AST) -> list[str]:
    """The ids of the ``Hint(..., id="...")`` calls under ``node``."""
    return [keyword.value.value for call in ast.walk(node) if isinstance(call, ast.Call)
            and getattr(call.func, "id", None) == "Hint" for keyword in call.keywords
            if keyword.arg == "id" and isinstance(keyword.value, ast.Constant)]


def plain_text_mistakes(path: Path) -> list[int]:
    """Lines where a ``mistakes={...}`` key is bare text, not a ``Hint`` with an id."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [key.lineno for keyword in ast.walk(tree) if isinstance(keyword, ast.keyword)
            and keyword.arg == "mistakes" and isinstance(keyword.value, ast.Dict) for key in keyword.value.keys
            if isinstance(key, ast.Constant | ast.JoinedStr)]


def catalogue(path: Path) -> dict[str, set[str]]:
    """Each public check function of a module -> the mistake ids it can diagnose."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    constants = {target.id: set(hint_ids(node.value)) for node in tree.body if isinstance(node, ast.Assign)
                 for target in node.targets if isinstance(target, ast.Name)}
    helpers = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name[0] == "_"}
    found = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            ids = set(hint_ids(node))
            for name in {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}:
                ids |= constants.get(name, set())
                ids |= set(hint_ids(helpers[name])) if name in helpers else set()
            found[node.name] = ids
    return found


def diagnosed_in_tests(path: Path) -> set[str]:
    """The ids that ``assert_diagnosed(..., "<id>")`` calls assert in the check's test file."""
    test = ROOT / "tests" / f"test_checks_{path.stem.split('_')[0]}.py"
    tree = ast.parse(test.read_text(encoding="utf-8")) if test.exists() else ast.Module(body=[], type_ignores=[])
    return {call.args[1].value for call in ast.walk(tree) if isinstance(call, ast.Call)
            and getattr(call.func, "id", None) == "assert_diagnosed" and len(call.args) == 2
            and isinstance(call.args[1], ast.Constant)}


@pytest.mark.parametrize("path", CHECKS, ids=lambda p: p.stem)
def test_every_check_names_three_mistakes_each_with_a_plain_id(path):
    found = catalogue(path)
    assert found, f"{path.name} defines no check"
    few = {check: sorted(ids) for check, ids in found.items() if len(ids) < MIN_MISTAKES}
    assert not few, f"checks naming fewer than {MIN_MISTAKES} mistakes (Hint(..., id=...)): {few}"
    bad = sorted(i for ids in found.values() for i in ids if not ID.fullmatch(i))
    assert not bad, f"ids must be lower-case words joined by '-': {bad}"
    assert not plain_text_mistakes(path), f"{path.name}: mistakes named by bare text, give each a Hint with an id, " \
                                          f"lines {plain_text_mistakes(path)}"


@pytest.mark.parametrize("path", CHECKS, ids=lambda p: p.stem)
def test_every_mistake_is_shown_recognised_as_itself(path):
    named = set().union(*catalogue(path).values())
    untested = sorted(named - diagnosed_in_tests(path))
    assert not untested, f"no assert_diagnosed(..., id) in tests/test_checks_{path.stem[:4]}.py for: {untested}"


def test_the_catalogue_reads_hints_used_directly_through_constants_and_helpers(tmp_path):
    module = tmp_path / "ex99_demo.py"
    module.write_text(
        "SHARED = Hint('a', id='shared-one')\n"
        "def _helper(ex):\n    ex.compare('x', 1, 2, mistakes={Hint('b', id='from-helper'): 3})\n"
        "def demo(fn):\n    _helper(ex)\n    ex.compare('y', 1, 2, mistakes={SHARED: 0, Hint('c', id='direct'): 5})\n"
        "def other(fn):\n    ex.require('z', False, hint='plain text')\n", encoding="utf-8")
    assert catalogue(module) == {"demo": {"shared-one", "from-helper", "direct"}, "other": set()}
