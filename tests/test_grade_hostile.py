"""Hostile submissions graded beside an honest one, in the sandbox: each tries a harm, and the harm does not happen.

Every hostile notebook is the honest solution plus cells that attack: read the teacher's files, write outside its
folder, reach the host's network services, kill the grader, leave processes behind. After one class run the test
asserts, from outside, that nothing it tried took effect and the honest submission kept full marks.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import signal
import socket
import threading
import time
from pathlib import Path

import pytest

from course_files import SOLUTIONS
from course_tools import ROOT
from course_tools.grading.assignments import load_assignments
from course_tools.grading.class_report import write_class_report
from course_tools.grading.feedback_files import write_feedback
from course_tools.grading.gradebook import build_rows, write_gradebook
from course_tools.grading.isolation import BUBBLEWRAP, Isolation
from course_tools.notebook_files import read_notebook
from course_tools.system_packages import impossible_here
from grading_cases import SIMILARITY, grade_paths, replace_solution, sandbox_or_skip, save, with_cells

# The sandbox is Linux's, and so are the attacks that prove it (abstract Unix sockets, /proc): elsewhere the whole
# module skips with that one-line reason, on CI too.
if impossible_here("bubblewrap"):
    pytest.skip(impossible_here("bubblewrap"), allow_module_level=True)

TOKEN = f"hostile-{secrets.token_hex(8)}"


class Listener:
    """A TCP service on one of the host's addresses that records every connection it accepts."""

    def __init__(self, host: str):
        self.server = socket.create_server((host, 0))
        self.address = self.server.getsockname()[:2]
        self.accepted = 0
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            self.accepted += 1
            connection.close()


def unix_listener(address: str) -> socket.socket:
    """A Unix socket service (a path, or an abstract name starting with NUL) that accepts connections."""
    server = socket.socket(socket.AF_UNIX)
    server.bind(address)
    server.listen()
    return server


def host_address() -> str:
    """One of this machine's non-loopback addresses (the loopback one when it has none)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 1))  # no packet is sent: this only picks the outgoing address
            return probe.getsockname()[0]
        except OSError:
            return "127.0.0.1"


def attacks(targets: dict) -> dict[str, list[str]]:
    """Each hostile submission's extra cells, given the paths and services to attack."""
    t = {key: repr(str(value)) if isinstance(value, Path) else repr(value) for key, value in targets.items()}
    token = targets["token"]  # marks what the attacks leave behind (files, socket names, processes)
    return {
        "reads_files": [
            f"stolen = []\nfor path in [{t['secret']}, {t['repo_secret']}, {t['honest']}, "
            f"'/proc/{os.getpid()}/environ', '/root/.bashrc', '/etc/shadow']:\n"
            "    try:\n        stolen.append(open(path).read())\n    except OSError as error:\n"
            "        stolen.append(type(error).__name__)",
            "raise RuntimeError(' '.join(stolen))",  # the note would carry whatever it read
        ],
        "writes_outside": [
            f"import shutil\nfor source, target in [({t['secret']}, {t['honest_folder']} + '/stolen.txt'), "
            f"({t['secret']}, '/tmp/{token}.txt'), ({t['secret']}, {t['out']} + '/grades.csv')]:\n"
            "    try:\n        shutil.copy(source, target)\n    except OSError:\n        pass",
            f"for path in [{t['honest']}, {t['secret']}, {t['library_file']}, {t['course_file']}]:\n"
            "    try:\n        open(path, 'a').write('# changed by a submission')\n    except OSError:\n        pass",
        ],
        "reaches_network": [
            "import socket\nreached = []\n"
            f"for name, address in [('loopback', {t['loopback']}), ('host', {t['host']})]:\n"
            "    try:\n        socket.create_connection(address, timeout=3).close()\n        reached.append(name)\n"
            "    except OSError:\n        pass\n"
            f"for name, path in [('socket file', {t['unix_socket']}), ('abstract socket', '\\0{token}')]:\n"
            "    try:\n        socket.socket(socket.AF_UNIX).connect(path)\n        reached.append(name)\n"
            "    except OSError:\n        pass\n"
            "assert not reached, reached",
        ],
        "leaves_processes": [
            "import subprocess, sys\n"
            f"children = [subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', '{token}'], "
            "start_new_session=True) for _ in range(40)]",
        ],
        "kills_grader": [
            f"import os, signal\nfor pid in [{os.getpid()}, os.getppid(), 1]:\n"
            "    try:\n        os.kill(pid, signal.SIGKILL)\n    except OSError:\n        pass\n"
            "os.kill(-1, signal.SIGKILL)",
        ],
    }


FAKE_MARKS = (  # replaces the grader's in-kernel reporter with one that says every check passed
    "import sys, types\n"
    "fake = types.ModuleType('course_tools.grading.in_kernel')\n"
    "fake.report = lambda namespace, module, call, needs, marker: print(\n"
    "    marker + '{\"result\": {\"ok\": true, \"lines\": [], \"passed\": 1, \"total\": 1}}')\n"
    "sys.modules['course_tools.grading.in_kernel'] = fake"
)


