"""Golden-file tests of a project's own specs: a pytest plugin, loaded wherever ptodsl is
installed (the `pytest11` entry point).

    def test_softmax_compiles_as_reviewed(pto_golden):
        pto_golden("specs/softmax.pto", dims={"N": 64})

compiles the spec and compares its generated module, plan, lowered IR and torch reference
with `goldens/softmax/{kernel.py.txt,plan.json,lowered.ir.txt,reference.py.txt}` beside the
test file (the `ptodsl_goldens` ini option names another folder, relative to the rootdir).
`pto_golden_text("name.txt", text)` does the same for any text. `pytest --update-goldens`
writes the files from the current output instead: review them as a diff before committing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

UPDATE_OPTION = "--update-goldens"
FOLDER_INI = "ptodsl_goldens"


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
    folder = request.config.rootpath / configured if configured else request.path.parent / "goldens"

    def check(relative_path: str, text: str) -> None:
        path = folder / relative_path
        if update:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            return
        hint = f"run pytest {UPDATE_OPTION} and review the diff"
        assert path.exists(), f"no golden {path}; {hint}"
        assert text == path.read_text(encoding="utf-8"), (
            f"{relative_path} differs from its golden {path}; if the change is intended, {hint}"
        )

    return check


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

        path = Path(spec)
        if not path.is_absolute():
            path = request.config.rootpath / path
        if name is None:
            name = path.resolve().relative_to(request.config.rootpath.resolve()).as_posix()
        # Golden files hold the default plan: a plan tuned on one machine is not reviewed.
        compiled = compile_spec(path.read_text(encoding="utf-8"), name=name, dims=dims, tuning=None)
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
