"""Every environment variable ptodsl reads is read in one place (`ptodsl.runtime.settings`) and a
value it cannot use is refused by name: by the API with SettingError, by the command line
with exit status 1 before anything runs."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import ROOT

from ptodsl.runtime import settings
from ptodsl.runtime.settings import SettingError

ELU = ROOT / "examples" / "kernelbench" / "31_elu.pto"

BAD = [
    ("PTODSL_SIM", "fast", "PTODSL_SIM='fast': unset it"),
    ("PTODSL_LAUNCH_TIMEOUT", "soon", "PTODSL_LAUNCH_TIMEOUT='soon': a number of seconds"),
    ("PTODSL_LAUNCH_TIMEOUT", "-5", "PTODSL_LAUNCH_TIMEOUT='-5': a number of seconds"),
    ("PTODSL_LAUNCH_TIMEOUT", "inf", "PTODSL_LAUNCH_TIMEOUT='inf': a number of seconds"),
    ("PTODSL_LAUNCHES_IN_FLIGHT", "0", "PTODSL_LAUNCHES_IN_FLIGHT='0': a number of launches"),
    ("PTODSL_LAUNCHES_IN_FLIGHT", "１６", "PTODSL_LAUNCHES_IN_FLIGHT='１６': a number"),
    ("PTODSL_WORKER_PARENT", "me", "PTODSL_WORKER_PARENT='me': a process id"),
]


@pytest.mark.parametrize(("variable", "value", "message"), BAD)
def test_a_value_ptodsl_cannot_use_is_refused_by_name(variable, value, message):
    with pytest.raises(SettingError, match=message):
        settings.from_environment({variable: value})


@pytest.mark.parametrize(("variable", "value", "message"), BAD[:2])
def test_the_command_line_refuses_it_before_anything_runs(variable, value, message):
    result = subprocess.run(
        [sys.executable, "-m", "ptodsl", "check", str(ELU)],
        capture_output=True,
        text=True,
        env={**os.environ, variable: value},
    )
    assert result.returncode == 1
    assert result.stderr.startswith(f"ptodsl: error: {message}")
    assert "simulated" not in result.stderr


def test_the_settings_read_what_the_environment_says(tmp_path):
    read = settings.from_environment(
        {
            "PTODSL_CACHE_DIR": str(tmp_path / "cache"),
            "PTODSL_SIM": "cost",
            "PTODSL_TRACE": str(tmp_path / "trace"),
            "PTODSL_LAUNCH_TIMEOUT": "12.5",
            "PTODSL_LAUNCHES_IN_FLIGHT": "3",
            "PTODSL_LAUNCH_MEMORY": "1073741824",
            "PTODSL_KEEP_SIM_DIR": "1",
            "DASK_SCHEDULER_ADDRESS": "tcp://10.0.0.1:8786",
        }
    )
    assert read == settings.Settings(
        cache_dir=tmp_path / "cache",
        tuning_dir=tmp_path / "cache" / "tuning",
        cluster="tcp://10.0.0.1:8786",
        sim_mode="cost",
        trace_dir=tmp_path / "trace",
        launch_timeout=12.5,
        launches_in_flight=3,
        launch_memory=float(1 << 30),
        keep_sim_dir=True,
        worker_parent=None,
    )
    defaults = settings.from_environment({})
    assert (defaults.sim_mode, defaults.trace_dir, defaults.launches_in_flight) == (
        "interpret",
        None,
        1,
    )
    assert defaults.launch_timeout == settings.DEFAULT_TIMEOUT_S


def test_no_other_module_reads_the_environment():
    """Modules pass the environment on to workers, and set what a worker reads; reading a
    variable is this one's (the generated module's own two are its own)."""
    readers = []
    modules = sorted((ROOT / "ptodsl").rglob("*.py"))
    assert len(modules) > 40  # every layer's folder
    for module in modules:
        text = module.read_text(encoding="utf-8")
        if module.name not in ("settings.py", "codegen.py") and (
            "environ.get(" in text or "getenv(" in text or 'environ["PTODSL' in text
        ):
            readers.append(module.name)
    assert readers == []


def test_the_settings_read_exactly_the_variables_they_list():
    class Recording(dict):
        def get(self, key, default=None):
            read.add(key)
            return super().get(key, default)

    read: set[str] = set()
    settings.from_environment(Recording())
    assert read == set(settings.VARIABLES)


ENV_WORKER = """import json, os, sys
from pathlib import Path
names = ("PTODSL_CACHE_DIR", "PTODSL_TUNING_DIR", "PTODSL_TRACE", "PTODSL_KEEP_SIM_DIR")
seen = {name: os.environ.get(name) for name in names}
(Path(sys.argv[1]) / "seen.json").write_text(json.dumps(seen))
"""


def test_the_settings_a_command_runs_under_reach_its_workers(tmp_path, monkeypatch):
    """What the command line or the API chose, not what the environment says, is what
    everything below it and its workers see (a setting left unset is unset there too)."""
    import json

    import attrs

    from ptodsl.runtime import files, workers

    monkeypatch.setenv("PTODSL_CACHE_DIR", str(tmp_path / "from-environment"))
    monkeypatch.setenv("PTODSL_TRACE", str(tmp_path / "traces"))
    chosen = attrs.evolve(
        settings.read(),
        cache_dir=tmp_path / "chosen",
        tuning_dir=tmp_path / "chosen" / "plans",
        trace_dir=None,
        keep_sim_dir=True,
    )
    package = tmp_path / "package"
    package.mkdir()
    (package / "env_worker.py").write_text(ENV_WORKER, encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(package), *sys.path]))
    work = tmp_path / "work"
    work.mkdir()
    with settings.active(chosen):
        assert files.cache_dir() == tmp_path / "chosen"
        assert files.tuning_dir() == tmp_path / "chosen" / "plans"
        assert workers.run_worker("env_worker", work, timeout=60) == 0
    assert json.loads((work / "seen.json").read_text()) == {
        "PTODSL_CACHE_DIR": str(tmp_path / "chosen"),
        "PTODSL_TUNING_DIR": str(tmp_path / "chosen" / "plans"),
        "PTODSL_TRACE": None,
        "PTODSL_KEEP_SIM_DIR": "1",
    }
    assert settings.current().cache_dir == tmp_path / "from-environment"  # after the block


def test_the_api_runs_a_check_under_the_settings_it_is_given(tmp_path, monkeypatch):
    import attrs

    import ptodsl
    from ptodsl.checking import check

    seen = []
    monkeypatch.setattr(check, "run_check", lambda *args, **kwargs: seen.append(settings.current()))
    chosen = attrs.evolve(settings.read(), cache_dir=tmp_path / "api-cache")
    ptodsl.check(ptodsl.compile(ELU), settings=chosen)
    assert seen == [chosen]
    assert (tmp_path / "api-cache").is_dir()  # the run's folders were checked there
