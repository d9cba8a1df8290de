"""pypto's calculator is built once into ptodsl's cache; a cached library that is not the
one the build wrote (truncated by a full disk, cut short by a copy) is rebuilt, never
loaded. The build itself (cmake, ~30 s) is pypto's: here it writes a stand-in file, since
only the cache's bookkeeping is under test."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptodsl.runtime import simulator

LIBRARY_BYTES = b"\x7fELF" + bytes(range(256)) * 64


@pytest.fixture
def builds(monkeypatch, tmp_path):
    """Each call of the cmake build, which writes a complete library."""
    calls: list[Path] = []

    def cmake_build(source_dir, cmake_defines, scratch: Path) -> Path:
        calls.append(scratch)
        install = scratch / "install"
        (install / simulator._CALCULATOR_SO).parent.mkdir(parents=True)
        (install / simulator._CALCULATOR_SO).write_bytes(LIBRARY_BYTES)
        return install

    monkeypatch.setattr(simulator, "_cmake_build", cmake_build)
    return calls


def build_if_needed(target: Path) -> None:
    if not simulator._intact(target / simulator._CALCULATOR_SO):
        simulator._build_calculator_locked(Path("source"), {}, target)


def test_a_complete_library_is_built_once(builds, tmp_path):
    target = tmp_path / "calculator" / "key"
    build_if_needed(target)
    build_if_needed(target)
    assert len(builds) == 1
    assert (target / simulator._CALCULATOR_SO).read_bytes() == LIBRARY_BYTES
    assert [p.name for p in target.parent.iterdir()] == ["key", "key.lock"]  # no scratch left


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda lib: lib.write_bytes(LIBRARY_BYTES[:100]), id="truncated"),
        pytest.param(lambda lib: lib.write_bytes(b""), id="empty"),
        pytest.param(lambda lib: lib.write_bytes(LIBRARY_BYTES[:-1] + b"x"), id="altered"),
        pytest.param(lambda lib: lib.unlink(), id="missing"),
        pytest.param(lambda lib: simulator._digest_path(lib).unlink(), id="no digest"),
        pytest.param(lambda lib: simulator._digest_path(lib).write_text("zz"), id="bad digest"),
    ],
)
def test_a_damaged_library_is_rebuilt(builds, tmp_path, damage):
    target = tmp_path / "calculator" / "key"
    build_if_needed(target)
    damage(target / simulator._CALCULATOR_SO)
    assert not simulator._intact(target / simulator._CALCULATOR_SO)
    build_if_needed(target)
    assert len(builds) == 2
    assert (target / simulator._CALCULATOR_SO).read_bytes() == LIBRARY_BYTES
    assert simulator._intact(target / simulator._CALCULATOR_SO)


def test_a_failed_build_leaves_the_cache_as_it_was(monkeypatch, tmp_path):
    def failing_build(source_dir, cmake_defines, scratch: Path) -> Path:
        (scratch / "half-written.o").write_bytes(b"x")
        raise RuntimeError("building pypto's calculator failed: no compiler")

    monkeypatch.setattr(simulator, "_cmake_build", failing_build)
    target = tmp_path / "calculator" / "key"
    with pytest.raises(RuntimeError, match="no compiler"):
        build_if_needed(target)
    assert [p.name for p in target.parent.iterdir()] == ["key.lock"]


def test_the_cache_folder_follows_xdg(tmp_path, monkeypatch):
    from ptodsl.runtime.files import cache_dir

    monkeypatch.delenv("PTODSL_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "ptodsl"
    monkeypatch.setenv("PTODSL_CACHE_DIR", str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine"
