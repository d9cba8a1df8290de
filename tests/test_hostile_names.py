"""Spec names become Python names in the generated module: names that would shadow or break
anything are located errors, and no spec text or file name can add code to the module."""

from __future__ import annotations

import ast
import math

import pytest
from conftest import TINY_TILES, ruff_check

import ptodsl
from ptodsl.checking.check import run_check
from ptodsl.frontend.diagnostics import SpecError

HOSTILE = [
    # Python keywords and soft keywords
    "class", "lambda", "None", "True", "def", "import", "return", "yield", "match", "case",
    "type", "_",
    # builtins
    "print", "open", "eval", "exec", "__import__", "len", "float", "object", "compile",
    # dunders
    "__init__", "__class__", "__name__", "__builtins__",
    # the generated module's imports and helpers
    "pypto", "torch", "os", "math", "functools", "importlib", "_expect", "_run_mode",
    "ModelNew", "self", "super", "kernel",
    # names ptodsl generates (`ir.generated_name`)
    "_make_k_kernel", "_k_kernel", "_kernel_x", "_chunk_x", "_tail_x", "_scalar0", "_t0", "_r1",
    "_parts_x", "_operand_x",
]  # fmt: skip
# Non-ASCII look-alikes never lex as names: Cyrillic a/o/e, fullwidth x, dotless i.
LOOK_ALIKES = ["\u0430", "x\u043e", "\u0435ps", "\uff58", "\u0131", "x\u200b"]

TEMPLATES = {
    "dim": "kernel k\ndims {n} = 4\ninput x: f32[4]\noutput y: f32[4]\ny = x\n",
    "param": "kernel k\nparam {n}: f32 = 1.0\ninput x: f32[4]\noutput y: f32[4]\ny = x\n",
    "int_param": "kernel k\nparam {n}: int = 1\ninput x: f32[4]\noutput y: f32[4]\ny = x\n",
    "input": "kernel k\ninput {n}: f32[4]\noutput y: f32[4]\ny = {n}\n",
    "scalar_input": "kernel k\ninput {n}: f32\ninput x: f32[4]\noutput y: f32[4]\ny = x\n",
    "weight": "kernel k\nweight {n}: f32[4] = ones\ninput x: f32[4]\noutput y: f32[4]\ny = x\n",
    "output": "kernel k\ninput x: f32[4]\noutput {n}: f32[4]\n{n} = x\n",
    "let": "kernel k\ninput x: f32[4]\noutput y: f32[4]\nlet {n} = x\ny = {n}\n",
}


def name_position(text: str, name: str) -> tuple[int, int]:
    """Line and column of the name's first declaration (after `kernel k`)."""
    for number, line in enumerate(text.split("\n"), 1):
        if number > 1 and name in line:
            return number, line.index(name) + 1
    raise AssertionError(name)


@pytest.mark.parametrize("kind", sorted(TEMPLATES))
@pytest.mark.parametrize("name", HOSTILE + LOOK_ALIKES)
def test_hostile_name_is_a_located_error(kind, name):
    text = TEMPLATES[kind].format(n=name)
    with pytest.raises(SpecError) as raised:
        ptodsl.compile(text, name="hostile.pto")
    error = raised.value
    # At the name's declaration; a grammar keyword (`kernel`) may fail where it is used.
    line = text.split("\n")[error.span.line - 1]
    starts = [i for i in range(len(line)) if line.startswith(name, i)]
    assert any(s < error.span.column <= s + len(name) for s in starts), error.render()
    assert error.span.line >= name_position(text, name)[0], error.render()
    assert "hostile.pto:" in error.render() and "error:" in error.render()


LOOPED = """kernel k
dims i = 4096, offset = 16384
param i2: f32 = 2.0
input x: f32[i, offset]
output y: f32[i]
y = sum(x * i2, axis=1)
"""


