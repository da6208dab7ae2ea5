"""The files Binder / repo2docker reads (binder/) agree with requirements.txt, keep torch CPU-only, install the course
packages and open lesson 00."""

import json
import os
import re
import subprocess
import sys

from course_tools import ROOT

BINDER = ROOT / "binder"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def requirement_lines(path):
    lines = [line.split("#")[0].strip() for line in path.read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if line]


def test_binder_installs_exactly_the_course_requirements_with_cpu_torch():
    lines = requirement_lines(BINDER / "requirements.txt")
    assert sorted(lines) == sorted(["-r ../requirements.txt", f"--extra-index-url {CPU_INDEX}"])
    assert (BINDER / "../requirements.txt").resolve() == ROOT / "requirements.txt"
    # An exact public pin (no "+cu…" label) is what lets the CPU index's "2.13.0+cpu" build satisfy it.
    pins = dict(line.split("==") for line in requirement_lines(ROOT / "requirements.txt"))
    assert re.fullmatch(r"\d+\.\d+\.\d+", pins["torch"]), pins["torch"]


def test_no_other_environment_file_confuses_repo2docker():
    """repo2docker uses binder/ when it exists; other environment files there would compete with it."""
    allowed = {"requirements.txt", "runtime.txt", "postBuild", "jupyter_server_config.json"}
    assert {p.name for p in BINDER.iterdir()} == allowed
    for name in ("environment.yml", "Pipfile", "Project.toml", "apt.txt", "Dockerfile"):
        assert not (ROOT / name).exists(), name


def test_runtime_python_satisfies_the_project():
    version = (BINDER / "runtime.txt").read_text(encoding="utf-8").strip()
    found = re.fullmatch(r"python-(\d+)\.(\d+)", version)
    assert found, f"runtime.txt must read python-X.Y, not {version!r}"
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    requires = re.search(r'^requires-python = ">=(\d+)\.(\d+)"$', pyproject, re.MULTILINE)
    minimum = tuple(int(part) for part in requires.groups())
    assert tuple(int(part) for part in found.groups()) >= minimum


def test_post_build_installs_the_course_and_the_default_url():
    script = BINDER / "postBuild"
    text = script.read_text(encoding="utf-8")
    assert text.startswith("#!/bin/bash\n") and "set -euo pipefail" in text
    assert os.access(script, os.X_OK), "postBuild must be executable (git update-index --chmod=+x binder/postBuild)"
    assert "pip install --no-cache-dir --no-deps -e ." in text
    assert "cp binder/jupyter_server_config.json" in text
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0


def test_the_server_opens_lesson_00(tmp_path):
    """Load the config the way postBuild installs it and ask jupyter_server which page it opens."""
    config = json.loads((BINDER / "jupyter_server_config.json").read_text(encoding="utf-8"))
    default_url = config["ServerApp"]["default_url"]
    assert (ROOT / default_url.removeprefix("/lab/tree/")).is_file()
    (tmp_path / "jupyter_server_config.json").write_text(json.dumps(config), encoding="utf-8")
    code = "from jupyter_server.serverapp import ServerApp\napp = ServerApp()\napp.load_config_file()\n" \
           "print(app.default_url)"
    env = {**os.environ, "JUPYTER_CONFIG_PATH": str(tmp_path), "JUPYTER_CONFIG_DIR": str(tmp_path / "user")}
    shown = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert shown.stdout.strip() == default_url