FORGED_DIAGNOSIS = (  # reports a failure whose diagnosis and hint are markup aimed at the teacher's report page
    "import json, sys, types\n"
    "forged = {'mistake': '<img src=x onerror=alert(1)>', 'hint': '<script>alert(1)</script>'}\n"
    "fake = types.ModuleType('course_tools.grading.in_kernel')\n"
    "fake.report = lambda namespace, module, call, needs, marker: print(marker + json.dumps(\n"
    "    {'result': {'ok': False, 'lines': ['✘ forged'], 'passed': 0, 'total': 1, 'diagnoses': [forged]}}))\n"
    "sys.modules['course_tools.grading.in_kernel'] = fake"
)


def snapshot(*paths: Path) -> dict[Path, str]:
    return {path: hashlib.sha256(path.read_bytes()).hexdigest() for path in paths}


def processes_outliving(token: str, grace_s: float = 10.0) -> list[int]:
    """The processes still holding ``token`` once ``grace_s`` seconds have passed: the sandbox's processes are killed
    when its first process dies, a moment after the grader kills it, not in the same instant."""
    deadline = time.monotonic() + grace_s
    while (alive := processes_holding(token)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return alive


def processes_holding(token: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and token.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    isolation = sandbox_or_skip()
    solution = next((p for p in SOLUTIONS if p.stem == SIMILARITY), None)
    if solution is None:
        pytest.skip(f"solutions/{SIMILARITY}.ipynb not written yet")
    root = tmp_path_factory.mktemp("hostile")
    honest = save(root / "submissions" / "honest" / solution.name, solution.read_bytes())
    secret = save(root / "teacher_home" / "secret.txt", f"{TOKEN} teacher's secret")
    repo_secret = save(ROOT / f".{TOKEN}-secret", f"{TOKEN} in the course folder")
    library_file = save(ROOT / "transformer_lib" / f".{TOKEN}-decoy.txt", "part of the course library\n")
    unix_servers = [unix_listener(str(root / "service.sock")), unix_listener(f"\0{TOKEN}")]  # a file, abstract
    loopback, host = Listener("127.0.0.1"), Listener(host_address())
    targets = {"token": TOKEN, "secret": secret, "repo_secret": repo_secret, "honest": honest,
               "honest_folder": honest.parent,
               "out": root / "out", "library_file": library_file, "course_file": repo_secret,
               "loopback": loopback.address, "host": host.address, "unix_socket": root / "service.sock"}
    watched = snapshot(honest, secret, library_file, repo_secret)
    nb = read_notebook(solution)
    paths = [honest] + [save(root / "submissions" / name / solution.name, with_cells(nb, *cells))
                        for name, cells in attacks(targets).items()]
    faker = with_cells(replace_solution(nb, "norm", "return v.sum()"), FAKE_MARKS)
    paths.append(save(root / "submissions" / "fakes_its_marks" / solution.name, faker))
    forger = save(root / "submissions" / "forges_a_diagnosis" / solution.name, with_cells(nb, FORGED_DIAGNOSIS))
    paths.append(forger)
    try:
        grades = grade_paths(paths, load_assignments(), isolation)
        rows = build_rows(grades)
        write_gradebook(rows, root / "out")
        write_class_report(rows, root / "out")
        write_feedback(rows, root / "out")
    finally:
        changed = [path.name for path, digest in watched.items() if snapshot(path)[path] != digest]
        repo_secret.unlink()
        library_file.unlink()
        for server in unix_servers:
            server.close()
    leftover = processes_outliving(TOKEN)
    return {g.student: g for g in grades}, root, changed, (loopback, host), leftover


def test_the_honest_submission_keeps_full_marks(hostile_run):
    grades, *_ = hostile_run
    honest = grades["honest"]
    assert honest.total == honest.max_points > 0 and honest.notes == []
    assert {g.isolation for g in grades.values()} == {BUBBLEWRAP}


def test_no_file_outside_its_folder_can_be_read(hostile_run):
    grades, root, *_ = hostile_run
    note = next(n for n in grades["reads_files"].notes if "RuntimeError" in n)
    assert note.count("FileNotFoundError") == 6, note  # none of the six paths even exists in the sandbox
    gradebook = (root / "out" / "grades.json").read_text(encoding="utf-8") + (root / "out" / "grades.csv").read_text()
    assert TOKEN not in gradebook and "teacher's secret" not in gradebook


def test_nothing_outside_its_folder_changes(hostile_run):
    grades, root, changed, *_ = hostile_run
    assert changed == []  # the other submission, the teacher's file, a file of the course library and its folder
    assert sorted(p.name for p in (root / "submissions" / "honest").iterdir()) == [f"{SIMILARITY}.ipynb"]
    assert not Path(f"/tmp/{TOKEN}.txt").exists()
    records = json.loads((root / "out" / "grades.json").read_text(encoding="utf-8"))
    assert len(records) == len(grades)  # the gradebook is the grader's, not a copied secret
    assert not any(g.library_changed for g in grades.values())


def test_no_socket_of_the_host_can_be_reached(hostile_run):
    grades, _, _, listeners, _ = hostile_run
    assert [listener.accepted for listener in listeners] == [0, 0]
    g = grades["reaches_network"]
    assert g.total == g.max_points and g.notes == []  # its assert (nothing reached) held inside the sandbox


def test_the_grader_survives_and_no_process_is_left_behind(hostile_run):
    grades, _, _, _, leftover = hostile_run
    assert set(grades) == {"honest", "reads_files", "writes_outside", "reaches_network", "leaves_processes",
                           "kills_grader", "fakes_its_marks", "forges_a_diagnosis"}
    assert grades["leaves_processes"].total == grades["leaves_processes"].max_points
    assert grades["kills_grader"].total == grades["kills_grader"].max_points  # it could kill nothing, not even itself
    assert leftover == []


def test_the_attacks_are_real_without_the_sandbox(tmp_path):
    """The same attacks, graded with no sandbox on harmless targets, do their harm: the tests above can fail."""
    solution = next((p for p in SOLUTIONS if p.stem == SIMILARITY), None)
    if solution is None:
        pytest.skip(f"solutions/{SIMILARITY}.ipynb not written yet")
    token = f"unsandboxed-{secrets.token_hex(8)}"  # not TOKEN: its leftovers are its own
    honest = save(tmp_path / "submissions" / "honest" / solution.name, solution.read_bytes())
    secret = save(tmp_path / "teacher_home" / "secret.txt", f"{token} teacher's secret")
    decoys = [save(tmp_path / "course" / name, "x = 1\n") for name in ("__init__.py", "README.md")]
    loopback = Listener("127.0.0.1")
    targets = {"token": token, "secret": secret, "repo_secret": secret, "honest": honest,
               "honest_folder": honest.parent,
               "out": tmp_path / "out", "library_file": decoys[0], "course_file": decoys[1],
               "loopback": loopback.address, "host": loopback.address, "unix_socket": tmp_path / "service.sock"}
    unix_servers = [unix_listener(str(tmp_path / "service.sock")), unix_listener(f"\0{token}")]
    chosen = {name: cells for name, cells in attacks(targets).items() if name != "kills_grader"}
    paths = [save(tmp_path / "submissions" / name / solution.name, with_cells(read_notebook(solution), *cells))
             for name, cells in chosen.items()]
    watched = snapshot(honest, secret, *decoys)
    try:
        grades = {g.student: g for g in grade_paths(paths, load_assignments(), Isolation(bwrap=None))}
    finally:
        for server in unix_servers:
            server.close()
        left = processes_holding(token)
        for pid in left:
            os.kill(pid, signal.SIGKILL)
    assert any(token in note for note in grades["reads_files"].notes)
    assert snapshot(*watched) != watched and (honest.parent / "stolen.txt").exists()
    reached = next(note for note in grades["reaches_network"].notes if "AssertionError" in note)
    assert loopback.accepted >= 1 and reached.endswith("['loopback', 'host', 'socket file', 'abstract socket']")
    assert left


def test_a_submission_can_fake_its_own_marks_but_is_flagged_for_review(hostile_run):
    """The limit the README states: code in the kernel can fake its own checks (a wrong norm passes here); the
    gradebook says so, and no one else's grade moves (the honest one above keeps its own marks)."""
    grades, *_ = hostile_run
    faker = grades["fakes_its_marks"]
    assert faker.total == faker.max_points  # faked: its norm is wrong
    assert any(note.startswith("review by hand: the code uses sys.modules, the course's check code")
               for note in faker.notes), faker.notes
    flagged = [name for name, g in grades.items() if any(n.startswith("review by hand") for n in g.notes)]
    assert sorted(flagged) == ["fakes_its_marks", "forges_a_diagnosis"]


def test_diagnoses_name_each_harm_and_a_forged_one_reaches_the_report_as_text(hostile_run):
    """The class report sees every hostile submission as what it did to its own exercises; a diagnosis forged as
    markup is read as unreadable, and its hint appears on the teacher's page escaped, never as a tag."""
    grades, root, *_ = hostile_run
    assert {e.diagnosis for e in grades["honest"].exercises} == {""}
    assert {e.diagnosis for e in grades["forges_a_diagnosis"].exercises} == {"unreadable-diagnosis"}
    assert all((e.diagnosis == "") == (e.status == "passed") for g in grades.values() for e in g.exercises)
    page = (root / "out" / "class_report.html").read_text(encoding="utf-8")
    assert "<script>" not in page and "<img src=x" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    report = page + (root / "out" / "class_report.md").read_text(encoding="utf-8")
    assert TOKEN not in report and "teacher's secret" not in report
    feedback = root / "out" / "feedback" / SIMILARITY
    assert {p.stem for p in feedback.iterdir()} == set(grades)
