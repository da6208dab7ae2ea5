#!/usr/bin/env python3
"""The course's front door. Standard library only: it runs before anything is installed.

    python3 course.py lab            # set up .venv if needed, then open JupyterLab on lesson 00
    python3 course.py test           # set up .venv if needed, then run every check (lint, tests, notebooks)

Run ``python3 course.py --help`` for the other commands (execute, exercises, grade).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV_DIR = ROOT / ".venv"
TEST_REQUIREMENTS = "requirements-test.txt"  # test tools, beyond the learner's environment
SITE_REQUIREMENTS = "requirements-site.txt"  # the website builder, in an environment of its own
SITE_VENV_DIR = ROOT / ".venv-site"
COMMANDS_NEEDING_TEST_TOOLS = ("test", "screenshots", "bounds")
FIRST_LESSON = Path("notebooks") / "00_start_here.ipynb"
MIN_PYTHON = (3, 11)


def say(message: str) -> None:
    print(f"[course] {message}", flush=True)


def venv_python(venv_dir: Path = VENV_DIR) -> Path:
    """The virtual environment's interpreter on Windows, macOS and Linux."""
    if os.name == "nt":
        return venv_dir / "Scripts" / "python.exe"
    return venv_dir / "bin" / "python"


def install_fingerprint(requirements: str) -> str:
    """Changes whenever that requirements file, the package metadata or the Python version change."""
    digest = hashlib.sha256(f"{sys.version_info[:3]}".encode())
    for name in (requirements, "pyproject.toml"):
        digest.update((ROOT / name).read_bytes())
    return digest.hexdigest()


def stamp_file(requirements: str, venv_dir: Path = VENV_DIR) -> Path:
    return venv_dir / f"course-installed-{Path(requirements).stem}.stamp"


def _stamp_matches(requirements: str, venv_dir: Path) -> bool:
    stamp = stamp_file(requirements, venv_dir)
    return stamp.exists() and stamp.read_text().strip() == install_fingerprint(requirements)


def run(command: list[str | Path], cwd: Path = ROOT, **kwargs) -> int:
    return subprocess.call([str(part) for part in command], cwd=cwd, **kwargs)


def ensure_environment(requirement_files: tuple[str, ...], venv_dir: Path = VENV_DIR,
                       course_packages: bool = True) -> Path:
    """Create or update ``venv_dir`` so it holds what the requirement files pin, plus (``course_packages``) the
    course packages installed in editable mode.

    Each file is installed again only when it (or pyproject.toml, or the Python version) changed since last time.
    """
    if sys.version_info < MIN_PYTHON:
        needed = ".".join(map(str, MIN_PYTHON))
        sys.exit(f"[course] Python {needed} or newer is needed; this is {sys.version.split()[0]}.")
    python = venv_python(venv_dir)
    if not python.exists():
        say(f"creating the virtual environment {venv_dir.name}/ (once)")
        venv.EnvBuilder(with_pip=True, clear=venv_dir.exists()).create(venv_dir)
    # pip byte-compiles what it installs on one core; compile_packages does it on every core afterwards.
    pip = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile"]
    stale = [name for name in requirement_files if not _stamp_matches(name, venv_dir)]
    if stale:
        size = " (the first time takes a minute or two: about 1.3 GB)" if "requirements.txt" in stale else ""
        say(f"installing {' and '.join(stale)} into {venv_dir.name}/{size}")
        if run([*pip, *(part for name in stale for part in ("-r", name))]) != 0:
            sys.exit("[course] installation failed; read pip's message above, then run the command again.")
        if course_packages:
            say("installing the course packages (transformer_lib, course_tools) in editable mode")
            # torch needs setuptools, so the environment already has the build backend: no isolated build needed.
            if run([*pip, "--no-deps", "--no-build-isolation", "-e", "."]) != 0:
                sys.exit("[course] installing the course packages failed; read pip's message above.")
        compile_packages(python)
    for requirements in stale:
        stamp_file(requirements, venv_dir).write_text(install_fingerprint(requirements) + "\n")
    if not stale:
        say(f"environment {venv_dir.name}/ is up to date")
    return python


# Hugging Face transformers ships about 2 800 modules of model code, a fifth of the environment's Python source; the
# course imports the few below (directly, or through peft). The rest would cost a compile that no process uses.
USED_TRANSFORMERS_MODELS = ("auto", "blip_2", "bloom", "encoder_decoder", "gpt2", "llama")
UNUSED_SOURCE = r"transformers[/\\]models[/\\](?!(" + "|".join(USED_TRANSFORMERS_MODELS) + r")[/\\])[^/\\]+[/\\]"


