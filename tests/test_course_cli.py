"""The front door: stdlib only, exact pins, CI calls the README's test command, JupyterLab with a token, and the
byte-compiling that leaves out only model code the course never imports."""

import ast
import importlib.util
import os
import queue
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from course_tools import ROOT

COURSE_PY = ROOT / "course.py"


def test_course_py_imports_only_the_standard_library():
    tree = ast.parse(COURSE_PY.read_text())
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module.split(".")[0])
    assert modules - {"__future__"} <= set(sys.stdlib_module_names), modules - set(sys.stdlib_module_names)


def test_help_lists_the_commands():
    result = subprocess.run([sys.executable, str(COURSE_PY), "--help"], capture_output=True, text=True, check=True)
    for command in ("lab", "test", "execute", "exercises", "grade"):
        assert command in result.stdout


def test_ci_runs_exactly_the_readme_test_command():
    script = (ROOT / ".ci" / "run").read_text()
    commands = [line for line in script.splitlines() if line.strip() and not line.startswith("#")]
    assert commands[-1].strip() == "exec python3 course.py test"
    assert "python3 course.py test" in (ROOT / "README.md").read_text()
    assert "python3 course.py lab" in (ROOT / "README.md").read_text()


@pytest.mark.skipif(os.environ.get("TRANSFORMER_LIB_DEVICE", "cpu") != "cpu", reason="checks the CPU-only case")
def test_asking_for_a_missing_gpu_fails_clearly():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    result = subprocess.run([sys.executable, "-m", "course_tools", "test", "--device", "cuda"],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 2
    assert "sees no CUDA GPU" in result.stderr


def test_lab_allows_root_only_when_running_as_root():
    sys.path.insert(0, str(ROOT))
    try:
        import course
    finally:
        sys.path.remove(str(ROOT))
    as_root = course.lab_command(Path("python"), ["--port", "8899"], as_root=True)
    as_user = course.lab_command(Path("python"), ["--port", "8899"], as_root=False)
    assert as_root[-1] == "--allow-root" and "--allow-root" not in as_user
    assert "--ServerApp.ip=127.0.0.1" in as_root and as_root[:-1] == as_user
    assert course.lab_command(Path("python"), ["--allow-root"], as_root=True).count("--allow-root") == 1


def test_lab_refuses_an_empty_token():
    result = subprocess.run([sys.executable, str(COURSE_PY), "--use-current-python", "lab", "--ServerApp.token="],
                            capture_output=True, text=True)
    assert result.returncode != 0 and "without a token" in result.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _status(url: str) -> int:
    """The HTTP status of ``url``, retrying while the server is still starting to accept connections."""
    deadline = time.time() + 30
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return response.status
        except urllib.error.HTTPError as error:
            return error.code
        except urllib.error.URLError:
            if time.time() > deadline:
                raise
            time.sleep(0.5)


def test_lab_serves_lesson_00_and_requires_the_token(tmp_path):
    port = _free_port()
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"), "JUPYTER_CONFIG_DIR": str(tmp_path / "cfg"),
           "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "settings"), "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "ws")}
    # No --allow-root: as root (a container, CI) course.py must add it itself.
    command = [sys.executable, str(COURSE_PY), "--use-current-python", "lab", "--no-browser", "--port", str(port)]
    server = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in server.stdout], daemon=True).start()
        log, found = "", None
        deadline = time.time() + 90
        while found is None and time.time() < deadline and server.poll() is None:
            try:
                line = lines.get(timeout=1)
            except queue.Empty:
                continue
            log += line
            found = re.search(r"(http://127\.0\.0\.1:\d+)/lab/tree/notebooks/00_start_here\.ipynb\?token=(\w+)", line)
        assert found, f"JupyterLab did not announce lesson 00 with a token:\n{log}"
        base, token = found.groups()
        lesson = f"{base}/api/contents/notebooks/00_start_here.ipynb"
        assert _status(lesson) == 403, "without the token the server must refuse"
        assert _status(f"{lesson}?token={token}") == 200
    finally:
        server.terminate()
        server.wait(timeout=30)


TRANSFORMERS_AS_THE_COURSE_USES_THEM = """
import sys
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast, LlamaConfig, LlamaForCausalLM
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.llama import modeling_llama
from transformers.pytorch_utils import Conv1D

gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=16, n_positions=8))
gpt2(torch.zeros(1, 4, dtype=torch.long))
llama = LlamaForCausalLM(LlamaConfig(num_hidden_layers=1, hidden_size=8, intermediate_size=16, num_attention_heads=2,
                                     num_key_value_heads=1, vocab_size=16))
llama(torch.zeros(1, 4, dtype=torch.long))
get_peft_model(gpt2, LoraConfig(r=2, target_modules=["c_attn"]))
print(" ".join(sorted({name.split(".")[2] for name in sys.modules if name.startswith("transformers.models.")})))
"""


def test_the_compile_step_leaves_out_only_model_code_the_course_never_imports():
    """course.py byte-compiles the environment but the model packages of transformers outside its list: every model
    package that the course's uses of transformers and peft load is on that list, and compiled."""
    pytest.importorskip("transformers")
    pytest.importorskip("peft")
    import transformers

    spec = importlib.util.spec_from_file_location("course_front_door", COURSE_PY)
    course = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(course)
    loaded = subprocess.run([sys.executable, "-c", TRANSFORMERS_AS_THE_COURSE_USES_THEM], capture_output=True,
                            text=True, timeout=300)
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    packages = loaded.stdout.split()
    assert {"gpt2", "llama"} <= set(packages)
    assert set(packages) <= set(course.USED_TRANSFORMERS_MODELS), set(packages) - set(course.USED_TRANSFORMERS_MODELS)
    left_out = re.compile(course.UNUSED_SOURCE)
    models = Path(transformers.__file__).parent / "models"
    assert not any(left_out.search(str(path)) for name in packages for path in (models / name).glob("*.py"))
    assert not left_out.search(str(models / "__init__.py"))
    assert left_out.search(str(models / "bert" / "modeling_bert.py"))  # a model the course never loads
