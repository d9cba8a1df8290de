"""The tuning cache is ptodsl's own file, but a user (or a crash, or another version) may
leave anything there: an entry that does not hold what `tune` writes is ignored with a
warning naming the file, and compile emits the default plan, never a broken kernel or an
internal error."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT

import ptodsl
from ptodsl.ir.target import PYPTO_0_2_0
from ptodsl.tools import tuning_cache

SPEC = (ROOT / "examples" / "kernelbench" / "19_relu.pto").read_text(encoding="utf-8")


@pytest.fixture
def entry(tmp_path, monkeypatch):
    """Stores a checked entry for SPEC; returns a function that rewrites its JSON."""
    monkeypatch.setenv("PTODSL_TUNING_DIR", str(tmp_path))
    monkeypatch.setattr(tuning_cache, "_WARNED", set())
    tuning_cache.store_record(SPEC, None, PYPTO_0_2_0, {"tuning": {"tile_elements": 4096}}, True)
    (path,) = tmp_path.iterdir()

    def rewrite(transform) -> None:
        record = json.loads(path.read_text())
        path.write_text(transform(record) if callable(transform) else transform)

    rewrite.path = path
    return rewrite


def default_source() -> str:
    return ptodsl.compile(SPEC, "relu.pto", tuning=None).source


def test_a_good_entry_changes_the_plan(entry):
    tuned = ptodsl.compile(SPEC, "relu.pto")
    assert "tile_elements=4096" in tuned.plan_origin and tuned.source != default_source()


def json_of(choices):
    return lambda record: json.dumps({**record, "tuning": choices})


BAD_ENTRIES = {
    "a fractional tile": json_of({"tile_elements": 4096.5}),
    "a NaN tile": lambda record: json.dumps(record).replace("4096", "NaN"),
    "a float last axis": json_of({"last_axis_tile": 64.0}),
    "a negative count": json_of({"loop_count": -2}),
    "a bool count": json_of({"matmul_chunks": True}),
    "a string": json_of({"tile_elements": "4096"}),
    "a list": json_of({"tile_elements": [4096]}),
    "minus infinity": lambda record: json.dumps(record).replace("4096", "-Infinity"),
    "an unknown variance": json_of({"variance": "three_pass"}),
    "an unknown choice": json_of({"tile_elemnts": 4096}),
    "tuning not an object": json_of([4096]),
    "a record not an object": "[1, 2]",
    "truncated JSON": '{"tuning": {"tile_elements": 40',
    "deeply nested JSON": "[" * 100000 + "]" * 100000,
    # type-valid, but no plan tune makes: they were stamped "Tuned"
    "a one-element tile": json_of({"tile_elements": 1}),
    "a 10^21-element tile": json_of({"tile_elements": 10**21}),
    "a 4-byte last axis": json_of({"last_axis_tile": 1}),
    "10^26 loop iterations": json_of({"loop_count": 10**26}),
    "a plan slower than the default": lambda record: json.dumps(
        {**record, "sim_time_us": 42.0, "default_sim_time_us": 1.0}
    ),
}


@pytest.mark.parametrize("case", BAD_ENTRIES)
def test_a_bad_entry_is_ignored_with_a_warning(entry, capsys, case):
    entry(BAD_ENTRIES[case])
    compiled = ptodsl.compile(SPEC, "relu.pto")
    assert compiled.source == default_source()
    warning = capsys.readouterr().err
    assert f"ignoring tuning cache entry {entry.path}" in warning, warning


def test_a_cache_folder_that_is_a_file_is_no_cache(tmp_path, monkeypatch):
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("")
    monkeypatch.setenv("PTODSL_TUNING_DIR", str(blocker))
    assert ptodsl.compile(SPEC, "relu.pto").source == default_source()


def test_tune_refuses_a_cache_folder_it_cannot_write_before_measuring(tmp_path):
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("")
    spec = ROOT / "examples" / "kernelbench" / "19_relu.pto"
    result = subprocess.run(
        [sys.executable, "-m", "ptodsl", "tune", str(spec), "--budget", "2"],
        capture_output=True,
        text=True,
        env={**os.environ, "PTODSL_TUNING_DIR": str(blocker)},
        timeout=60,  # measuring even one plan takes longer than refusing
    )
    assert result.returncode == 1
    assert f"cannot write in {blocker}: it is a regular file, not a folder" in result.stderr
    assert "[" not in result.stderr, "no progress: nothing was measured"


def test_a_tuned_module_says_so(entry):
    tuned = ptodsl.compile(SPEC, "relu.pto").source
    assert "Tuned: tile_elements=4096 (`ptodsl tune`'s plan choices; compile with" in tuned
    assert "Tuned:" not in default_source()


def cli(*args, env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ptodsl", *map(str, args)], capture_output=True, text=True, env=env
    )


def test_tune_list_shows_an_entrys_control_characters_as_pictures(tmp_path, monkeypatch):
    """An entry's spec and dims are whatever its file says: ESC and BEL (which set the
    terminal's title, clear the screen) are printed as ␛ and ␇ (they were printed raw)."""
    folder = tmp_path / "tuning"
    monkeypatch.setenv("PTODSL_TUNING_DIR", str(folder))
    record = {"tuning": {}, "spec": "\x1b]0;owned\x07\x1b[2J", "dims": {"n\x1b": 1}}
    tuning_cache.store_record(SPEC, None, PYPTO_0_2_0, record, True)
    listed = cli("tune", "--list", env={**os.environ, "PTODSL_TUNING_DIR": str(folder)})
    assert listed.returncode == 0, listed.stderr
    assert "\x1b" not in listed.stdout and "\x07" not in listed.stdout
    assert "\u241b]0;owned\u2407\u241b[2J" in listed.stdout


