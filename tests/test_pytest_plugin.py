"""ptodsl's pytest plugin: a user's project golden-tests its own specs (pto_golden)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import ROOT

SPEC = (ROOT / "examples" / "kernelbench" / "19_relu.pto").read_text(encoding="utf-8")
TEST = """
def test_relu(pto_golden):
    pto_golden("specs/relu.pto", dims={"dim": 512})
"""


def pytest_in(project: Path, *args: str) -> subprocess.CompletedProcess:
    # -p no:cacheprovider: nothing but the goldens is written into the project.
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=project,
        capture_output=True,
        text=True,
    )


def user_project(tmp_path: Path) -> Path:
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "relu.pto").write_text(SPEC, encoding="utf-8")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_specs.py").write_text(TEST, encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    return tmp_path


def test_a_users_goldens_are_written_compared_and_guard_changes(tmp_path):
    project = user_project(tmp_path)
    missing = pytest_in(project)
    assert missing.returncode == 1 and "pytest --update-goldens" in missing.stdout

    written = pytest_in(project, "--update-goldens")
    assert written.returncode == 0, written.stdout + written.stderr
    goldens = project / "tests" / "goldens" / "relu"
    assert sorted(p.name for p in goldens.iterdir()) == [
        "forward.txt",
        "kernel.py.txt",
        "lowered.ir.txt",
        "plan.json",
        "reference.py.txt",
    ]
    assert "PyPTO kernel `relu`" in (goldens / "kernel.py.txt").read_text(encoding="utf-8")
    assert pytest_in(project).returncode == 0

    spec = project / "specs" / "relu.pto"
    spec.write_text(SPEC.replace("relu(x)", "relu(x) * 2"), encoding="utf-8")
    changed = pytest_in(project)
    assert changed.returncode == 1
    assert "kernel.py.txt differs from its golden" in changed.stdout


def test_the_goldens_folder_is_an_ini_option(tmp_path):
    project = user_project(tmp_path)
    (project / "pytest.ini").write_text("[pytest]\nptodsl_goldens = reviewed\n", encoding="utf-8")
    assert pytest_in(project, "--update-goldens").returncode == 0
    assert (project / "reviewed" / "relu" / "plan.json").is_file()
