"""The op registry: one entry per op, read by every stage; an entry missing what its kind
needs fails at import; an op without an entry is an internal error wherever it turns up;
and the builtins added as one entry each (sin, cos, erf, sign) work end to end."""

from __future__ import annotations

import attrs
import pytest

import ptodsl
from ptodsl.checking.check import run_check
from ptodsl.checking.error_bounds import RULES
from ptodsl.frontend.diagnostics import Source, Span
from ptodsl.ir import nodes as ir
from ptodsl.ir import ops
from ptodsl.ir.target import PYPTO_0_2_0
from ptodsl.passes.legalize import RULES as LEGALIZE_RULES
from ptodsl.pipeline import lower

# Kinds a checked spec may contain: each needs an error-bound rule.
SPEC_KINDS = set(ops.Kind) - {ops.Kind.LAYOUT}


@pytest.mark.parametrize("op", sorted(ops.OPS), ids=str)
def test_every_entry_has_what_the_stages_need(op):
    definition = ops.lookup(op)
    if definition.kind in SPEC_KINDS:
        assert op in RULES, f"no error-bound rule for {op}"
    if definition.kind in (ops.Kind.ARITHMETIC, ops.Kind.COMPARISON):
        assert definition.operator is not None, f"{op} has no Python operator"
    if definition.kind is ops.Kind.ELEMENTWISE and definition.arity == 1:
        form = f"{op}(t)"
        native = form in PYPTO_0_2_0.forms
        assert native == (definition.pypto is not None), form
        assert native or form in LEGALIZE_RULES, f"{form}: neither native nor legalized"


def test_the_target_forms_are_the_entries_native_forms():
    assert PYPTO_0_2_0.forms == ops.native_forms()
    assert {"sub(t,s)", "sin(t)", "sum(t)", "where(t,s,s)"} <= PYPTO_0_2_0.forms
    assert not {"sub(s,t)", "erf(t)", "mean(t)", "neg(t)"} & PYPTO_0_2_0.forms


def test_an_op_neither_native_nor_legalized_fails_at_import(monkeypatch):
    from ptodsl.passes import legalize

    lonely = ops.OpDef("trunc", ops.Kind.ELEMENTWISE, 1, spec="trunc")
    monkeypatch.setitem(ops.OPS, "trunc", lonely)
    assert legalize._unreachable_ops() == ["trunc"]


def test_an_entry_missing_what_its_kind_needs_fails_validation(monkeypatch):
    registered = list(ops._OPS)
    broken = attrs.evolve(ops.lookup("exp"), name="exp2", scalar=None)
    monkeypatch.setattr(ops, "_OPS", [*registered, broken])
    with pytest.raises(AssertionError, match="op `exp2` .elementwise. lacks scalar"):
        ops._validate()
    unbounded = attrs.evolve(ops.lookup("amax"), name="amax2", bound=None)
    monkeypatch.setattr(ops, "_OPS", [*registered, unbounded])
    with pytest.raises(AssertionError, match="`amax2` .reduction. lacks one error-bound rule"):
        ops._validate()
    reduction = attrs.evolve(ops.lookup("sum"), name="sum2", combine=None)
    monkeypatch.setattr(ops, "_OPS", [*registered, reduction])
    with pytest.raises(AssertionError, match="op `sum2` .reduction. lacks combine"):
        ops._validate()


def test_an_op_without_an_entry_is_an_internal_error_not_elementwise():
    lowered = lower(Source("kernel k\ninput x: f32[8, 16]\noutput y: f32[8, 16]\ny = exp(x)\n"))
    kernel = lowered.after("cse")
    scan = kernel.map_body(
        lambda node: attrs.evolve(node, op="cummax") if isinstance(node, ir.Op) else node
    )
    from ptodsl.passes.align_axes import align_axes

    with pytest.raises(ops.UnknownOp, match="cummax"):
        align_axes(scan)
    with pytest.raises(ops.UnknownOp, match="no op `cummax`"):
        ops.lookup("cummax")


NEW_BUILTINS = """kernel new_builtins
dims N = 16, C = 1024
param alpha: f32 = 0.75
input x: f32[N, C]
output y: f32[N, C]
output g: f32[N, C]
y = sin(x) * 2.0 + cos(x * alpha) - sign(x) * sin(alpha) + erf(1.0) * cos(0.5)
g = 0.5 * x * (1.0 + erf(x * 0.7071067811865476))
"""


def test_sin_cos_erf_sign_fold_spell_and_pass_check():
    compiled = ptodsl.compile(NEW_BUILTINS, name="new_builtins.pto", tuning=None)
    # constants fold, a param is spelled as a Python scalar, erf is legalized for PyPTO
    assert "erf" not in compiled.source and "pypto.sign(" in compiled.source
    assert "math.sin(alpha)" in compiled.source
    assert "0.7390851332151607" not in compiled.source  # no accidental fixed point
    assert "torch.erf(" in compiled.reference_source
    report = run_check(compiled)
    assert report.ok, report.to_json()
    # exact GELU against torch's own, through the spec's torch reference
    assert report.outputs[1].worst_ratio < 0.5