def compile_packages(python: Path) -> None:
    """Byte-compile the environment's packages on every core, so that no kernel or test compiles them on import.

    A few packages ship files that do not compile (templates, other Pythons' code); Python never imports those,
    so compileall's complaints about them are silenced and its exit status ignored, as pip does. The model code of
    transformers that the course does not import is left out (``UNUSED_SOURCE``): were a module of it imported
    after all, Python would compile it then, as it does any module without bytecode.
    """
    say("compiling the installed packages on every core")
    where = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                           capture_output=True, text=True, check=True).stdout.strip()
    run([python, "-m", "compileall", "-qq", "-j", "0", "-x", UNUSED_SOURCE, where])


def choose_python(use_current: bool, command: str) -> Path:
    if use_current:
        say(f"using the current interpreter {sys.executable} (no virtual environment)")
        return Path(sys.executable)
    if command == "site":  # the website builder's own environment: course_tools comes from PYTHONPATH
        return ensure_environment((SITE_REQUIREMENTS,), SITE_VENV_DIR, course_packages=False)
    requirement_files = ["requirements.txt"]
    if command in COMMANDS_NEEDING_TEST_TOOLS and (ROOT / TEST_REQUIREMENTS).exists():
        requirement_files.append(TEST_REQUIREMENTS)
    return ensure_environment(tuple(requirement_files))


def running_as_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def lab_command(python: Path, extra: list[str], as_root: bool) -> list[str]:
    """The `jupyter lab` command line: localhost only, lesson 00 first; as root (a container), --allow-root."""
    command = [str(python), "-m", "jupyter", "lab", "--ServerApp.ip=127.0.0.1", f"--ServerApp.root_dir={ROOT}",
               f"--LabApp.default_url=/lab/tree/{FIRST_LESSON.as_posix()}", *extra]
    if as_root and "--allow-root" not in extra:
        command.append("--allow-root")
    return command


def command_lab(python: Path, extra: list[str]) -> int:
    if any(arg.replace(" ", "") in ("--ServerApp.token=", "--IdentityProvider.token=", "--NotebookApp.token=")
           for arg in extra):
        sys.exit("[course] refusing to start JupyterLab without a token: anyone on your network could run code.")
    if running_as_root():
        say("running as root (a container?): JupyterLab gets --allow-root; it still listens on 127.0.0.1 only, "
            "with a token")
    say(f"starting JupyterLab on {FIRST_LESSON.as_posix()} (stop it with Ctrl-C)")
    command = lab_command(python, extra, running_as_root())
    if os.name == "posix":  # become JupyterLab, so Ctrl-C and signals reach the server itself
        os.chdir(ROOT)
        os.execv(command[0], command)
    try:
        return run(command)
    except KeyboardInterrupt:
        return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="course.py",
        description="Set up and run the Transformer course. The first run creates .venv and installs "
                    "requirements.txt; later runs reuse it while the requirements are unchanged.",
    )
    parser.add_argument("--use-current-python", action="store_true",
                        help="skip .venv and use the interpreter running this script (it must already have "
                             "everything in requirements.txt; used on machines without a package index)")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.add_parser("lab", add_help=False, help="open JupyterLab on lesson 00; extra arguments go to `jupyter lab` "
                                    "(e.g. --port 8899 --no-browser)")
    commands.add_parser("test", add_help=False, help="run every check: ruff, unit tests, notebook validation "
                                     "(--device cuda to validate on a GPU; --help for more)")
    commands.add_parser("execute", add_help=False,
                        help="re-run lesson or solution notebooks and store their outputs (maintainers)")
    commands.add_parser("exercises", add_help=False,
                        help="generate exercises/ from solutions/ (never overwrites a student's edits)")
    commands.add_parser("colab-links", add_help=False,
                        help="write the Open-in-Colab links and Colab setup cells from REPOSITORY_URL (maintainers)")
    commands.add_parser("grade", add_help=False, help="grade submitted exercise notebooks into a gradebook (teachers)")
    commands.add_parser("screenshots", add_help=False,
                        help="refresh the README's pictures in docs/screenshots/ with Chromium (maintainers)")
    commands.add_parser("site", add_help=False, help="build the course's website from the executed notebooks into "
                                                     "build/site/ (in its own environment, .venv-site)")
    commands.add_parser("doctor", add_help=False, help="show versions and hardware; check each device computes right")
    commands.add_parser("bounds", add_help=False, help="run the trained-claim tests on 5 seeds in 3 CPU kernel "
                                                       "settings; print each bound's margin (maintainers)")
    return parser


def main(argv: list[str]) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if "--use-current-python" in extra:  # also accepted after the command: `course.py test --use-current-python`
        extra.remove("--use-current-python")
        args.use_current_python = True
    if args.command is None:
        parser.print_help()
        return 2
    python = choose_python(args.use_current_python, args.command)
    if args.command == "lab":
        return command_lab(python, extra)
    # PYTHONPATH lets kernels started from notebooks/ import the course packages even without the editable install.
    pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env = {**os.environ, "PYTHONUTF8": "1", "PYTHONPATH": pythonpath}
    # From the caller's folder, so relative paths (notebooks to execute, submissions to grade) mean what they say.
    return run([python, "-m", "course_tools", args.command, *extra], cwd=Path.cwd(), env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