def test_loop_variables_give_way_to_the_specs_names(tmp_path):
    """Einsum-style names (`i`, `j`, `l`) are the user's: the loop's variables take others."""
    source = ptodsl.compile(LOOPED, name="looped.pto").source
    assert 'for i3 in pypto.loop(0, 2, 1, name="k_phase0", idx_name="i3"):' in source
    assert "offset2 = i3 * 2048" in source
    assert "i, offset = 4096, 16384" in source and "_chunk_x * i2" in source
    path = tmp_path / "looped.py"
    path.write_text(source)
    assert ruff_check(path).returncode == 0


def test_ambiguous_names_are_kept_and_the_module_still_passes_ruff(tmp_path):
    text = "kernel k\ndims l = 4, O = 8\nparam I: f32 = 2.0\ninput x: f32[l, O]\n"
    source = ptodsl.compile(text + "output y: f32[l, O]\ny = x * I\n", name="l.pto").source
    assert "# ruff: noqa: E741 (the spec's names `I`, `O`, `l` are kept as written)" in source
    path = tmp_path / "ambiguous.py"
    path.write_text(source)
    assert ruff_check(path).returncode == 0, ruff_check(path).stdout


@pytest.mark.parametrize("name", HOSTILE + LOOK_ALIKES)
def test_hostile_kernel_name_is_a_located_error(name):
    text = f"kernel {name}\ninput x: f32[4]\noutput y: f32[4]\ny = x\n"
    with pytest.raises(SpecError) as raised:
        ptodsl.compile(text, name="hostile.pto")
    assert raised.value.span.line == 1, raised.value.render()
    assert raised.value.span.column >= len("kernel ") + 1


INJECTION = '''# """ + __import__("os").system("echo pwned") + """
# \\N{x} \\x \\ "'
kernel evil
dims M = 3, N = 5
param a: f32 = 0.1
param b: f32 = 1e-5
param c: f32 = 3.14
param d: f32 = 1e38
param e: f32 = 5e-324
input x: f32[M, N]  # """ ; import os
output y: f32[M, N]
y = x * a + b - c * x / d + e  # \\
'''
SPEC_VALUES = {"a": 0.1, "b": 1e-5, "c": 3.14, "d": 1e38, "e": 5e-324}


def test_comments_and_file_names_cannot_inject_code():
    compiled = ptodsl.compile(INJECTION, name='x"""\nimport os\n#\\N.pto')
    for source in (compiled.source, compiled.reference_source):
        assert "pwned" not in source and "import os\n#" not in source
    module = ast.parse(compiled.source)
    top_level = []
    for statement in module.body:
        if isinstance(statement, ast.Import | ast.ImportFrom):
            top_level.append("import")
        elif isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
            top_level.append("docstring")
        else:
            assert isinstance(statement, ast.FunctionDef | ast.ClassDef), ast.dump(statement)
            top_level.append(statement.name)
    assert top_level[0] == "docstring"
    expected = {"import", "_expect", "_run_mode", "_launch", "_make_evil_kernel", "ModelNew"}
    assert set(top_level[1:]) == expected
    assert top_level.count("_make_evil_kernel") == top_level.count("ModelNew") == 1
    imported = {alias.name for s in module.body if isinstance(s, ast.Import) for alias in s.names}
    assert imported <= {"functools", "importlib.util", "math", "os", "pypto", "torch"}


def test_float_literals_round_trip_exactly():
    compiled = ptodsl.compile(INJECTION, name="evil.pto")
    module = ast.parse(compiled.source)
    factory = next(s for s in module.body if getattr(s, "name", "") == "_make_evil_kernel")
    model = next(s for s in module.body if getattr(s, "name", "") == "ModelNew")
    init = next(s for s in model.body if getattr(s, "name", "") == "__init__")
    defaults = dict(
        zip(
            [a.arg for a in init.args.args[-len(init.args.defaults) :]],
            [ast.literal_eval(d) for d in init.args.defaults],
            strict=True,
        )
    )
    assert defaults == SPEC_VALUES
    assert all(math.copysign(1, v) == 1 for v in defaults.values())
    # Every float literal in the kernel factory parses back to a value the spec wrote.
    literals = {
        node.value
        for node in ast.walk(factory)
        if isinstance(node, ast.Constant) and isinstance(node.value, float)
    }
    assert literals <= {*SPEC_VALUES.values(), -1.0, 1.0, 0.0}, literals