# ---- type rules: one per entry, used by the front end, `ir.op` and the verifier ----------

SPAN = Span.point(1, 1)


def _tensor(name: str, *shape: int, dtype: ir.DType = ir.DType.F32) -> ir.Ref:
    return ir.Ref(name, ir.TensorType(shape, dtype), SPAN)


def _refs(operands: tuple[str, ...]) -> list[ir.Ref]:
    """`"a:8,16"` is a tensor `a` of shape [8, 16]."""
    refs = []
    for text in operands:
        name, shape = text.split(":")
        refs.append(_tensor(name, *map(int, shape.split(","))))
    return refs


def test_every_op_has_a_type_rule():
    for definition in ops.OPS.values():
        assert definition.type_rule is not None, definition.name


@pytest.mark.parametrize(
    ("name", "operands", "attributes", "expected"),
    [
        ("add", ("a:8,1", "b:1,5"), None, (8, 5)),
        ("sum", ("a:8,16",), ir.Reduce((1,), False), (8,)),
        ("amax", ("a:8,16",), ir.Reduce((0, 1), True), (1, 1)),
        ("logsumexp", ("a:8,16",), ir.AlongKeep(1, True), (8, 1)),
        ("iota", ("a:8,16",), ir.Along(1), (1, 16)),
        ("slice", ("a:8,16",), ir.Slice((1, 0), (7, None)), (6, 16)),
        ("cat", ("a:8,16", "b:8,4"), ir.Along(1), (8, 20)),
        ("matmul", ("a:8,16", "b:5,16"), ir.Transposes(False, True), (8, 5)),
        ("reshape", ("a:8,16",), ir.Reshape((2, 4, 16)), (2, 4, 16)),
        ("swap", ("a:8,16",), ir.Swap(0, 1), (16, 8)),
        ("conv", ("x:2,4,9,9", "w:6,2,3,3"), ir.Conv((1, 1), (0, 0), (1, 1), 2), (2, 6, 7, 7)),
        ("window_max", ("a:8,16",), ir.Window((1,), (2,), (2,), (0,), (1,)), (8, 8)),
    ],
)
def test_ir_op_types_every_op_by_its_rule(name, operands, attributes, expected):
    built = ir.op(name, *_refs(operands), span=SPAN, attributes=attributes)
    assert built.type.shape == expected
    # the verifier applies the same rule: no disagreement is possible
    assert ops.type_fault(name, built.operands, built.attrs, built.type) == (built.type, None)


@pytest.mark.parametrize(
    ("name", "operands", "attributes", "fault"),
    [
        ("add", ("a:8,3", "b:8,5"), None, "do not broadcast"),
        ("sum", ("a:8,16",), ir.Reduce((2,), False), "over axes"),
        ("sum", ("a:8,16",), ir.Along(1), "not Reduce"),
        ("cat", ("a:8,16", "b:7,4"), ir.Along(1), "along axis 1"),
        ("matmul", ("a:8,16", "b:5,16"), ir.Transposes(False, False), "of f32"),
        ("reshape", ("a:8,16",), ir.Reshape((3, 16)), "of f32"),
        ("slice", ("a:8,16",), ir.Slice((1, 0), (9, None)), "bounds 1:9"),
        ("conv", ("x:2,4,9,9", "w:6,3,3,3"), ir.Conv((1, 1), (0, 0), (1, 1), 2), "of f32"),
        ("exp", ("a:8,16", "b:8,16"), None, "takes 1 operands"),
    ],
)
def test_ir_op_refuses_what_its_rule_refuses(name, operands, attributes, fault):
    with pytest.raises(ops.IllTyped, match=fault):
        ir.op(name, *_refs(operands), span=SPAN, attributes=attributes)


def test_a_given_type_must_be_a_layout_the_rule_accepts():
    a, b = _tensor("a", 8, 16), _tensor("b", 16, 4)
    span, transposes = SPAN, ir.Transposes(False, False)
    framed = ir.TensorType((2, 4, 1, 4), ir.DType.F32)  # the product's rows split, an axis added
    assert ir.op("matmul", a, b, span=span, attributes=transposes, type=framed).type == framed
    other = ir.TensorType((4, 8, 4), ir.DType.F32)  # the same count of elements, in other axes
    with pytest.raises(ops.IllTyped, match=r"has type f32\[4, 8, 4\], not f32\[8, 4\]"):
        ir.op("matmul", a, b, span=span, attributes=transposes, type=other)
    with pytest.raises(ops.IllTyped, match="its type must be given"):
        ir.op("fill", span=span, attributes=ir.Fill(0.0))


def test_no_op_is_built_by_hand():
    """Every op goes through `ir.op` (its entry's type rule): `ir.Op(` is spelled only by
    the constructor itself."""
    from conftest import ROOT

    sources = [*(ROOT / "ptodsl").rglob("*.py"), *(ROOT / "passes").glob("*.py")]
    hand_built = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sources
        if path.name != "ir.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "ir.Op(" in line
    ]
    assert hand_built == []
