"""The `ptodsl` command as a user runs it: stages, files, exit codes, and `check --kernel`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT

from ptodsl.tools.cli import BENCHMARKS, STAGES

KERNELBENCH = ROOT / "examples" / "kernelbench"
ELU = KERNELBENCH / "31_elu.pto"


def ptodsl(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ptodsl", *map(str, args)], capture_output=True, text=True, cwd=cwd
    )


@pytest.mark.parametrize("stage", STAGES)
def test_every_stage_prints(stage):
    result = ptodsl("compile", ELU, "--emit", stage)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()
    if stage == "plan":
        assert json.loads(result.stdout)["kernels"][0]["name"] == "elu"


def test_console_script_is_installed():
    script = Path(sys.executable).parent / "ptodsl"
    result = subprocess.run([script, "--version"], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.startswith("ptodsl ")


def test_compile_writes_output_file(tmp_path):
    out = tmp_path / "elu.py"
    result = ptodsl("compile", ELU, "-o", out)
    assert result.returncode == 0, result.stderr
    assert out.read_text() == ptodsl("compile", ELU).stdout
    assert [p.name for p in tmp_path.iterdir()] == ["elu.py"], "no temporary files left"


def test_output_goes_through_a_symlink_and_keeps_the_files_mode(tmp_path):
    target = tmp_path / "kept.py"
    target.write_text("old\n")
    target.chmod(0o640)
    link = tmp_path / "link.py"
    link.symlink_to(target)
    result = ptodsl("compile", ELU, "-o", link)
    assert result.returncode == 0, result.stderr
    assert link.is_symlink() and link.resolve() == target
    assert target.read_text() == ptodsl("compile", ELU).stdout
    assert target.stat().st_mode & 0o777 == 0o640


def test_a_new_output_gets_the_umasks_mode(tmp_path):
    umask = os.umask(0o027)
    try:
        result = ptodsl("compile", ELU, "-o", tmp_path / "new.py")
    finally:
        os.umask(umask)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "new.py").stat().st_mode & 0o777 == 0o640  # 0666 less 027


def make_fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def make_read_only(path: Path) -> Path:
    path.write_text("precious\n")
    path.chmod(0o444)
    return path


def make_link_loop(path: Path) -> Path:
    path.symlink_to(path.with_name("other"))
    path.with_name("other").symlink_to(path)
    return path


def make_dangling_link(path: Path) -> Path:
    path.symlink_to(path.with_name("missing") / "target.py")
    return path


REFUSED_OUTPUTS = {
    "a FIFO": (make_fifo, "is a FIFO, not a regular file"),
    # an internal error (exit 3) from Path.resolve
    "a link loop": (make_link_loop, "is a symbolic link in a loop"),
    # its target was created, where GNU cp refuses
    "a dangling link": (make_dangling_link, "which does not exist"),
    "a folder": (lambda path: path.mkdir() or path, "is a folder, not a regular file"),
    "a read-only file": (make_read_only, "is read-only"),
}


@pytest.mark.parametrize("case", REFUSED_OUTPUTS)
def test_output_refuses_what_it_does_not_own(tmp_path, case):
    """Nothing but a regular, writable file is replaced (as root, `-o /dev/null` once
    replaced the device with a file): the path is left exactly as it was."""
    make, message = REFUSED_OUTPUTS[case]
    path = make(tmp_path / "out")
    before = path.lstat()
    result = ptodsl("compile", ELU, "-o", path)
    assert result.returncode == 1 and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    after = path.lstat()
    assert (after.st_mode, after.st_ino, after.st_mtime_ns) == (
        before.st_mode,
        before.st_ino,
        before.st_mtime_ns,
    )
    left = {"out", "other"} if case == "a link loop" else {"out"}
    assert {p.name for p in tmp_path.iterdir()} == left, "no temporary files left"


def test_output_paths_that_cannot_be_written_are_one_line_errors(tmp_path):
    spec = tmp_path / "elu.pto"
    spec.write_text(ELU.read_text())
    for path in (spec / "x.py", tmp_path / ("x" * 300 + ".py"), ""):
        result = ptodsl("compile", spec, "-o", path)
        assert result.returncode == 1, (path, result.stderr)
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    # it said ". is a folder"
    assert "an empty path names no file" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elu.pto"]


def test_spec_error_renders_without_traceback_and_writes_nothing(tmp_path):
    spec = tmp_path / "bad.pto"
    spec.write_text("kernel bad\ndims N = 4\ninput x: f32[N]\noutput y: f32[N]\ny = x + z\n")
    out = tmp_path / "bad.py"
    result = ptodsl("compile", spec, "-o", out)
    assert result.returncode == 1
    assert result.stderr.startswith(f"{spec}:5:9: error: unknown name `z`\n")
    assert "Traceback" not in result.stderr
    assert "^" in result.stderr
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.pto"]


def test_compile_refuses_to_overwrite_its_spec(tmp_path):
    spec = tmp_path / "elu.pto"
    spec.write_text(ELU.read_text())
    result = ptodsl("compile", spec, "-o", spec)
    assert result.returncode == 1
    assert "refusing to overwrite" in result.stderr
    assert spec.read_text() == ELU.read_text()


def test_missing_file_and_usage_errors(tmp_path):
    missing = ptodsl("compile", tmp_path / "nope.pto")
    assert missing.returncode == 1 and "cannot read" in missing.stderr
    assert "Traceback" not in missing.stderr
    usage = ptodsl("compile", ELU, "--emit", "nonsense")
    assert usage.returncode == 2
    for seed, why in (("2e16", "'2e16' is not an integer"), ("4294967296", "is outside 0 ..")):
        bad_seed = ptodsl("check", ELU, "--seed", seed)
        assert bad_seed.returncode == 2 and why in bad_seed.stderr, bad_seed.stderr


USAGE_ERRORS = {
    "budget_zero": (("tune", ELU, "--budget", "0"), "argument --budget: 0 is not above 0"),
    "budget_not_a_number": (("tune", ELU, "--budget", "two"), "'two' is not a number"),
    "timeout_zero": (("check", ELU, "--timeout", "0"), "argument --timeout: 0 is not above 0"),
    "timeout_nan": (("coverage", ".", "--timeout", "nan"), "nan is not above 0"),
    "problems_not_a_folder": (("coverage", "no-such-folder"), "no-such-folder is not a folder"),
    "specs_not_a_folder": (("coverage", ".", "--specs", "nope"), "--specs: nope is not a folder"),
    "jobs_zero": (("coverage", ".", "--jobs", "0"), "argument --jobs: 0 is not above 0"),
    "jobs_and_cluster": (
        ("tune", ELU, "--jobs", "2", "--cluster", "tcp://127.0.0.1:8786"),
        "argument --cluster: not allowed with argument --jobs",
    ),
    "cluster_without_address": (
        ("check", ELU, "--cluster"),
        "--cluster: give the scheduler's address, or set DASK_SCHEDULER_ADDRESS",
    ),
    # int() reads full-width digits as 16: a size or seed is written in ASCII digits
    "dim_in_full_width_digits": (
        ("compile", ELU, "--dim", "N=\uff11\uff16"),
        "expected NAME=SIZE (SIZE in digits 0-9)",
    ),
    "seed_in_full_width_digits": (
        ("check", ELU, "--seed", "\uff17"),
        "is not an integer in digits 0-9",
    ),
    "several_specs_with_kernel": (
        ("check", ELU, ELU, "--kernel", ELU),
        "--kernel, --against and --set check one spec",
    ),
}


@pytest.mark.parametrize("case", sorted(USAGE_ERRORS))
def test_bad_options_are_usage_errors(case, tmp_path):
    """Exit 2 (the README's usage error), before any work: a bad option's value."""
    arguments, message = USAGE_ERRORS[case]
    result = ptodsl(*arguments, cwd=tmp_path)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_debug_goes_before_or_after_the_command():
    for arguments in (("--debug", "compile", ELU), ("compile", ELU, "--debug")):
        result = ptodsl(*arguments, "--emit", "ast")
        assert result.returncode == 0, result.stderr


def bash_completions(script: str, words: list[str], cwd: Path) -> list[str]:
    """What bash offers after `words` (the last one being completed) with `script` sourced."""
    program = (
        'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); '
        'COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}; '
        '_shtab_ptodsl ptodsl "${COMP_WORDS[-1]}" "${COMP_WORDS[-2]}"; '
        'printf "%s\\n" "${COMPREPLY[@]}"'
    )
    completion = cwd / "ptodsl.bash"
    completion.write_text(script, encoding="utf-8")
    result = subprocess.run(
        ["bash", "-c", program, "bash", completion, *words],
        capture_output=True,
        text=True,
        cwd=cwd,
    )
    assert result.returncode == 0, result.stderr
    return sorted(result.stdout.split())


def test_bash_completion_offers_commands_options_and_spec_files(tmp_path):
    result = ptodsl("--print-completion", "bash")
    assert result.returncode == 0, result.stderr
    (tmp_path / "specs").mkdir()
    for name in ("relu.pto", "notes.txt"):
        (tmp_path / name).touch()
    assert bash_completions(result.stdout, ["ptodsl", "c"], tmp_path) == [
        "check",
        "compile",
        "coverage",
    ]
    assert bash_completions(result.stdout, ["ptodsl", "check", ""], tmp_path) == [
        "relu.pto",
        "specs",
    ]
    assert "--untuned" in bash_completions(result.stdout, ["ptodsl", "check", "--u"], tmp_path)


@pytest.mark.parametrize("shell", ["zsh", "tcsh"])
def test_completion_scripts_for_other_shells_name_every_command(shell):
    result = ptodsl("--print-completion", shell)
    assert result.returncode == 0, result.stderr
    for command in ("compile", "tune", "check", "coverage"):
        assert command in result.stdout


def test_a_reader_closing_the_pipe_stops_the_command_quietly():
    printer = subprocess.Popen(
        [sys.executable, "-m", "ptodsl", "--print-completion", "bash"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    printer.stdout.close()  # before it writes: its first write meets a closed pipe
    assert printer.wait() == 128 + signal.SIGPIPE
    assert printer.stderr.read() == b""


def test_every_runnable_benchmark_is_a_bench_command():
    runnable = {
        ".".join(path.relative_to(ROOT / "benchmarks").with_suffix("").parts)
        for path in (ROOT / "benchmarks").rglob("*.py")
        if 'if __name__ == "__main__":' in path.read_text(encoding="utf-8")
    }
    assert runnable == set(BENCHMARKS)


@pytest.mark.parametrize("benchmark", ["run", "baselines.verify"])  # a module, a package's
def test_benchmarks_run_from_any_folder(tmp_path, benchmark):
    result = ptodsl("bench", benchmark, "--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: ptodsl bench {benchmark}")


def test_a_benchmarks_usage_error_is_its_exit_status(tmp_path):
    result = ptodsl("bench", "full_shapes", "no_such_example", cwd=tmp_path)
    assert result.returncode == 2
    assert "no example named no_such_example" in result.stderr


def test_coverage_finds_the_repository_specs_from_any_folder(tmp_path):
    """The default --specs is the repository's folder, not one relative to the working
    directory: from elsewhere, an empty problems folder is the only complaint."""
    result = ptodsl("coverage", tmp_path, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert "no numbered problem files" in result.stderr, result.stderr


def test_check_passes_and_reports(tmp_path):
    result = ptodsl("check", KERNELBENCH / "19_relu.pto", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] and report["outputs"][0]["max_abs_error"] == 0.0
    assert report["sim_time_us"] > 0
    assert list(tmp_path.iterdir()) == [], "check leaves nothing in the working directory"
    # Progress goes to stderr as plain lines off a terminal: the golden, then each launch,
    # then each other draw.
    assert result.stderr.splitlines() == [
        "checking relu in pypto SIM: 3 steps",
        "[1/3] golden: the spec's torch reference in float64",
        "[2/3] launch 1 of 1 simulated",
        "[3/3] draw small negative simulated",
    ]


def test_check_fails_a_broken_kernel(tmp_path):
    source = ptodsl("compile", ELU).stdout
    broken = source.replace("- 1.0) * alpha", "- 1.0) * alpha * 1.001")
    assert broken != source
    kernel = tmp_path / "elu_broken.py"
    kernel.write_text(broken)
    result = ptodsl("check", ELU, "--kernel", kernel)
    assert result.returncode == 1, result.stdout
    assert "FAIL" in result.stdout


def test_check_is_not_blind_to_kl_direction(tmp_path):
    """KL(t || p) and KL(p || t) differ; the check must fail the reversed kernel."""
    spec = ROOT / "examples" / "kernelbench" / "98_kl_div_loss.pto"
    reversed_spec = tmp_path / "reversed.pto"
    reversed_spec.write_text(
        spec.read_text().replace(
            "targets * (log(targets) - log(predictions))",
            "predictions * (log(predictions) - log(targets))",
        )
    )
    assert reversed_spec.read_text() != spec.read_text()
    reversed_kernel = tmp_path / "reversed.py"
    compiled = ptodsl("compile", reversed_spec, "-o", reversed_kernel)
    assert compiled.returncode == 0, compiled.stderr
    result = ptodsl("check", spec, "--kernel", reversed_kernel)
    assert result.returncode == 1, result.stdout
    assert "FAIL" in result.stdout


def test_deeply_nested_expression_is_a_clean_error(tmp_path):
    spec = tmp_path / "deep.pto"
    depth = 5000
    spec.write_text(
        "kernel deep\ndims N = 4\ninput x: f32[N]\noutput y: f32[N]\n"
        f"y = {'abs(' * depth}x{')' * depth}\n"
    )
    result = ptodsl("compile", spec)
    assert result.returncode == 1, result.stderr[-500:]
    assert f"{spec}:5:5: error: this expression has 5001 terms" in result.stderr
    assert "Traceback" not in result.stderr


PROBLEMS = ROOT / "tests" / "problems" / "kernelbench"


def test_check_against_a_kernelbench_problem(tmp_path):
    result = ptodsl(
        "check",
        KERNELBENCH / "98_kl_div_loss.pto",
        "--against",
        PROBLEMS / "98_kl_div_loss.py",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "result: PASS" in result.stdout


def test_check_against_rejects_a_spec_that_disagrees_with_the_problem(tmp_path):
    spec = tmp_path / "relu_wrong.pto"
    spec.write_text(
        (KERNELBENCH / "20_leaky_relu.pto").read_text().replace("dim = 16384", "dim = 8192")
    )
    result = ptodsl("check", spec, "--against", PROBLEMS / "20_leaky_relu.py")
    assert result.returncode == 1
    assert "input `x`: the problem gives torch.float32 [16, 16384]" in result.stderr
    assert "Traceback" not in result.stderr


SMALL_SPEC = "kernel k\ndims N = 4\ninput x: f32[N]\noutput y: f32[N]\ny = x + {tail}\n"


def test_a_byte_order_mark_is_not_text(tmp_path):
    spec = tmp_path / "bom.pto"
    spec.write_bytes(b"\xef\xbb\xbf" + SMALL_SPEC.format(tail="1.0").encode())
    assert ptodsl("compile", spec).returncode == 0
    spec.write_bytes(b"\xef\xbb\xbfkernel 1k\n")
    result = ptodsl("compile", spec)
    assert result.returncode == 1
    assert result.stderr.startswith(f"{spec}:1:8: error:"), result.stderr  # as editors count


def test_invalid_utf8_is_a_located_error(tmp_path):
    spec = tmp_path / "latin1.pto"
    spec.write_bytes(SMALL_SPEC.format(tail="1.0").encode().replace(b"1.0", b"\xff1.0"))
    result = ptodsl("compile", spec)
    assert result.returncode == 1
    assert result.stderr == f"{spec}:5:9: error: invalid UTF-8 (byte 0xff): a spec is UTF-8 text\n"
    spec.write_bytes(b"kernel k\n\xff\xfe\n")  # binary from the second line on
    assert ptodsl("compile", spec).stderr.startswith(f"{spec}:2:1: error: invalid UTF-8")


def test_control_characters_never_reach_the_terminal(tmp_path):
    """ESC, BEL and NUL in a spec (or a newline in its file name) are shown as their
    Unicode pictures, one column each, so that the caret stays under them."""
    folder = tmp_path / "odd\nname"
    folder.mkdir()
    spec = folder / "k.pto"
    spec.write_text(SMALL_SPEC.format(tail="\x1b[31m\x07\x00"))
    result = ptodsl("compile", spec)
    assert result.returncode == 1
    assert not set("\x1b\x07\x00") & set(result.stderr)
    header, location, _, line, carets = result.stderr.splitlines()[:5]
    assert header.startswith(str(spec).replace("\n", "\u240a") + ":5:9: error:")
    assert line.endswith("y = x + \u241b[31m\u2407\u2400")
    assert carets.index("^") == line.index("\u241b")


def test_bidi_and_c1_controls_never_reach_the_terminal(tmp_path):
    """A right-to-left override (U+202E), an isolate and a C1 CSI (0x9b) in a spec are shown
    as the replacement character, one column each: a terminal neither reorders the line nor
    runs a command (they were echoed raw)."""
    spec = tmp_path / "k.pto"
    spec.write_text(SMALL_SPEC.format(tail="\u202e\u2066\x9b1.0"), encoding="utf-8")
    result = ptodsl("compile", spec)
    assert result.returncode == 1
    assert not set("\u202e\u2066\x9b") & set(result.stderr)
    _, _, _, line, carets = result.stderr.splitlines()[:5]
    assert line.endswith("y = x + \ufffd\ufffd\ufffd1.0")
    assert carets.index("^") == line.index("\ufffd")


def test_a_spec_file_is_read_with_a_bound(tmp_path):
    """`ptodsl compile /dev/zero` once read 6 GB in 7 s: a spec is read up to 1 MiB."""
    huge = tmp_path / "huge.pto"
    with huge.open("wb") as stream:
        stream.truncate(64 << 20)  # 64 MiB of zeros, sparse on disk
    result = ptodsl("compile", huge)
    assert result.returncode == 1
    assert result.stderr == f"ptodsl: error: {huge} is larger than 1024 KiB: not a spec\n"


def _default_interrupt() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_stopped_check_leaves_no_worker_and_no_folder(tmp_path, stop):
    """`timeout` or a closed terminal stops `ptodsl check` mid-simulation: its simulator
    worker is killed with it and its temporary folders are removed, as for Ctrl-C."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    check = subprocess.Popen(
        [sys.executable, "-m", "ptodsl", "check", str(KERNELBENCH / "19_relu.pto")],
        env={**os.environ, "TMPDIR": str(scratch)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        # as from a terminal: a suite started in the background (`cmd &` without job
        # control) ignores SIGINT, and the check would inherit that and run to the end
        preexec_fn=_default_interrupt,
    )
    deadline = time.monotonic() + 120
    while not any(p.name.startswith("ptodsl-sim-") for p in scratch.iterdir()):
        assert check.poll() is None and time.monotonic() < deadline, "no worker started"
        time.sleep(0.05)
    time.sleep(0.5)  # the worker is running pypto
    check.send_signal(stop)
    _, stderr = check.communicate(timeout=60)
    assert check.returncode == 128 + stop or check.returncode == 130, stderr
    assert "Traceback" not in stderr
    # torch's own persistent cache, which `import torch._dynamo` creates in TMPDIR for any
    # torch program (TORCHINDUCTOR_CACHE_DIR moves it): not a folder of the check's
    left = [p for p in scratch.iterdir() if not p.name.startswith("torchinductor_")]
    assert left == []
    workers = subprocess.run(["pgrep", "-f", str(scratch)], capture_output=True, text=True)
    assert workers.stdout == "", "a worker outlived its check"


@pytest.mark.parametrize("benchmark", ["run", "full_shapes", "bounds", "interpret", "schedule"])
def test_every_benchmark_prints_its_help(benchmark):
    result = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{benchmark}", "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 0 and result.stdout.startswith("usage: "), result.stderr


def test_coverage_and_tune_print_json(tmp_path):
    problems, specs = tmp_path / "problems", tmp_path / "specs"
    problems.mkdir()
    specs.mkdir()
    (problems / "19_relu.py").write_text("# no spec pairs with it\n")
    result = ptodsl("coverage", problems, "--specs", specs, "--json", "--only", "19")
    report = json.loads(result.stdout)  # a named problem without a spec fails the run
    assert result.returncode == 1 and report["passed"] == 0 and report["judged"] == 1
    (row,) = report["rows"]
    assert row["number"] == 19 and row["verdict"].startswith("NO SPEC")
    env = {**os.environ, "PTODSL_TUNING_DIR": str(tmp_path / "tuning")}
    relu = KERNELBENCH / "19_relu.pto"
    tuned = subprocess.run(
        [
            sys.executable,
            "-m",
            "ptodsl",
            "tune",
            relu,
            "--budget",
            "1",
            "--no-check",
            "--json",
            "--dim",
            "batch_size=2",
            "--dim",
            "dim=64",
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    outcome = json.loads(tuned.stdout)
    (plan,) = outcome["plans"]
    assert plan["chosen"] and plan["sim_time_us"] > 0 and outcome["default_kept"]
    listed = subprocess.run(
        [sys.executable, "-m", "ptodsl", "tune", "--list", "--json"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert json.loads(listed.stdout) == []  # the default kept: nothing stored


def test_several_specs_are_checked_side_by_side_and_reported_in_order(tmp_path):
    relu = KERNELBENCH / "19_relu.pto"
    result = ptodsl("check", ELU, relu, "--jobs", "2", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    reports = json.loads(result.stdout)
    assert [r["kernel"] for r in reports] == ["elu", "relu"] and all(r["ok"] for r in reports)
    # Progress: a line per spec as it finishes, in whichever order that is.
    finished = [line.split("] ")[1] for line in result.stderr.splitlines()[1:]]
    assert sorted(finished) == ["elu: PASS", "relu: PASS"]
