"""What ptodsl knows about each op, in one entry per op.

An `OpDef` says what kind of op it is (which decides how the passes treat it), how the spec
writes it, how to fold it on constants, how each dialect spells it (Python scalars, the
torch reference, PyPTO), how a partial result combines across loop chunks, and how rounding
errors propagate through it (`ptodsl.error_bounds`). Every module that needs one of these
facts reads it here; `lookup` of an op that has no entry is an internal error, never a
default. `_validate` runs at import and fails loudly when an entry lacks what its kind needs.

Adding an elementwise builtin is one entry below (plus `TARGET_FORMS` when PyPTO has it
natively, or a rule in `passes/legalize.py` when it does not).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Mapping

import attrs

from ptodsl import ir


class Kind(enum.Enum):
    ARITHMETIC = "arithmetic"  # infix elementwise: a + b, -a
    ELEMENTWISE = "elementwise"  # a function applied element by element
    COMPARISON = "comparison"  # elementwise, a boolean result (where's condition)
    SELECT = "select"  # where(cond, a, b)
    REDUCTION = "reduction"  # reduces `axes`; `keepdim` keeps them as size 1
    AXIS = "axis"  # a whole-axis function: softmax, log_softmax, logsumexp
    MATMUL = "matmul"
    LAYOUT = "layout"  # moves or copies values: generated code and references only


class UnknownOp(LookupError):
    """An op name no entry defines: a bug in the pass or front end that produced it."""


# Propagation of operand errors in magnitudes, for ptodsl.error_bounds: called with the
# torch module, the result's float64 value and the operands (value, scale pairs).
Propagate = Callable[..., object]


@attrs.frozen
class OpDef:
    name: str
    kind: Kind
    arity: int
    spec: str | None = None  # the function name in a spec, when one calls it by name
    fold: Callable[..., float] | None = None  # on Python floats, for constant folding
    scalar: str | None = None  # Python spelling on compile-time scalars
    torch: str | Mapping[str, str] | None = None  # reference spelling, or one per form
    pypto: str | None = None  # PyPTO spelling; None: always legalized before codegen
    combine: str | None = None  # how two chunks' partial results combine (reductions)
    propagate: Propagate | None = None  # error propagation (elementwise kinds)
    rounds: bool = True  # whether the result rounds (max, abs, neg only select or flip)
    hidden: float = 0.0  # magnitude an intermediate of the target's formula rounds at
    attributes: type[ir.OpAttrs] | None = None  # the class of the op's attributes, if any

    def torch_spelling(self, form: str) -> str | None:
        if isinstance(self.torch, Mapping):
            return self.torch.get(form)
        return self.torch


def _unary(
    name: str,
    fold: Callable[[float], float],
    scalar: str,
    propagate: Propagate,
    *,
    pypto: str | None = None,
    rounds: bool = True,
    hidden: float = 0.0,
) -> OpDef:
    """A unary elementwise builtin spelled `name(x)` in the spec and `torch.name(x)`."""
    return OpDef(
        name,
        Kind.ELEMENTWISE,
        1,
        spec=name,
        fold=fold,
        scalar=scalar,
        torch=f"torch.{name}({{0}})",
        pypto=pypto,
        propagate=propagate,
        rounds=rounds,
        hidden=hidden,
    )


def _sigmoid(a: float) -> float:
    return 1.0 / (1.0 + math.exp(-a))


def _sign(a: float) -> float:
    return float((a > 0) - (a < 0))


def _safe_ratio(t, numerator, denominator):
    """numerator / |denominator|, infinite where the denominator is 0 (no bound there)."""
    ratio = t.where(denominator != 0, numerator / denominator.abs(), t.full_like(numerator, t.inf))
    return ratio.where(numerator != 0, t.zeros_like(numerator))


def _extremum(name: str, spec: str, clamp_bound: str) -> OpDef:
    """max(a, b) or min(a, b): torch spells a scalar bound as a clamp. The result is one of
    the operands, so it does not round."""
    return OpDef(
        name,
        Kind.ELEMENTWISE,
        2,
        spec=spec,
        fold={"max": max, "min": min}[spec],
        scalar=f"{spec}({{0}}, {{1}})",
        torch={
            f"{name}(t,t)": f"torch.{name}({{0}}, {{1}})",
            f"{name}(t,s)": f"torch.clamp({{0}}, {clamp_bound}={{1}})",
            f"{name}(s,t)": f"torch.clamp({{1}}, {clamp_bound}={{0}})",
        },
        pypto=f"pypto.{name}({{0}}, {{1}})",
        propagate=lambda t, v, a, b: t.maximum(a.scale, b.scale),
        rounds=False,
    )


def _comparison(name: str) -> OpDef:
    """Spelled infix in every dialect (`ptodsl.pyexpr`)."""
    return OpDef(name, Kind.COMPARISON, 2)


_OPS = [
    # ---- arithmetic (spelled infix in every dialect: ptodsl.pyexpr) -----------------------
    OpDef(
        "add",
        Kind.ARITHMETIC,
        2,
        fold=lambda a, b: a + b,
        propagate=lambda t, v, a, b: a.scale + b.scale,
    ),
    OpDef(
        "sub",
        Kind.ARITHMETIC,
        2,
        fold=lambda a, b: a - b,
        propagate=lambda t, v, a, b: a.scale + b.scale,
    ),
    OpDef(
        "mul",
        Kind.ARITHMETIC,
        2,
        fold=lambda a, b: a * b,
        propagate=lambda t, v, a, b: a.scale * b.value.abs() + a.value.abs() * b.scale,
    ),
    OpDef(
        "div",
        Kind.ARITHMETIC,
        2,
        fold=lambda a, b: a / b,
        propagate=lambda t, v, a, b: _safe_ratio(t, a.scale + v.abs() * b.scale, b.value),
    ),
    OpDef(
        "neg",
        Kind.ARITHMETIC,
        1,
        fold=lambda a: -a,
        propagate=lambda t, v, a: a.scale,
        rounds=False,
    ),
    # ---- elementwise builtins -----------------------------------------------------------
    _unary("exp", math.exp, "math.exp({0})", lambda t, v, a: v * a.scale, pypto="pypto.exp({0})"),
    _unary(
        "log",
        math.log,
        "math.log({0})",
        lambda t, v, a: _safe_ratio(t, a.scale, a.value),
        pypto="pypto.log({0})",
    ),
    _unary(
        "sqrt",
        math.sqrt,
        "math.sqrt({0})",
        lambda t, v, a: _safe_ratio(t, a.scale, 2 * v),
        pypto="pypto.sqrt({0})",
    ),
    _unary(
        "rsqrt",
        lambda a: 1.0 / math.sqrt(a),
        "1.0 / math.sqrt({0})",
        lambda t, v, a: _safe_ratio(t, v.abs() * a.scale, 2 * a.value),
        pypto="pypto.rsqrt({0})",
    ),
    _unary("abs", abs, "abs({0})", lambda t, v, a: a.scale, pypto="pypto.abs({0})", rounds=False),
    _unary(
        "reciprocal",
        lambda a: 1.0 / a,
        "1.0 / {0}",
        lambda t, v, a: v * v * a.scale,
        pypto="pypto.reciprocal({0})",
    ),
    _unary(
        "sigmoid",
        _sigmoid,
        "1.0 / (1.0 + math.exp(-{0}))",
        lambda t, v, a: v * (1 - v) * a.scale,
        pypto="pypto.sigmoid({0})",
    ),
    # tanh and expm1 are legalized through exp; log1p may add 1 before its log.
    _unary("tanh", math.tanh, "math.tanh({0})", lambda t, v, a: (1 - v * v) * a.scale, hidden=1.0),
    _unary(
        "relu",
        lambda a: max(a, 0.0),
        "max({0}, 0.0)",
        lambda t, v, a: a.scale,
        pypto="pypto.relu({0})",
        rounds=False,
    ),
    _unary(
        "log1p",
        math.log1p,
        "math.log1p({0})",
        lambda t, v, a: _safe_ratio(t, a.scale, 1 + a.value),
        pypto="pypto.log1p({0})",
        hidden=1.0,
    ),
    _unary(
        "expm1",
        math.expm1,
        "math.expm1({0})",
        lambda t, v, a: t.exp(a.value) * a.scale,
        hidden=1.0,
    ),
    _unary(
        "sin",
        math.sin,
        "math.sin({0})",
        lambda t, v, a: t.cos(a.value).abs() * a.scale,
        pypto="pypto.sin({0})",
    ),
    _unary(
        "cos",
        math.cos,
        "math.cos({0})",
        lambda t, v, a: t.sin(a.value).abs() * a.scale,
        pypto="pypto.cos({0})",
    ),
    # erf: legalized to a rational approximation through exp (absolute error below 2e-7).
    _unary(
        "erf",
        math.erf,
        "math.erf({0})",
        lambda t, v, a: 2 / math.sqrt(math.pi) * t.exp(-a.value * a.value) * a.scale,
        hidden=1.0,
    ),
    # sign is exact away from 0; a computed operand within its error of 0 may flip it.
    _unary(
        "sign",
        _sign,
        "float(({0} > 0) - ({0} < 0))",
        lambda t, v, a: t.zeros_like(v),
        pypto="pypto.sign({0})",
        rounds=False,
    ),
    _extremum("maximum", "max", clamp_bound="min"),
    _extremum("minimum", "min", clamp_bound="max"),
    OpDef(
        "pow",
        Kind.ELEMENTWISE,
        2,
        spec="pow",
        fold=lambda a, b: a**b,
        scalar="{0} ** {1}",
        torch="torch.pow({0}, {1})",
        pypto="pypto.pow({0}, {1})",
    ),
    OpDef(
        "clamp",
        Kind.ELEMENTWISE,
        3,
        spec="clamp",
        fold=lambda a, lo, hi: min(max(a, lo), hi),
        scalar="min(max({0}, {1}), {2})",
        torch="torch.clamp({0}, {1}, {2})",
    ),
    # ---- selection and comparisons ------------------------------------------------------
    OpDef(
        "where",
        Kind.SELECT,
        3,
        spec="where",
        torch="torch.where({0}, {1}, {2})",
        pypto="pypto.where({0}, {1}, {2})",
    ),  # fmt: skip
    _comparison("lt"),
    _comparison("le"),
    _comparison("gt"),
    _comparison("ge"),
    _comparison("eq"),
    _comparison("ne"),
    # ---- reductions ---------------------------------------------------------------------
    OpDef(
        "sum",
        Kind.REDUCTION,
        1,
        spec="sum",
        torch="torch.sum({0}, dim={axes}, keepdim={keepdim})",
        pypto="pypto.sum({0}, {axis}, keepdim=True)",
        combine="{0} + {1}",
        attributes=ir.Reduce,
    ),
    OpDef(
        "amax",
        Kind.REDUCTION,
        1,
        spec="max",
        torch="torch.amax({0}, dim={axes}, keepdim={keepdim})",
        pypto="pypto.amax({0}, {axis}, keepdim=True)",
        combine="pypto.maximum({0}, {1})",
        attributes=ir.Reduce,
    ),
    OpDef(
        "amin",
        Kind.REDUCTION,
        1,
        spec="min",
        torch="torch.amin({0}, dim={axes}, keepdim={keepdim})",
        pypto="pypto.amin({0}, {axis}, keepdim=True)",
        combine="pypto.minimum({0}, {1})",
        attributes=ir.Reduce,
    ),
    OpDef(
        "mean",
        Kind.REDUCTION,
        1,
        spec="mean",
        torch="torch.mean({0}, dim={axes}, keepdim={keepdim})",
        attributes=ir.Reduce,
    ),
    OpDef(
        "var",
        Kind.REDUCTION,
        1,
        spec="var",
        torch="torch.var({0}, dim={axes}, keepdim={keepdim}, correction={correction})",
        attributes=ir.Variance,
    ),
    OpDef(
        "batchmean",
        Kind.REDUCTION,
        1,
        spec="batchmean",
        torch="_batchmean({0})",
        attributes=ir.Reduce,
    ),
    # ---- whole-axis functions -----------------------------------------------------------
    OpDef(
        "softmax",
        Kind.AXIS,
        1,
        spec="softmax",
        torch="torch.softmax({0}, dim={axis})",
        attributes=ir.Along,
    ),
    OpDef(
        "log_softmax",
        Kind.AXIS,
        1,
        spec="log_softmax",
        torch="torch.log_softmax({0}, dim={axis})",
        attributes=ir.Along,
    ),
    OpDef(
        "logsumexp",
        Kind.AXIS,
        1,
        spec="logsumexp",
        torch="torch.logsumexp({0}, dim={axis}, keepdim={keepdim})",
        attributes=ir.AlongKeep,
    ),
    # ---- matmul and layout --------------------------------------------------------------
    OpDef("matmul", Kind.MATMUL, 2, torch="torch.matmul({0}, {1})", attributes=ir.Transposes),
    OpDef("transpose", Kind.LAYOUT, 1, torch="{0}.T"),
    OpDef("clone", Kind.LAYOUT, 1, pypto="pypto.clone({0})"),
    OpDef("expand", Kind.LAYOUT, 1, pypto="pypto.expand_clone({0}, {shape})", attributes=ir.Expand),
]

OPS: dict[str, OpDef] = {op.name: op for op in _OPS}


def lookup(name: str) -> OpDef:
    try:
        return OPS[name]
    except KeyError:
        raise UnknownOp(f"no op `{name}` in ptodsl's op registry") from None


def of_kind(*kinds: Kind) -> tuple[OpDef, ...]:
    return tuple(op for op in _OPS if op.kind in kinds)


def spellings(dialect: str) -> dict[str, str]:
    """Every op's template in one dialect ("scalar", "pypto", "torch"), keyed by name or,
    for ops spelled per operand kinds, by form (`maximum(t,s)`)."""
    table: dict[str, str] = {}
    for op in _OPS:
        spelling = getattr(op, dialect)
        if isinstance(spelling, Mapping):
            table.update(spelling)
        elif spelling is not None:
            table[op.name] = spelling
    return table


# What each kind needs from its entry; checked at import.
_REQUIRED = {
    Kind.ARITHMETIC: ("fold", "propagate"),
    Kind.ELEMENTWISE: ("spec", "fold", "scalar", "torch"),
    Kind.COMPARISON: (),
    Kind.SELECT: ("spec", "torch", "pypto"),
    Kind.REDUCTION: ("spec", "torch", "attributes"),
    Kind.AXIS: ("spec", "torch", "attributes"),
    Kind.MATMUL: ("torch", "attributes"),
    Kind.LAYOUT: (),
}


# The attributes passes read by kind: every reduction has axes, every whole-axis op an axis.
_ATTRIBUTE_FAMILY = {Kind.REDUCTION: ir.Reduce, Kind.AXIS: ir.Along, Kind.MATMUL: ir.Transposes}


def _validate() -> None:
    names = [op.name for op in _OPS]
    duplicated = {name for name in names if names.count(name) > 1}
    if duplicated:
        raise AssertionError(f"ops defined twice: {sorted(duplicated)}")
    for op in _OPS:
        missing = [field for field in _REQUIRED[op.kind] if getattr(op, field) is None]
        if op.kind is Kind.REDUCTION and op.pypto is not None and op.combine is None:
            missing.append("combine")  # a native reduction may be split by a loop
        if missing:
            raise AssertionError(f"op `{op.name}` ({op.kind.value}) lacks {', '.join(missing)}")
        family = _ATTRIBUTE_FAMILY.get(op.kind)
        if family is not None and not issubclass(op.attributes, family):
            raise AssertionError(f"op `{op.name}`'s attributes are not {family.__name__}")


_validate()
