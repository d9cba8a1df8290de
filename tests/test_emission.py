"""Generated Python is built as a tree and printed by one printer: what is printed parses
back to what was built, every registry spelling means its op wherever it stands, and the
sigmoid-of-a-param miscompile (`2.0 / sigmoid(alpha)` printed as 2 / e / (1 + f)) is gone.

The property tests evaluate each op three ways on random values, alone and as the operand
of `/`, `-`, `**`, unary minus and of itself: the scalar Python codegen prints, the constant
folder, and the torch reference's spelling, and they must agree."""

from __future__ import annotations

import ast
import math
import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ptodsl.emission import pytree
from ptodsl.emission.pyexpr import PythonEmitter
from ptodsl.frontend.diagnostics import Span
from ptodsl.ir import nodes as ir
from ptodsl.ir import ops
from ptodsl.passes.fold_constants import _fold

SPAN = Span.point(1, 1)
SCALAR_OPS = sorted(
    op.name
    for op in ops.OPS.values()
    if op.fold is not None and op.spelling("scalar", "") is not None
)
TENSOR = ir.TensorType((3,), ir.DType.F32)


def _domain(op: str, rng: random.Random) -> float:
    """An operand inside the op's real domain, away from its edges."""
    if op in ("log", "sqrt", "rsqrt"):
        return rng.uniform(0.2, 3.0)
    if op == "log1p":
        return rng.uniform(-0.5, 3.0)
    if op in ("div", "reciprocal", "pow"):
        return rng.choice([-1, 1]) * rng.uniform(0.5, 3.0) if op != "pow" else rng.uniform(0.5, 2.0)
    return rng.uniform(-3.0, 3.0)


# Contexts an op's spelling may stand in, as functions of its node.
CONTEXTS = {
    "alone": lambda e: e,
    "divisor": lambda e: _scalar("div", ir.Const(2.0, SPAN), e),
    "dividend": lambda e: _scalar("div", e, ir.Const(3.0, SPAN)),
    "subtrahend": lambda e: _scalar("sub", ir.Const(1.5, SPAN), e),
    "base": lambda e: _scalar("pow", e, ir.Const(2.0, SPAN)),
    "exponent": lambda e: _scalar("pow", ir.Const(1.5, SPAN), e),
    "negated": lambda e: _scalar("neg", e),
    "nested": lambda e: _scalar("mul", e, _scalar("sub", ir.Const(0.5, SPAN), e)),
}


def _scalar(op: str, *operands: ir.Expr) -> ir.Op:
    return ir.Op(op, operands, ir.SCALAR, SPAN)


def _torch_value(expr: ir.Expr) -> float:
    """The expression on one-element float64 tensors: its constants become tensor inputs
    `c0`, `c1`, ..., so that every op is spelled as the torch reference spells it."""
    values: dict[str, torch.Tensor] = {}

    def as_tensors(node: ir.Expr) -> ir.Expr:
        if isinstance(node, ir.Const):
            name = f"c{len(values)}"
            values[name] = torch.full((3,), node.value, dtype=torch.float64)
            return ir.Ref(name, TENSOR, SPAN)
        if isinstance(node, ir.Op):
            return ir.Op(node.op, node.operands, TENSOR, SPAN, node.attrs)
        return node

    source = pytree.unparse(PythonEmitter("torch").expr(ir.map_expr(expr, as_tensors)))
    return float(eval(source, {"torch": torch, **values})[0])  # noqa: S307 - our own tree


def _folded(expr: ir.Expr) -> float:
    folded = ir.map_expr(expr, _fold)
    assert isinstance(folded, ir.Const)
    return folded.value


def _scalar_value(expr: ir.Expr) -> float:
    source = pytree.unparse(PythonEmitter("scalar").expr(expr))
    return float(eval(source, {"math": math}))  # noqa: S307 - our own tree


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


@pytest.mark.parametrize("context", sorted(CONTEXTS))
@pytest.mark.parametrize("op", SCALAR_OPS)
def test_every_scalar_spelling_agrees_with_the_folder_and_torch(op, context):
    definition = ops.lookup(op)
    rng = random.Random(f"{op}/{context}")
    checked = 0
    for _ in range(20):
        operands = [ir.Const(_domain(op, rng), SPAN) for _ in range(definition.arity)]
        if op == "clamp":  # low <= high
            operands[1:] = sorted(operands[1:], key=lambda c: c.value)
        expr = CONTEXTS[context](_scalar(op, *operands))
        try:
            expected = _folded(expr)
        except Exception:  # outside the real domain in this context (a power of a negative)
            continue
        assert _close(_scalar_value(expr), expected), (op, context, expr)
        assert _close(_torch_value(expr), expected), (op, context, expr)
        checked += 1
    assert checked >= 10, f"{op} in {context}: too few draws inside its domain"