def test_tune_list_shows_an_entry_that_is_a_fifo_as_unreadable(tmp_path):
    folder = tmp_path / "tuning"
    folder.mkdir()
    os.mkfifo(folder / f"{'0' * 24}.json")  # named as tune names its entries
    env = {**os.environ, "PTODSL_TUNING_DIR": str(folder)}
    listed = subprocess.run(
        [sys.executable, "-m", "ptodsl", "tune", "--list"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert listed.returncode == 0, listed.stderr
    assert "| unreadable   |" in listed.stdout and "0" * 24 + ".json" in listed.stdout


def test_tune_lists_and_clears_only_its_own_entries(tmp_path, monkeypatch):
    folder = tmp_path / "tuning"
    monkeypatch.setenv("PTODSL_TUNING_DIR", str(folder))
    env = {**os.environ, "PTODSL_TUNING_DIR": str(folder)}
    relu, elu = (ROOT / "examples" / "kernelbench" / f"{n}.pto" for n in ("19_relu", "31_elu"))
    for spec, dims in ((relu, None), (elu, {"dim": 64})):
        record = {"tuning": {"last_axis_tile": 64}, "spec": spec.name, "dims": dims or {}}
        tuning_cache.store_record(spec.read_text(), dims, PYPTO_0_2_0, record, True)
    (folder / "notes.json").write_text("{}")  # not tune's: never listed, never removed
    listed = cli("tune", "--list", env=env)
    assert listed.returncode == 0, listed.stderr
    assert "stored plans in" in listed.stdout and ": 2\n" in listed.stdout
    assert "| 19_relu.pto |" in listed.stdout and "| 31_elu.pto  | dim=64 |" in listed.stdout
    assert "notes.json" not in listed.stdout
    # --clear SPEC at other dims removes nothing; at its dims, that entry only
    assert cli("tune", "--clear", elu, env=env).stdout == "removed 0 stored plans\n"
    cleared = cli("tune", "--clear", elu, "--dim", "dim=64", env=env)
    assert cleared.stdout == "removed 1 stored plan\n", cleared.stderr
    assert "31_elu.pto" not in cli("tune", "--list", env=env).stdout
    assert cli("tune", "--clear", env=env).stdout == "removed 1 stored plan\n"
    assert sorted(p.name for p in folder.iterdir()) == ["notes.json"]
    usage = cli("tune", env=env)
    assert usage.returncode == 2 and "give a spec (or --list, or --clear)" in usage.stderr
    both = cli("tune", "--list", "--clear", env=env)
    assert both.returncode == 2 and "not allowed with" in both.stderr
