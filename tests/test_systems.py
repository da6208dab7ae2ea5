"""Every branch of course.py and course_tools that depends on the system, taken here by simulating that system.

CI runs the test command on Linux (x86-64, ARM64), macOS and Windows; these tests take each system's branch on any
machine (os.name, sys.platform, platform.system, a missing os.geteuid, no bubblewrap, no browser, a folder with a
space in its name), so a wrong path or message fails here before it fails a learner there.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import types
from pathlib import Path, PurePosixPath

import pytest

import grading_cases
from course_tools import ROOT, browser, screenshots, system_packages
from course_tools.grading import cli, isolation, kernel, limits, scoring
from course_tools.grading.isolation import Isolation
from course_tools.grading.limits import Limits

COURSE_PY = ROOT / "course.py"
WORKFLOW = ROOT / ".github" / "workflows" / "test.yml"


@pytest.fixture
def course() -> types.ModuleType:
    sys.path.insert(0, str(ROOT))
    try:
        import course
    finally:
        sys.path.remove(str(ROOT))
    return course


@pytest.fixture
def on_system(monkeypatch):
    """Make platform.system() say ``name`` (and forget the sandbox found for the real system, before and after)."""
    isolation.find_isolation.cache_clear()

    def simulate(name: str) -> None:
        monkeypatch.setattr(isolation.platform, "system", lambda: name)

    yield simulate
    monkeypatch.undo()
    isolation.find_isolation.cache_clear()


# -- course.py: the environment's interpreter, root, exec, PYTHONPATH -------------------------------------------


def test_the_environment_interpreter_on_windows_and_elsewhere(course, monkeypatch):
    venv = PurePosixPath("course", ".venv")  # a pure path: no system calls, whatever os.name says
    with monkeypatch.context() as m:
        m.setattr(course.os, "name", "nt")
        windows = course.venv_python(venv)
    with monkeypatch.context() as m:
        m.setattr(course.os, "name", "posix")
        posix = course.venv_python(venv)
    assert windows.parts[-3:] == (".venv", "Scripts", "python.exe")
    assert posix.parts[-3:] == (".venv", "bin", "python")


def test_root_is_asked_only_where_the_system_has_it(course, monkeypatch):
    monkeypatch.delattr(os, "geteuid", raising=False)  # Windows
    assert course.running_as_root() is False
    monkeypatch.setattr(os, "geteuid", lambda: 0, raising=False)
    assert course.running_as_root() is True
    monkeypatch.setattr(os, "geteuid", lambda: 1000, raising=False)
    assert course.running_as_root() is False


class Exec(Exception):
    """os.execv never returns: the fake raises this instead."""


@pytest.mark.parametrize("system", ["posix", "nt"])
def test_lab_becomes_jupyterlab_on_posix_and_waits_for_it_on_windows(course, monkeypatch, system):
    calls = []

    def execv(path, args):
        calls.append(("execv", path, args))
        raise Exec

    monkeypatch.setattr(course, "running_as_root", lambda: False)
    monkeypatch.setattr(course, "run", lambda command, **kw: calls.append(("run", command, kw)) or 0)
    python = Path("python")  # made before os.name changes: pathlib picks its class by os.name
    with monkeypatch.context() as m:
        m.setattr(course.os, "name", system)
        m.setattr(course.os, "execv", execv, raising=False)
        m.setattr(course.os, "chdir", lambda path: calls.append(("chdir", path)))
        try:
            code = course.command_lab(python, ["--no-browser"])
        except Exec:
            code = None
    command = course.lab_command(python, ["--no-browser"], as_root=False)
    if system == "posix":
        assert calls == [("chdir", course.ROOT), ("execv", command[0], command)]
    else:
        assert calls == [("run", command, {})] and code == 0


def test_lab_serves_a_course_folder_with_a_space(course, monkeypatch, tmp_path):
    from jupyter_server.serverapp import ServerApp

    root = tmp_path / "my courses" / "transformer course"
    root.mkdir(parents=True)
    monkeypatch.setattr(course, "ROOT", root)
    command = course.lab_command(Path(root / ".venv" / "bin" / "python"), [], as_root=False)
    assert command[0] == str(root / ".venv" / "bin" / "python")  # one argument each: no shell splits them
    root_dir = next(arg for arg in command if arg.startswith("--ServerApp.root_dir="))
    app = ServerApp()
    app.parse_command_line([root_dir])
    assert app.root_dir == str(root)


@pytest.mark.parametrize("separator, existing", [(":", "/opt/extra"), (";", r"C:\extra"), (":", None)])
def test_pythonpath_puts_the_course_first_with_the_systems_separator(course, monkeypatch, separator, existing):
    ran = []
    monkeypatch.setattr(course, "choose_python", lambda use_current, command: Path("python"))
    monkeypatch.setattr(course, "run", lambda command, cwd, env: ran.append((command, cwd, env)) or 0)
    if existing is None:
        monkeypatch.delenv("PYTHONPATH", raising=False)
    else:
        monkeypatch.setenv("PYTHONPATH", existing)
    with monkeypatch.context() as m:
        m.setattr(course.os, "pathsep", separator)
        assert course.main(["exercises", "--force"]) == 0
    (command, cwd, env), = ran
    assert command == [Path("python"), "-m", "course_tools", "exercises", "--force"] and cwd == Path.cwd()
    assert env["PYTHONPATH"] == (f"{course.ROOT}{separator}{existing}" if existing else str(course.ROOT))
    assert env["PYTHONUTF8"] == "1"  # README and notebooks read as UTF-8 on Windows too


def copy_course_front(target: Path) -> Path:
    """course.py, pyproject.toml and course_tools/ copied into ``target``: enough for `course.py test --only lint`."""
    target.mkdir(parents=True)
    for name in ("course.py", "pyproject.toml"):
        shutil.copy2(ROOT / name, target / name)
    shutil.copytree(ROOT / "course_tools", target / "course_tools", ignore=shutil.ignore_patterns("__pycache__"))
    return target


def test_course_py_works_from_a_folder_with_a_space(tmp_path):
    copy = copy_course_front(tmp_path / "my courses" / "transformer course")
    (copy / "bad lint.py").write_text("import os\n")  # ruff's F401: found only if the copy is the one linted
    shown = subprocess.run([sys.executable, str(copy / "course.py"), "--help"], capture_output=True, text=True)
    assert shown.returncode == 0 and "lab" in shown.stdout
    env = {key: value for key, value in os.environ.items() if key not in ("CI", "PYTHONPATH")}
    # From another folder, as a learner would: course.py finds its root, course_tools comes from PYTHONPATH.
    linted = subprocess.run([sys.executable, str(copy / "course.py"), "--use-current-python", "test", "--only", "lint"],
                            cwd=tmp_path, env=env, capture_output=True, encoding="utf-8", errors="replace",
                            timeout=300)
    output = linted.stdout + linted.stderr
    assert linted.returncode == 1, output
    assert "bad lint.py" in output and "F401" in output and "failed: lint" in output


# -- system packages: which can exist here, what a missing one means ---------------------------------------------


@pytest.mark.parametrize("system, name", [("Darwin", "macOS"), ("Windows", "Windows"), ("Linux", "Linux")])
def test_bubblewrap_cannot_exist_off_linux_and_says_so(on_system, system, name):
    on_system(system)
    assert system_packages.system_name() == name
    reason = system_packages.impossible_here("bubblewrap")
    if system == "Linux":
        assert reason is None
    else:
        assert reason == f"the grading sandbox needs Linux (bubblewrap); this is {name}"
    assert system_packages.impossible_here("chromium") is None  # Chrome exists for every system


def test_only_packages_that_can_exist_count_as_missing(on_system, monkeypatch):
    monkeypatch.setitem(system_packages.PACKAGES, "chromium", lambda: None)
    monkeypatch.setitem(system_packages.PACKAGES, "bubblewrap", lambda: None)
    on_system("Darwin")
    assert system_packages.missing_packages() == ["chromium"]
    on_system("Linux")
    assert system_packages.missing_packages() == ["chromium", "bubblewrap"]


def test_nothing_is_installed_where_there_is_no_geteuid(monkeypatch):
    ran = []
    monkeypatch.setenv("CI", "true")
    monkeypatch.setattr(system_packages, "missing_packages", lambda: ["chromium"])
    monkeypatch.delattr(os, "geteuid", raising=False)  # Windows
    monkeypatch.setattr(system_packages.subprocess, "run", lambda *a, **kw: ran.append(a))
    system_packages.install_missing_on_ci()
    assert ran == []


def test_on_macos_ci_as_root_a_missing_bubblewrap_is_no_failure(on_system, monkeypatch, capsys):
    on_system("Darwin")
    monkeypatch.setenv("CI", "true")
    monkeypatch.setattr(os, "geteuid", lambda: 0, raising=False)
    monkeypatch.setitem(system_packages.PACKAGES, "chromium", lambda: "/Applications/Chromium.app")
    monkeypatch.setitem(system_packages.PACKAGES, "bubblewrap", lambda: None)
    system_packages.install_missing_on_ci()
    assert "will fail" not in capsys.readouterr().out


@pytest.mark.parametrize("system, ci, outcome", [
    ("Darwin", "true", "skip: the grading sandbox needs Linux (bubblewrap); this is macOS"),
    ("Windows", "true", "skip: the grading sandbox needs Linux (bubblewrap); this is Windows"),
    ("Linux", "true", "fail: no working bubblewrap sandbox on this machine (`apt-get install bubblewrap`): "
                      "`course.py test` installs it on CI as root; it did not"),
    ("Linux", "", "skip: no working bubblewrap sandbox on this machine (`apt-get install bubblewrap`)"),
])
def test_the_sandbox_tests_skip_where_it_cannot_exist_and_fail_on_linux_ci(on_system, monkeypatch, system, ci,
                                                                            outcome):
    on_system(system)
    monkeypatch.setenv("CI", ci)
    monkeypatch.setattr(grading_cases, "find_isolation", lambda: None)
    with pytest.raises((pytest.skip.Exception, pytest.fail.Exception)) as stopped:
        grading_cases.sandbox_or_skip()
    kind = "skip" if stopped.type is pytest.skip.Exception else "fail"
    assert f"{kind}: {stopped.value.msg}" == outcome


# -- the browser: where each system keeps Chrome ----------------------------------------------------------------


@pytest.fixture
def no_browser_on_path(monkeypatch):
    """No COURSE_CHROMIUM, nothing on PATH; returns the set of files that "exist" (add to it), and what was asked."""
    existing: set[str] = set()
    asked: list[str] = []

    def isfile(path):
        asked.append(path)
        return path in existing

    monkeypatch.delenv(browser.BROWSER_ENV_VAR, raising=False)
    monkeypatch.setattr(browser.shutil, "which", lambda name: None)
    monkeypatch.setattr(browser.os.path, "isfile", isfile)
    for name in browser.WINDOWS_FOLDERS:
        monkeypatch.delenv(name, raising=False)
    return existing, asked


def test_chrome_is_found_where_macos_installs_it(no_browser_on_path, on_system):
    existing, asked = no_browser_on_path
    on_system("Darwin")
    assert browser.find_chromium() is None
    assert "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome" in asked
    existing.add("/Applications/Google Chrome.app/Contents/MacOS/Google Chrome")
    assert browser.find_chromium() == "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome"


def test_chrome_or_edge_is_found_where_windows_installs_them(no_browser_on_path, on_system, monkeypatch):
    existing, _ = no_browser_on_path
    on_system("Windows")
    monkeypatch.setenv("PROGRAMFILES", r"C:\Program Files")
    monkeypatch.setenv("PROGRAMFILES(X86)", r"C:\Program Files (x86)")
    monkeypatch.setenv("LOCALAPPDATA", r"C:\Users\Ada Lovelace\AppData\Local")
    existing.add(r"C:\Program Files (x86)\Microsoft\Edge\Application\msedge.exe")
    assert browser.find_chromium() == r"C:\Program Files (x86)\Microsoft\Edge\Application\msedge.exe"
    existing.add(r"C:\Users\Ada Lovelace\AppData\Local\Google\Chrome\Application\chrome.exe")
    assert browser.find_chromium() == r"C:\Users\Ada Lovelace\AppData\Local\Google\Chrome\Application\chrome.exe"
    existing.add(r"C:\Program Files\Google\Chrome\Application\chrome.exe")
    assert browser.find_chromium() == r"C:\Program Files\Google\Chrome\Application\chrome.exe"


def test_linux_looks_on_path_only_and_the_variable_beats_everything(no_browser_on_path, on_system, monkeypatch):
    existing, asked = no_browser_on_path
    on_system("Linux")
    assert browser.find_chromium() is None and asked == []
    on_system("Darwin")
    existing.add("/Applications/Google Chrome.app/Contents/MacOS/Google Chrome")
    existing.add("/opt/my chrome/chrome")
    monkeypatch.setenv(browser.BROWSER_ENV_VAR, "/opt/my chrome/chrome")
    assert browser.find_chromium() == "/opt/my chrome/chrome"


@pytest.mark.parametrize("system, hint", [("Linux", "install Debian's `chromium` or Google Chrome"),
                                          ("Darwin", "install Google Chrome"), ("Windows", "install Google Chrome")])
def test_the_missing_browser_hint_fits_the_system(on_system, system, hint):
    on_system(system)
    assert browser.install_hint() == f"{hint}, or set COURSE_CHROMIUM=/path/to/chrome"


def test_screenshots_without_a_browser_say_what_to_install(on_system, monkeypatch, capsys):
    on_system("Darwin")
    monkeypatch.setattr(screenshots, "find_chromium", lambda: None)
    assert screenshots.main([]) == 2
    assert capsys.readouterr().err == ("[course] no Chromium found: install Google Chrome, or set "
                                       "COURSE_CHROMIUM=/path/to/chrome\n")


# -- grading: the sandbox, the refusal, interrupts, limits, the working folder -----------------------------------


def test_no_sandbox_is_tried_off_linux_even_with_bwrap_on_path(on_system, monkeypatch):
    on_system("Darwin")
    monkeypatch.setattr(isolation.shutil, "which", lambda name: "/opt/homebrew/bin/bwrap")
    monkeypatch.setattr(isolation.subprocess, "run", lambda *a, **kw: pytest.fail("probed a sandbox on macOS"))
    assert isolation.find_isolation() is None


@pytest.mark.parametrize("system, name", [("Darwin", "macOS"), ("Windows", "Windows")])
def test_grading_off_linux_refuses_naming_the_system(on_system, tmp_path, capsys, system, name):
    on_system(system)
    submission = tmp_path / "alice" / "01_similarity_exercises.ipynb"
    submission.parent.mkdir()
    submission.write_text("{}")
    assert cli.main([str(submission), "--out", str(tmp_path / "out")]) == 4
    first_line = capsys.readouterr().err.splitlines()[0]
    assert first_line == (f"[course] REFUSED: no sandbox for the submissions' code: this is {name}: the sandbox needs "
                          "Linux (bubblewrap). Grade on a Linux machine or in a Linux virtual machine.")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("system, mode", [("posix", "message"), ("nt", "signal")])
def test_timed_out_cells_are_interrupted_in_a_way_the_system_honours(monkeypatch, system, mode):
    with monkeypatch.context() as m:
        m.setattr(kernel.os, "name", system)
        chosen = kernel.interrupt_mode()
    assert chosen == mode  # ipykernel ignores interrupt messages on Windows


def test_kernels_talk_tcp_without_the_sandbox_and_unix_sockets_in_it(tmp_path):
    unsandboxed = kernel.SealedKernelManager(Isolation(bwrap=None), tmp_path, Limits())
    sandboxed = kernel.SealedKernelManager(Isolation(bwrap="/usr/bin/bwrap"), tmp_path, Limits())
    assert unsandboxed.transport == "tcp"  # Windows has no Unix sockets for Jupyter
    assert (sandboxed.transport, sandboxed.ip) == ("ipc", str(tmp_path / "k"))


def test_without_a_resource_module_kernels_start_without_limits(monkeypatch):
    command = ["python", "-m", "ipykernel_launcher"]
    monkeypatch.setattr(limits, "resource", None)  # Windows
    assert not limits.limits_supported() and not limits.memory_limit_holds()
    assert limits.wrap_command(command, Limits()) == command


@pytest.mark.skipif(not limits.limits_supported(), reason="this Python has no resource module to simulate with")
@pytest.mark.parametrize("system, holds", [("Linux", True), ("Darwin", False)])
def test_the_memory_limit_is_claimed_on_linux_only(on_system, system, holds):
    on_system(system)
    assert limits.memory_limit_holds() is holds  # the tests of the memory limit skip where it does not hold


def test_working_folders_go_to_tmp_where_there_is_one(monkeypatch):
    assert scoring.short_temp_parent() == ("/tmp" if Path("/tmp").is_dir() else None)
    with monkeypatch.context() as m:
        m.setattr(type(Path()), "is_dir", lambda self: False)  # Windows: no /tmp
        none = scoring.short_temp_parent()
    assert none is None


# -- the memory benchmark, which lesson 12 imports ----------------------------------------------------------------


def load_attention_memory(monkeypatch, without_resource: bool = False) -> types.ModuleType:
    if without_resource:
        monkeypatch.setitem(sys.modules, "resource", None)  # `import resource` fails, as on Windows
    spec = importlib.util.spec_from_file_location("attention_memory_copy", ROOT / "benchmarks" / "attention_memory.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_memory_benchmark_imports_without_resource(monkeypatch):
    module = load_attention_memory(monkeypatch, without_resource=True)
    assert callable(module.measure_in_subprocesses)


@pytest.mark.parametrize("system", ["Linux", "Windows", "macOS", "FreeBSD"])
def test_peak_memory_is_read_the_way_each_system_reports_it(monkeypatch, tmp_path, system):
    module = load_attention_memory(monkeypatch)
    status = tmp_path / "status"
    status.write_text("Name:\tpython\nVmPeak:\t  9999 kB\nVmHWM:\t  2048 kB\n")
    usage = types.SimpleNamespace(ru_maxrss=5000)
    fake_resource = types.SimpleNamespace(RUSAGE_SELF=0, getrusage=lambda who: usage)
    monkeypatch.setitem(sys.modules, "resource", fake_resource)
    monkeypatch.setattr(module, "PROC_STATUS", status if system == "Linux" else tmp_path / "missing")
    monkeypatch.setattr(module, "windows_peak_working_set", lambda: 777)
    with monkeypatch.context() as m:
        m.setattr(module.os, "name", "nt" if system == "Windows" else "posix")
        m.setattr(module.sys, "platform", {"macOS": "darwin", "FreeBSD": "freebsd14"}.get(system, sys.platform))
        peak = module.peak_rss_bytes()
    assert peak == {"Linux": 2048 * 1024, "Windows": 777, "macOS": 5000, "FreeBSD": 5000 * 1024}[system]


# -- the test command and CI ------------------------------------------------------------------------------------


def test_the_unit_step_prints_each_skip_reason():
    import argparse

    from course_tools.testrun import step_commands

    unit, _ = step_commands(argparse.Namespace(pytest_args=[], notebook=None), Path(tempfile.gettempdir()))["unit"]
    assert "-rs" in unit


def test_ci_runs_the_readme_command_on_every_system_and_both_pythons():
    workflow = WORKFLOW.read_text(encoding="utf-8")
    for runner in ("ubuntu-latest", "ubuntu-24.04-arm", "macos-latest", "windows-latest"):
        assert f"runner: {runner}" in workflow
    assert 'python: ["3.11", "3.14"]' in workflow and "fail-fast: false" in workflow
    assert "timeout-minutes: 90" in workflow and 'CI: "true"' in workflow
    steps = re.split(r"\n      - ", workflow)
    test_steps = [step for step in steps if re.search(r"run: \S+ course\.py test", step)]
    assert [(re.search(r"if: (.*)", step)[1], re.search(r"run: (.*)", step)[1]) for step in test_steps] == [
        ("runner.os != 'Windows'", "python3 course.py test"), ("runner.os == 'Windows'", "python course.py test")]
    bubblewrap = next(step for step in steps if "apt-get install -y -qq bubblewrap" in step)
    assert "if: runner.os == 'Linux'" in bubblewrap
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "python3 course.py test" in readme and "Python 3.11 and 3.14" in readme