def test_a_sigmoid_divisor_keeps_its_parentheses():
    """The miscompile issue 39 reports: `2.0 / sigmoid(alpha)` printed as 2 / e / (1 + f)."""
    alpha = ir.Ref("alpha", ir.SCALAR, SPAN)
    expr = _scalar("div", ir.Const(2.0, SPAN), _scalar("sigmoid", alpha))
    source = pytree.unparse(PythonEmitter("scalar").expr(expr))
    for value in (-2.0, 0.0, 0.7, 5.0):
        got = eval(source, {"math": math, "alpha": value})  # noqa: S307
        assert math.isclose(got, 2.0 * (1.0 + math.exp(-value))), source


# ---- the printer: what it prints parses back to the tree, at any width --------------------

NAMES = st.sampled_from(["a", "b", "c", "x_long_name", "pypto.view"])
LEAVES = st.one_of(
    NAMES.map(pytree.name),
    st.floats(-1e3, 1e3, allow_nan=False).map(pytree.value),
    st.integers(-5, 5).map(pytree.value),
)
BINARY = st.sampled_from([ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow, ast.FloorDiv])
COMPARE = st.sampled_from([ast.Lt, ast.GtE, ast.Eq, ast.NotEq])


def _trees(children):
    return st.one_of(
        st.builds(lambda a, op, b: ast.BinOp(a, op(), b), children, BINARY, children),
        st.builds(lambda a: ast.UnaryOp(ast.USub(), a), children),
        st.builds(lambda a, op, b: ast.Compare(a, [op()], [b]), children, COMPARE, children),
        st.builds(
            lambda f, args, kw: pytree.call(f, *args, key=kw),
            NAMES,
            st.lists(children, max_size=3),
            children,
        ),
        st.lists(children, min_size=1, max_size=3).map(lambda e: ast.List(e, ast.Load())),
        st.builds(lambda a: pytree.subscript(a, pytree.span("start", 4)), children),
    )


EXPRESSIONS = st.recursive(LEAVES, _trees, max_leaves=25)


@settings(max_examples=300, deadline=None)
@given(EXPRESSIONS, st.integers(12, 100))
def test_printed_expressions_parse_back_to_their_tree(tree, width):
    statement = pytree.assign("y", tree)
    text = pytree.render([statement], width=width)  # raises when it does not parse back
    (parsed,) = ast.parse(text).body
    assert ast.dump(parsed.value) == ast.dump(ast.fix_missing_locations(tree))


def test_the_printer_breaks_long_lines_within_the_width():
    terms = [pytree.call("pypto.exp", pytree.name(f"value_{i}")) for i in range(12)]
    total = terms[0]
    for term in terms[1:]:
        total = ast.BinOp(total, ast.Add(), term)
    text = pytree.render([pytree.assign("y", ast.BinOp(pytree.value(2.0), ast.Div(), total))])
    assert max(map(len, text.splitlines())) <= pytree.WIDTH
    assert len(text.splitlines()) > 3
    namespace = {f"value_{i}": float(i) for i in range(12)}
    namespace["pypto"] = type("pypto", (), {"exp": staticmethod(math.exp)})
    exec(text, namespace)  # noqa: S102
    assert math.isclose(namespace["y"], 2.0 / sum(math.exp(i) for i in range(12)))


def test_a_printing_fault_is_caught_not_emitted(monkeypatch):
    """A printer that drops parentheses is ptodsl's bug: render raises, nothing is emitted."""
    monkeypatch.setattr(
        pytree._Printer, "operand", lambda self, o, p, i, op: [f"{i}{op}{pytree.unparse(o)}"]
    )
    tree = ast.BinOp(
        pytree.name("a"),
        ast.Mult(),
        ast.BinOp(pytree.name("b" * 60), ast.Add(), pytree.name("c" * 60)),
    )
    with pytest.raises(AssertionError, match="does not parse back"):
        pytree.render([pytree.assign("y", tree)])


def test_docstrings_escape_what_would_end_them():
    text = pytree.render(
        [pytree.function("f", pytree.arguments([]), [ast.Pass()], docstring='ends in a quote"')]
    )
    namespace: dict = {}
    exec(text, namespace)  # noqa: S102
    assert namespace["f"].__doc__ == 'ends in a quote"'


def test_registry_spellings_are_checked_at_import(monkeypatch):
    registered = list(ops._OPS)
    broken = ops.OpDef(
        "bad", ops.Kind.ARITHMETIC, 2, operator="{0} +* {1}", fold=min, propagate=min
    )
    monkeypatch.setattr(ops, "_OPS", [*registered, broken])
    with pytest.raises(AssertionError, match="a spelling that parses"):
        ops._validate()
    stray = ops.OpDef("bad", ops.Kind.ARITHMETIC, 1, operator="-{1}", fold=abs, propagate=abs)
    monkeypatch.setattr(ops, "_OPS", [*registered, stray])
    with pytest.raises(AssertionError, match="operand holes within its 1 operands"):
        ops._validate()
