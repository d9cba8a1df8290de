"""The op registry: one entry per op, read by every stage; an entry missing what its kind
needs fails at import; an op without an entry is an internal error wherever it turns up;
and the builtins added as one entry each (sin, cos, erf, sign) work end to end."""

from __future__ import annotations

import attrs
import pytest

import ptodsl
from ptodsl import ir, ops
from ptodsl.checking import run_check
from ptodsl.diagnostics import Source
from ptodsl.error_bounds import RULES
from ptodsl.passes.legalize import RULES as LEGALIZE_RULES
from ptodsl.pipeline import lower
from ptodsl.pyexpr import _INFIX
from ptodsl.target import PYPTO_0_2_0

# Kinds a checked spec may contain: each needs an error-bound rule.
SPEC_KINDS = set(ops.Kind) - {ops.Kind.LAYOUT}


@pytest.mark.parametrize("op", sorted(ops.OPS), ids=str)
def test_every_entry_has_what_the_stages_need(op):
    definition = ops.lookup(op)
    if definition.kind in SPEC_KINDS:
        assert op in RULES, f"no error-bound rule for {op}"
    if definition.kind in (ops.Kind.ARITHMETIC, ops.Kind.COMPARISON) and definition.arity == 2:
        assert op in _INFIX, f"{op} is spelled infix, but pyexpr has no symbol for it"
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
