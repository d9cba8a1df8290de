"""Golden-file tests of a project's own specs: a pytest plugin, loaded wherever ptodsl is
installed (the `pytest11` entry point).

    def test_softmax_compiles_as_reviewed(pto_golden):
        pto_golden("specs/softmax.pto", dims={"N": 64})

compiles the spec and compares its generated module, plan, lowered IR and torch reference
with `goldens/softmax/{kernel.py.txt,plan.json,lowered.ir.txt,reference.py.txt}` beside the
test file (the `ptodsl_goldens` ini option names another folder, relative to the rootdir).
`pto_golden_text("name.txt", text)` does the same for any text. `pytest --update-goldens`
writes the files from the current output instead: review them as a diff before committing.

Goldens stay inside their folder (a name climbing out of it, or absolute, fails the test),
and the folder inside the rootdir; they are read as bounded regular files and written as
`ptodsl compile -o` writes (atomically, through a link to a file, never into a device or a
FIFO): a bad golden fails its test with the reason, never hangs it or writes elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from ptodsl.frontend.diagnostics import MAX_SPEC_BYTES, visible
from ptodsl.runtime import files

UPDATE_OPTION = "--update-goldens"
FOLDER_INI = "ptodsl_goldens"
MAX_GOLDEN_BYTES = 16 << 20  # a generated module of the largest examples is under 100 KiB


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        UPDATE_OPTION,
        action="store_true",
        help="ptodsl: rewrite golden files from the current output instead of comparing",
    )
    parser.addini(
        FOLDER_INI,
        "ptodsl: the golden files' folder, relative to the rootdir (default: `goldens` "
        "beside each test file)",
        default="",
    )


@pytest.fixture
def pto_golden_text(request: pytest.FixtureRequest) -> Callable[[str, str], None]:
    """pto_golden_text(relative_path, text): compares text with the golden file at that path
    in the goldens folder, or, with --update-goldens, writes it there."""
    update = request.config.getoption(UPDATE_OPTION)
    configured = request.config.getini(FOLDER_INI)
    folder = request.path.parent / "goldens"
    if configured:
        folder = _inside(request.config.rootpath, configured, f"the {FOLDER_INI} ini option")

    def check(relative_path: str, text: str) -> None:
        path = _inside(folder, relative_path, "a golden")
        if update:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                files.write_output(path, text)
                return
            except OSError as error:
                failure = f"cannot write the golden {visible(str(path))}: {visible(str(error))}"
            pytest.fail(failure, pytrace=False)  # outside the except: no chained traceback
        hint = f"run pytest {UPDATE_OPTION} and review the diff"
        assert path.exists(), f"no golden {path}; {hint}"
        golden = _read(path, MAX_GOLDEN_BYTES, "the golden")
        assert text == golden, (
            f"{relative_path} differs from its golden {path}; if the change is intended, {hint}"
        )

    return check


def _inside(folder: Path, relative: str | Path, what: str) -> Path:
    try:
        return files.inside(folder, relative)
    except files.OutsideFolder as outside:
        failure = f"{what}: {visible(str(outside))}"
    pytest.fail(failure, pytrace=False)


def _read(path: Path, limit: int, what: str) -> str:
    try:
        return files.read_text(path, limit)
    except (OSError, ValueError) as error:
        failure = f"cannot read {what}: {visible(str(error))}"
    pytest.fail(failure, pytrace=False)


@pytest.fixture
def pto_golden(
    request: pytest.FixtureRequest, pto_golden_text: Callable[[str, str], None]
) -> Callable[..., None]:
    """pto_golden(spec, dims=None, name=None): the spec's stages against its golden files,
    in a folder named after the spec. `name` is the file name the generated code quotes
    (default: the spec's path relative to the rootdir, so that goldens do not depend on
    where the repository is checked out)."""

    def check(
        spec: str | Path, dims: Mapping[str, int] | None = None, name: str | None = None
    ) -> None:
        # Imported here: pytest loads this plugin in every session of an environment with
        # ptodsl installed, most of which never compile a spec.
        from ptodsl.api import compile as compile_spec
        from ptodsl.ir.forward import format_forward
        from ptodsl.ir.nodes import format_kernel
        from ptodsl.ir.plan import format_plan

        root = request.config.rootpath
        path = Path(spec)
        if not path.is_absolute():
            path = root / path
        if name is None:
            resolved = path.resolve()
            if not resolved.is_relative_to(root.resolve()):
                pytest.fail(
                    f"the spec {visible(str(path))} is outside the rootdir {root}: give "
                    "pto_golden name=, the file name its goldens quote",
                    pytrace=False,
                )
            name = resolved.relative_to(root.resolve()).as_posix()
        text = _read(path, MAX_SPEC_BYTES, "the spec")
        # Golden files hold the default plan: a plan tuned on one machine is not reviewed.
        compiled = compile_spec(text, name=name, dims=dims, tuning=None)
        stages = {
            "kernel.py.txt": compiled.source,
            "plan.json": format_plan(compiled.program),
            "lowered.ir.txt": "\n".join(map(format_kernel, compiled.program.kernels)),
            "forward.txt": format_forward(compiled.program),
            "reference.py.txt": compiled.reference_source,
        }
        for file_name, text in stages.items():
            pto_golden_text(f"{path.stem}/{file_name}", text)

    return check