def assigned_names(tree: ast.AST) -> set[str]:
    """Every name the code binds (assignments, loop variables)."""
    return {
        node.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)
    }


def test_a_loops_partial_results_never_take_a_spec_name():
    """A `let` the loop splits writes its blocks' partial results into a tensor named after
    it. It was `total_parts`, which a spec may declare too (a crash, or for a `let` a wrong
    result); generated names start with an underscore, which spec names cannot."""
    text = """kernel k
dims N = 16, C = 64, H = 256, W = 256
input x: f32[N, C, H, W]
input total_parts: f32[N, C, H, W]
output y: f32[N, C, H, W]
let total = sum(x * x)
y = x / sqrt(total) + total_parts
"""
    compiled = ptodsl.compile(text, "k.pto", tuning=None)
    source = compiled.source
    assert "_parts_total = pypto.Tensor(" in source
    assert "total_parts: pypto.Tensor(" in source  # the input, as the spec names it
    assigned = assigned_names(ast.parse(source))
    assert "_parts_total" in assigned and "total_parts" not in assigned  # never rebinds it


LIKE_GENERATED = """kernel k_kernel
dims x_tail = 23, scalar_0 = 300
param make_k_kernel: f32 = 2.0
input x_chunk: f32[x_tail, scalar_0]
input x_kernel: f32[x_tail, scalar_0]
output y: f32[x_tail, scalar_0]
let x_parts = sum(x_chunk * x_chunk)
y = x_chunk / sqrt(x_parts) * (make_k_kernel * 3.0) + x_kernel
"""
TWIN_NAMED_LIKE_ITS_TWIN = """kernel r
dims B = 64, K = 128
input x: f32[B, K]
input x_operand: f32[B, K]
weight fc: linear(K, K)
output y: f32[B, K]
y = fc(x) + x * x_operand
"""


@pytest.mark.parametrize(
    "text, generated",
    [
        (LIKE_GENERATED, ["_chunk_x_chunk =", "_tail_x_chunk =", "_parts_x_parts =",
                          "_scalar0 = make_k_kernel * 3.0"]),
        (TWIN_NAMED_LIKE_ITS_TWIN, ["_operand_x: pypto.Tensor(", "x_operand: pypto.Tensor("]),
    ],
    ids=["loop", "twin"],
)  # fmt: skip
def test_names_like_generated_ones_are_the_users_and_compute_right(text, generated, tmp_path):
    """The names ptodsl once reserved by suffix (`x_chunk`, `x_tail`, `x_kernel`, `x_parts`,
    `x_operand`, `scalar_0`, `make_k_kernel`) are spec names like any other: kept as
    written, never rebound by generated code, and the kernel (looped here, with a tail, a
    hoisted scalar, partial results and a matmul twin) computes the reference."""
    compiled = ptodsl.compile(text, name="like.pto", target=TINY_TILES)
    checked = compiled.lowered.checked
    spec_names = {t.name for t in (*checked.inputs, *checked.outputs)}
    spec_names |= {p.name for p in checked.params} | {d.name for d in checked.dims}
    function = f"_{checked.name}_kernel"
    kernel = next(
        n for n in ast.walk(ast.parse(compiled.source)) if getattr(n, "name", "") == function
    )
    assigned = assigned_names(kernel)
    assert not spec_names & assigned  # the let `x_parts` is the spec's own binding
    assert all(fragment in compiled.source for fragment in generated), generated
    path = tmp_path / "like.py"
    path.write_text(compiled.source)
    assert ruff_check(path).returncode == 0, ruff_check(path).stdout
    report = run_check(compiled)
    assert report.ok, report.to_json()
