"""Shared test fixtures: golden files and the examples."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType

import attrs
from hypothesis import settings

from ptodsl.checking.coverage import SCALED_FILE, by_number, problem_number, read_scaled
from ptodsl.checking.problems import Resize, rewritten_problem
from ptodsl.frontend.diagnostics import Source
from ptodsl.ir.target import PYPTO_0_2_0
from ptodsl.pipeline import lower

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES_DIR = ROOT / "examples"
EXAMPLES = sorted(EXAMPLES_DIR.rglob("*.pto"))
EXAMPLE_BY_STEM = {path.stem: path for path in EXAMPLES}
# A target whose tile limits are tiny: kernels loop (with tails, partial results) at sizes
# the simulator checks in seconds.
TINY_TILES = attrs.evolve(PYPTO_0_2_0, max_tile_elements=512, max_auto_tiles=6)
GOLDENS = Path(__file__).resolve().parent / "goldens"

# Examples too large for `ptodsl check` in CI on 2 cores (minutes and >10 GB each at their
# full KernelBench shapes): CI checks these sizes; `ptodsl bench full_shapes` checks
# the full ones. Their goldens are at full size. The loops such shapes need are checked at
# small sizes in test_loops_in_sim.py.
# The patterns interpreter mode is shown on (tests/test_interpret.py, benchmarks/interpret.py):
# elementwise, softmax, a loss with a 0-d output, a norm with weights, a matmul, a K-split
# matmul.
INTERPRETER_PATTERNS = [
    "31_elu",
    "23_softmax",
    "94_mse_loss",
    "33_batch_norm",
    "1_square_matmul",
    "6_matmul_large_k",
]
# The sizes CI checks KernelBench specs at: the tables beside the specs (`coverage
# --scaled`), each entry a problem's constants set by name. CI_DIMS[stem] is the dims they
# bind, read off the resized problem's shapes as `check --set` binds them.
SCALED_LEVELS = {
    EXAMPLES_DIR / "kernelbench": ROOT / "tests" / "problems" / "kernelbench",
    EXAMPLES_DIR / "kernelbench-level2": ROOT / "tests" / "problems" / "kernelbench-level2",
    EXAMPLES_DIR / "kernelbench-level3": ROOT / "tests" / "problems" / "kernelbench-level3",
}


def _scaled_tables() -> dict[str, tuple[dict[str, str], Path]]:
    tables = {}
    for specs, problems in SCALED_LEVELS.items():
        problem_by_number = {n: paths[0] for n, paths in by_number(problems.glob("*.py")).items()}
        for stem, constants in read_scaled(specs / SCALED_FILE, specs).items():
            tables[stem] = (constants, problem_by_number[problem_number(Path(stem))])
    return tables


CI_SCALED = _scaled_tables()  # spec stem -> (the problem's constants set, the problem file)


def ci_resize(stem: str) -> Resize:
    """How CI resizes the problem of the spec `stem` (`check --set`)."""
    return Resize(constants=CI_SCALED[stem][0])


class _BoundDims(Mapping[str, dict[str, int]]):
    """Spec stem -> its CI dims, bound from the resized problem the first time asked (in
    this process: the problem files are our own)."""

    def __init__(self) -> None:
        self._bound: dict[str, dict[str, int]] = {}

    def __getitem__(self, stem: str) -> dict[str, int]:
        if stem not in self._bound:
            constants, problem = CI_SCALED[stem]
            self._bound[stem] = _bind(EXAMPLE_BY_STEM[stem], problem, constants)
        return self._bound[stem]

    def __iter__(self) -> Iterator[str]:
        return iter(CI_SCALED)

    def __len__(self) -> int:
        return len(CI_SCALED)


def _bind(spec: Path, problem: Path, constants: dict[str, str]) -> dict[str, int]:
    from ptodsl.checking import _problem_worker
    from ptodsl.checking.problem_dims import bound_dims
    from ptodsl.checking.problems import ProblemRun

    request = {
        "problem": str(problem), "seed": 0, "sizes": {}, "constants": constants, "model_new": None
    }  # fmt: skip
    given = _problem_worker.run(request, [], [])
    run = ProblemRun(
        init_values=given["init_values"],
        inputs=given["inputs"],
        parameters=[],
        expected=None,
        scaled=given["scaled"],
        shapes=given["shapes"],
    )
    lowered = lower(Source(spec.read_text(encoding="utf-8"), spec.name), until="check")
    dims, _ = bound_dims(lowered.syntax, lowered.checked, run, f"problem {problem}")
    return dims


CI_DIMS = _BoundDims()
# Examples ptodsl refuses at their full shape, with what the refusal says: the example tests
# compile them at their CI dims, and test_examples checks that the refusal stands (a fix
# turns that test red, to take the example off this list).
FULL_SHAPE_REFUSED = {
    # the attention scores of 2 images x 4 heads x 16384 x 16384 pixels: 2^31 elements, one
    # more than a PyPTO tensor holds
    "31_VisionAttention": "more than PyPTO's 2147483647 elements",
}


def scaled_problem(problem: Path, stem: str) -> ModuleType:
    """The problem file run with its constants set as CI sets them for the spec `stem`
    (`check --set`)."""
    tree, _ = rewritten_problem(problem, problem.read_text("utf-8"), ci_resize(stem).constants)
    module = ModuleType(f"scaled_{stem}")
    exec(compile(tree, str(problem), "exec"), module.__dict__)  # noqa: S102 - our own problem
    return module


def seeded_drop_in(spec: Path, problem: Path, seed: int, training: bool = True):
    """KernelBench's protocol at the CI dims: `torch.manual_seed(s); Model(*init)`, then
    `torch.manual_seed(s); ModelNew(*init)`, no weights copied, both run on the same inputs
    (ModelNew in pypto's SIM, or its interpreter under AIKG_PYPTO_RUN_MODE=1). Returns the
    two models and their outputs."""
    import torch

    import ptodsl

    text = spec.read_text(encoding="utf-8")
    compiled = ptodsl.compile(text, name=spec.name, dims=CI_DIMS[spec.stem], tuning=None)
    module = scaled_problem(problem, spec.stem)
    init = module.get_init_inputs()
    torch.manual_seed(seed)
    model = module.Model(*init).train(training)
    torch.manual_seed(seed)
    model_new = compiled.ModelNew(*init).train(training)
    inputs = module.get_inputs()
    with torch.no_grad():
        return model, model_new, model(*inputs), model_new(*inputs)


def example_dims(path: Path) -> dict[str, int] | None:
    """The dims the example tests compile `path` at: its full shape, unless ptodsl refuses
    that (FULL_SHAPE_REFUSED)."""
    return CI_DIMS[path.stem] if path.stem in FULL_SHAPE_REFUSED else None


def ruff_check(path: Path) -> subprocess.CompletedProcess:
    """`ruff check` of generated code with the project's rules, whatever the cwd's config."""
    return subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--isolated", "--select", "E,F,W,I,B,UP"]
        + ["--line-length", "100", str(path)],
        capture_output=True,
        text=True,
    )


def pytest_configure(config):
    # A plan stored by `ptodsl tune` on this machine would change what compile emits: the
    # tests compile with an empty tuning cache of their own.
    os.environ["PTODSL_TUNING_DIR"] = tempfile.mkdtemp(prefix="ptodsl-test-tuning-")


def pytest_unconfigure(config):
    shutil.rmtree(os.environ.pop("PTODSL_TUNING_DIR"), ignore_errors=True)


# Hypothesis profiles (tests/test_fuzz.py, tests/test_random_specs.py): "ci" is the default,
# deterministic and quick; PTODSL_FUZZ_PROFILE=long runs a long randomized fuzzing session.
settings.register_profile("ci", max_examples=150, deadline=None, derandomize=True)
settings.register_profile("long", max_examples=180_000, deadline=None)
settings.load_profile(os.environ.get("PTODSL_FUZZ_PROFILE", "ci"))
