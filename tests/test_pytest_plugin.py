"""ptodsl's pytest plugin: a user's project golden-tests its own specs (pto_golden)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import ROOT

SPEC = (ROOT / "examples" / "kernelbench" / "19_relu.pto").read_text(encoding="utf-8")
TEST = """
def test_relu(pto_golden):
    pto_golden("specs/relu.pto", dims={"dim": 512})
"""


def pytest_in(project: Path, *args: str, timeout: float | None = None):
    # -p no:cacheprovider: nothing but the goldens is written into the project.
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=timeout,
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


def make_null_device(path: Path) -> None:
    """A character device node of our own (the null device's numbers) in the test's folder:
    never a real device path."""
    os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))


def golden_text_test(name: str) -> str:
    return f"def test_text(pto_golden_text):\n    pto_golden_text({name!r}, 'text\\n')\n"


def set_up_link_to_device(project: Path) -> None:
    goldens = project / "tests" / "goldens"
    goldens.mkdir()
    make_null_device(project / "device")
    (goldens / "out.txt").symlink_to(project / "device")


def set_up_golden(make) -> Callable[[Path], None]:
    def set_up(project: Path) -> None:
        goldens = project / "tests" / "goldens"
        goldens.mkdir()
        make(goldens / "out.txt")

    return set_up


# case: (the test's body, or a function of the test's folder that gives it; the project's
# setup; whether goldens are written (--update-goldens); what the failure says)
BAD_GOLDENS = {
    "a name climbing out": (golden_text_test("../../escaped.txt"), None, True, "outside"),
    "an absolute name": (
        lambda tmp_path: golden_text_test(str(tmp_path / "absolute.txt")),
        None,
        True,
        "outside",
    ),
    "a folder option climbing out": (
        golden_text_test("out.txt"),
        lambda project: (project / "pytest.ini").write_text("[pytest]\nptodsl_goldens = ../..\n"),
        True,
        "the ptodsl_goldens ini option: ../.. names a path outside",
    ),
    "a link to a device": (
        golden_text_test("out.txt"),
        set_up_link_to_device,
        True,
        "is a character device, not a regular file",
    ),
    "a FIFO, written": (golden_text_test("out.txt"), set_up_golden(os.mkfifo), True, "a FIFO"),
    "a FIFO, compared": (golden_text_test("out.txt"), set_up_golden(os.mkfifo), False, "a FIFO"),
    "a folder": (golden_text_test("out.txt"), set_up_golden(Path.mkdir), False, "a folder"),
    "not UTF-8": (
        golden_text_test("out.txt"),
        set_up_golden(lambda path: path.write_bytes(b"\xff\xfe")),
        False,
        "is not UTF-8 text (byte 0xff)",
    ),
    "a spec outside the rootdir": (
        "def test_spec(pto_golden):\n    pto_golden('../outside.pto')\n",
        lambda project: (project.parent / "outside.pto").write_text(SPEC, encoding="utf-8"),
        False,
        "is outside the rootdir",
    ),
}


@pytest.mark.parametrize("case", BAD_GOLDENS)
def test_a_bad_golden_fails_its_test_and_writes_nothing_elsewhere(tmp_path, case):
    """Each once wrote outside the goldens (or into the device), hung on the FIFO, or raised
    a raw exception: now the test fails with the reason, in seconds."""
    body, set_up, update, message = BAD_GOLDENS[case]
    if callable(body):
        body = body(tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    (project / "tests").mkdir()
    (project / "tests" / "test_goldens.py").write_text(body, encoding="utf-8")
    (project / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    if set_up is not None:
        set_up(project)
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    result = pytest_in(project, *(["--update-goldens"] if update else []), timeout=120)
    assert result.returncode == 1, result.stdout + result.stderr
    assert message in result.stdout, result.stdout
    assert "Traceback" not in result.stdout
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == before
    if case == "a link to a device":
        assert stat.S_ISCHR((project / "device").lstat().st_mode)
