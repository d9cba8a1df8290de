"""What ptodsl knows about each op, in one entry per op.

An `OpDef` says what kind of op it is (which decides how the passes treat it), how the spec
writes it, how to fold it on constants, how each dialect spells it (Python scalars, the
torch reference, PyPTO), how a partial result combines across loop chunks, and how rounding
errors propagate through it (`ptodsl.checking.error_bounds`). Every module that needs one of these
facts reads it here; `lookup` of an op that has no entry is an internal error, never a
default. `_validate` runs at import and fails loudly when an entry lacks what its kind needs.

Adding an op is one entry below: its `native` forms when PyPTO 0.2.0 runs it (the target's
forms are read from the entries), otherwise a rewrite in `passes/legalize.py`, which fails
at import when an op that is not native has none.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Iterable, Mapping

import attrs

from ptodsl.emission import pytree
from ptodsl.ir import nodes as ir
from ptodsl.ir import op_types


class Kind(enum.Enum):
    ARITHMETIC = "arithmetic"  # infix elementwise: a + b, -a
    ELEMENTWISE = "elementwise"  # a function applied element by element
    COMPARISON = "comparison"  # elementwise, a boolean result (where's condition)
    SELECT = "select"  # where(cond, a, b)
    REDUCTION = "reduction"  # reduces `axes`; `keepdim` keeps them as size 1
    ARG_REDUCTION = "arg_reduction"  # the position of an extremum along one axis (argmax)
    AXIS = "axis"  # a whole-axis function: softmax, log_softmax, logsumexp
    SCAN = "scan"  # a running total along `axis`: never merged with or split across others
    INDEX = "index"  # positions along `axis` of its operand (iota): like a scan, positional
    REVERSE = "reverse"  # the positions along `axis` in reverse order (flip): positional
    MASK = "mask"  # keeps part of a matrix by position (triu, tril): legalized with `index`
    CAST = "cast"  # converts each value to the dtype of its attributes
    SLICE = "slice"  # a static crop (x[1:, :-1]): its cut axes are positional
    CONCAT = "concat"  # two values joined along `axis` (cat): positional along it
    WINDOW = "window"  # a reduction over sliding windows (pooling): positional along `axes`
    CONV = "conv"  # a convolution (torch's conv1d/2d/3d): a phase of its own on the cube
    MATMUL = "matmul"
    LAYOUT = "layout"  # moves or copies values: generated code and references only


class UnknownOp(LookupError):
    """An op name no entry defines: a bug in the pass or front end that produced it."""


class IllTyped(AssertionError):
    """An op built with operands, attributes or a type its entry's type rule refuses: a bug
    in the pass or front end that built it."""


# Propagation of operand errors in magnitudes, for ptodsl.checking.error_bounds: called with the
# torch module, the result's float64 value and the operands (value, scale pairs).
Propagate = Callable[..., object]
# An error-bound rule of its own: called with the torch module, the operands (value, scale
# pairs) and the node's attributes; returns the float64 value and its error scale.
Bound = Callable[..., tuple[object, object]]
# What a check's input draws must reach in an op (`ptodsl.checking.draws`): called with the torch
# module and the operands' float64 values; returns (what, mask) pairs, each mask true
# where an element reaches `what` (a branch taken, a small term that changes its sum).
Reaches = Callable[..., list[tuple[str, object]]]


@attrs.frozen
class OpDef:
    name: str
    kind: Kind
    arity: int
    spec: str | None = None  # the function name in a spec, when one calls it by name
    fold: Callable[..., float] | None = None  # on Python floats, for constant folding
    # A Python operator (`{0} + {1}`): the op's spelling in every dialect.
    operator: str | None = None
    scalar: str | None = None  # Python spelling on compile-time scalars
    torch: str | Mapping[str, str] | None = None  # reference spelling, or one per form
    pypto: str | None = None  # PyPTO spelling; None: always legalized before codegen
    combine: str | None = None  # how two chunks' partial results combine (reductions)
    native: str = ""  # PyPTO 0.2.0's forms, as operand kinds ("t,t t,s"); none: legalized
    propagate: Propagate | None = None  # error propagation by the derivative (elementwise)
    bound: Bound | None = None  # the whole error-bound rule, for ops without a derivative
    rounds: bool = True  # whether the result rounds (max, abs, neg only select or flip)
    hidden: float = 0.0  # magnitude an intermediate of the target's formula rounds at
    attributes: type[ir.OpAttrs] | None = None  # the class of the op's attributes, if any
    # the first operand is a condition PyPTO keeps out of UB, and two tensor branches over
    # rows of one 32-byte block take a workspace (Target.select_block_workspace_bytes)
    selects: bool = False
    # the type rule (ptodsl.ir.op_types); None: its kind's (`_KIND_TYPE_RULES`)
    result: op_types.Rule | None = None
    # the branches and terms a check's draws must reach (`Reaches`); None: nothing to reach
    reaches: Reaches | None = None

    @property
    def type_rule(self) -> op_types.Rule:
        rule = self.result or _KIND_TYPE_RULES.get(self.kind)
        if rule is None:
            raise UnknownOp(f"op `{self.name}` has no type rule")
        return rule

    def spelling(self, dialect: str, form: str) -> str | None:
        """The op's template in one dialect ("scalar", "torch", "pypto"), for its form
        (`maximum(t,s)`): Python source whose holes `{0}`, `{1}` are operands and `{axis}`
        and the like attributes (ptodsl.emission.pytree). None: the dialect cannot spell it."""
        if self.operator is not None:
            return self.operator
        spelling = getattr(self, dialect)
        if isinstance(spelling, Mapping):
            return spelling.get(form)
        return spelling


def _unary(
    name: str,
    fold: Callable[[float], float],
    scalar: str,
    propagate: Propagate,
    *,
    pypto: str | None = None,
    rounds: bool = True,
    hidden: float = 0.0,
    reaches: Reaches | None = None,
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
        native="t" if pypto else "",
        propagate=propagate,
        rounds=rounds,
        hidden=hidden,
        reaches=reaches,
    )


def _sigmoid(a: float) -> float:
    # 1 / (1 + exp(-a)) with exp of non-positive numbers only (exp(710) overflows)
    return math.exp(min(a, 0.0)) / (1.0 + math.exp(-abs(a)))


def _sign(a: float) -> float:
    return float((a > 0) - (a < 0))


def _safe_ratio(t, numerator, denominator):
    """numerator / |denominator|, infinite where the denominator is 0 (no bound there)."""
    ratio = t.where(denominator != 0, numerator / denominator.abs(), t.full_like(numerator, t.inf))
    return ratio.where(numerator != 0, t.zeros_like(numerator))


def _sides(t, a, threshold, below: str, above: str):
    """Elements of `a` on each side of `threshold` (equal elements reach neither)."""
    return [(below, a < threshold), (above, a > threshold)]


# A constant term reaches its sum where it moves it by more than this fraction: far above
# any dtype's tolerance, so a kernel dropping the term (LayerNorm's eps) fails there.
TERM_FRACTION = 1e-3


def _reaches_term(t, a, b):
    """A constant term of a sum (`v + eps`) must matter somewhere: with unit-variance rows
    eps = 1e-5 moves rsqrt(var + eps) by 5e-6, inside f32's bound."""
    reached = []
    for constant, other, which in ((b, a, "second"), (a, b, "first")):
        if constant.dim() == 0 and float(constant) != 0:
            moves = constant.abs() > TERM_FRACTION * other.abs()
            reached.append((f"its constant {which} term {float(constant):.3g} matters", moves))
    return reached


# Two values are a tie when equal and exact (inputs), and when computed, also when within
# this many of their rounding units of each other (about f32's tolerance,
# error_bounds.TOLERANCES): a correct kernel may then select either.
_TIE_UNITS = 4e-6


def _selected_scale(t, v, a, b):
    """The error of max(a, b) or min(a, b) is the selected operand's, unless the other is
    within their errors of it (either may be selected): a padding value that is never
    selected (max pooling's -3e38) leaves no error behind."""
    selected = t.where(v == a.value, a.scale, b.scale)
    close = (a.value - b.value).abs() <= _TIE_UNITS * (a.scale + b.scale)
    return t.where(close, t.maximum(a.scale, b.scale), selected)


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
        native="t,t t,s",
        propagate=_selected_scale,
        rounds=False,
        reaches=lambda t, a, b: _reaches_extremum(t, a, b, spec),
    )


def _reaches_extremum(t, a, b, spec: str):
    larger = a > b
    chosen_first = larger if spec == "max" else b > a
    chosen_second = (b > a) if spec == "max" else larger
    return [
        ("its first operand selected", chosen_first),
        ("its second operand selected", chosen_second),
    ]


_COMPARISON_OPERATORS = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def _comparison(name: str) -> OpDef:
    """Spelled as Python's comparison in every dialect."""
    return OpDef(
        name,
        Kind.COMPARISON,
        2,
        operator=f"{{0}} {_COMPARISON_OPERATORS[name]} {{1}}",
        native="t,t t,s",
        bound=_compare_bound(name),
        reaches=lambda t, a, b: [
            ("true", getattr(t, name)(a, b)),
            ("false", ~getattr(t, name)(a, b)),
        ],
    )


# ---- error-bound rules of ops that have no elementwise derivative ------------------------
# Each returns (value, scale) in float64 (ptodsl.checking.error_bounds); `t` is the torch module.


def _compare_bound(name: str) -> Bound:
    def bound(t, operands, _attributes):
        lhs, rhs = operands
        result = getattr(t, name)(lhs.value, rhs.value)
        return result, t.zeros(result.shape, dtype=t.float64)

    return bound


def _where_bound(t, operands, _attributes):
    condition, if_true, if_false = operands
    value = t.where(condition.value, if_true.value, if_false.value)
    scale = t.where(condition.value, if_true.scale, if_false.scale)
    return value, scale.expand(value.shape)


def _reaches_clamp(t, a, low, high):
    return [
        ("its lower bound", a < low),
        ("its interior", (a > low) & (a < high)),
        ("its upper bound", a > high),
    ]


def _clamp_bound(t, operands, _attributes):
    """The result is one of the operands: it moves by at most their errors, unrounded."""
    a, low, high = operands
    value = t.clamp(a.value, low.value, high.value)
    scale = t.maximum(a.scale, t.maximum(low.scale, high.scale))
    return value, scale.expand(value.shape)


def _pow_bound(t, operands, _attributes):
    base, exponent = operands
    value = t.pow(base.value, exponent.value)
    derivative = (exponent.value * t.pow(base.value, exponent.value - 1)).abs()
    scale = derivative * base.scale + value.abs()
    if float(exponent.scale) > 0:  # an exponent that rounds moves the result by v log|b|
        scale = scale + (value * t.log(base.value.abs())).abs() * exponent.scale
    return value, t.nan_to_num(scale, nan=math.inf)


def _sum_bound(t, operands, attributes):
    """The terms' magnitudes, never the (cancelling) result: sqrt(sum(s_a^2)) + sum(|a|).
    The terms' errors add as independent errors do (their root sum of squares); the sum's
    own rounding is counted whole."""
    (a,) = operands
    axes, keepdim = attributes.axes, attributes.keepdim
    value = t.sum(a.value, dim=axes, keepdim=keepdim)
    propagated = t.sum(a.scale.expand(a.value.shape) ** 2, dim=axes, keepdim=keepdim).sqrt()
    return value, propagated + t.sum(a.value.abs(), dim=axes, keepdim=keepdim)


def _scaled_sum_bound(count: Callable[[object, ir.Reduce], int]) -> Bound:
    """A sum divided by `count(operand, attributes)`, which rounds once more."""

    def bound(t, operands, attributes):
        total, total_scale = _sum_bound(t, operands, attributes)
        divisor = count(operands[0].value, attributes)
        value = total / divisor
        return value, total_scale / divisor + value.abs()

    return bound


def _reduced_count(value, attributes: ir.Reduce) -> int:
    return math.prod(value.shape[axis] for axis in attributes.axes)


def _var_bound(t, operands, attributes):
    """d var / d x_i = 2 (x_i - mean) / (n - correction): the mean's own error cancels, so a
    two-pass variance rounds like the variance, not like E[x^2]."""
    (a,) = operands
    axes, keepdim, correction = attributes.axes, attributes.keepdim, attributes.correction
    divisor = _reduced_count(a.value, attributes) - correction
    value = t.var(a.value, dim=axes, keepdim=keepdim, correction=correction)
    centred = (a.value - a.value.mean(dim=axes, keepdim=True)).abs()
    propagated = t.sum(2 * centred * a.scale, dim=axes, keepdim=keepdim) / divisor
    return value, propagated + value.abs()


def _extreme_bound(name: str) -> Bound:
    """amax/amin move by at most the largest error along the axes, and do not round."""

    def bound(t, operands, attributes):
        (a,) = operands
        axes, keepdim = attributes.axes, attributes.keepdim
        value = getattr(t, name)(a.value, dim=axes, keepdim=keepdim)
        return value, t.amax(a.scale, dim=axes, keepdim=keepdim)

    return bound


def _softmax_parts(t, a, axis: int):
    """Probabilities p, each exponent's error e = s_a + |a - max| + 1 (the shift rounds,
    exp rounds), and the sum's error E = sum_j p_j e_j, relative to the sum."""
    shifted = a.value - a.value.amax(dim=axis, keepdim=True)
    probabilities = t.softmax(a.value, dim=axis)
    # exp(-inf) is 0 exactly: a masked element (`masked_fill(mask, -inf)`) adds no error
    exponent_error = t.where(shifted.isinf(), 0.0, a.scale + shifted.abs() + 1)
    sum_error = t.sum(probabilities * exponent_error, dim=axis, keepdim=True)
    return probabilities, exponent_error, sum_error


def _softmax_bound(t, operands, attributes):
    (a,) = operands
    p, exponent_error, sum_error = _softmax_parts(t, a, attributes.axis)
    return p, p * (exponent_error + sum_error + 1)


def _log_softmax_bound(t, operands, attributes):
    (a,) = operands
    axis = attributes.axis
    _, exponent_error, sum_error = _softmax_parts(t, a, axis)
    value = t.log_softmax(a.value, dim=axis)
    log_sum = t.logsumexp(a.value - a.value.amax(dim=axis, keepdim=True), dim=axis).abs()
    return value, exponent_error + sum_error + log_sum.unsqueeze(axis) + value.abs()


def _logsumexp_bound(t, operands, attributes):
    (a,) = operands
    axis, keepdim = attributes.axis, attributes.keepdim
    _, _, sum_error = _softmax_parts(t, a, axis)
    value = t.logsumexp(a.value, dim=axis, keepdim=True)
    scale = a.scale.amax(dim=axis, keepdim=True) + sum_error + value.abs()
    if keepdim:
        return value, scale
    return value.squeeze(axis), scale.squeeze(axis)


def _cumsum_bound(t, operands, attributes):
    """A plain scan rounds like the sum of its prefix: cumsum(s_a + |a|). The other forms
    subtract from a running total or from the axis's total (legalize), so each element may
    carry the rounding of the whole axis: sum(s_a + |a|) along it."""
    (a,) = operands
    axis = attributes.axis
    terms = a.scale + a.value.abs()
    value = _running(t, "cumsum", a.value, attributes)
    if attributes.variant:
        return value, t.sum(terms, dim=axis, keepdim=True).expand(value.shape) + value.abs()
    return value, t.cumsum(terms, dim=axis)


def _log_terms(t, a):
    """Per element, what it adds to a product's relative error as ptodsl computes products
    (exp of a sum of log|a|, legalize): |log|a|| and the log's and exp's rounding, and the
    operand's own relative error. Infinite at zeros, which the callers turn into 0."""
    return a.value.abs().log().abs() + 2 + _safe_ratio(t, a.scale, a.value)


def _prod_bound(t, operands, attributes):
    """The log-sum's absolute error is the product's relative error. A zero factor makes the
    product exactly 0 (exp of -inf)."""
    (a,) = operands
    (axis,), keepdim = attributes.axes, attributes.keepdim
    value = t.prod(a.value, dim=axis, keepdim=keepdim)
    terms = t.sum(_log_terms(t, a), dim=axis, keepdim=keepdim)
    return value, t.nan_to_num(value.abs() * terms, nan=0.0)


def _running(t, op: str, value, attributes):
    """cumsum / cumprod along the scan's axis, from the end when `reverse`, each element's
    own term left out when `exclusive`."""
    axis = attributes.axis
    ordered = value.flip(axis) if attributes.reverse else value
    running = getattr(t, op)(ordered, dim=axis)
    if attributes.exclusive:
        identity = t.full_like(running.narrow(axis, 0, 1), 1.0 if op == "cumprod" else 0.0)
        running = t.cat([identity, running.narrow(axis, 0, running.shape[axis] - 1)], dim=axis)
    return running.flip(axis) if attributes.reverse else running


def _cumprod_bound(t, operands, attributes):
    (a,) = operands
    value = _running(t, "cumprod", a.value, attributes)
    terms = _running(t, "cumsum", _log_terms(t, a), attributes)
    return value, t.nan_to_num(value.abs() * terms, nan=0.0)


def _iota(t, value, axis: int):
    """Positions along `axis`, shaped to broadcast against `value`."""
    shape = [value.shape[axis] if a == axis else 1 for a in range(value.dim())]
    return t.arange(value.shape[axis], dtype=t.float64).reshape(shape)


def _exact_bound(compute: Callable[..., object], keeps_errors: bool = False) -> Bound:
    """An op that selects or counts without rounding: its operand's errors where it keeps
    the operand's values (`keeps_errors`), none where it only reads positions."""

    def bound(t, operands, attributes):
        (a,) = operands
        value = compute(t, a, attributes)
        if keeps_errors:
            scale = a.scale.expand(a.value.shape)
            return value, compute(t, attrs.evolve(a, value=scale), attributes)
        return value, t.zeros(value.shape, dtype=t.float64)

    return bound


def _triangle(name: str) -> OpDef:
    """triu or tril: keeps the values (and their errors) on one side of a diagonal."""
    return OpDef(
        name,
        Kind.MASK,
        1,
        spec=name,
        torch=f"torch.{name}({{0}}, diagonal={{diagonal}})",
        attributes=ir.Triangle,
        bound=_exact_bound(
            lambda t, a, attributes: getattr(t, name)(a.value, attributes.diagonal), True
        ),
    )


def _arg_bound(name: str) -> Bound:
    """argmax / argmin: the first position of the extremum, exact where no other candidate
    is within the candidates' errors of it; where one is, a correct kernel may return
    either, and the bound lets any position pass."""

    def bound(t, operands, attributes):
        (a,) = operands
        (axis,), keepdim = attributes.axes, attributes.keepdim
        best = getattr(t, name)(a.value, dim=axis, keepdim=True)
        value = best.to(t.float64)
        extreme = a.value.gather(axis, best)
        errors = a.scale.expand(a.value.shape)
        slack = _TIE_UNITS * (errors + errors.gather(axis, best).expand(a.value.shape))
        rivals = ((a.value - extreme).abs() <= slack) & (slack > 0)
        rivals.scatter_(axis, best, False)
        open_rows = rivals.any(dim=axis, keepdim=True)
        scale = t.where(open_rows, t.inf, 0.0).to(t.float64)
        if not keepdim:
            value, scale = value.squeeze(axis), scale.squeeze(axis)
        return value, scale

    return bound


def _arg_reduction(name: str) -> OpDef:
    return OpDef(
        name,
        Kind.ARG_REDUCTION,
        1,
        spec=name,
        torch=f"torch.{name}({{0}}, dim={{axis}}, keepdim={{keepdim}})",
        attributes=ir.Reduce,
        bound=_arg_bound(name),
    )


# The reference computes in float64, so a conversion to a float keeps the value there.
_CAST_TORCH = {
    ir.DType.I32: "{0}.int()",
    ir.DType.I64: "{0}.long()",
    ir.DType.BOOL: "({0} != 0)",
}


def _cast() -> OpDef:
    return OpDef(
        "cast",
        Kind.CAST,
        1,
        torch={
            f"cast[{dtype.value}](t)": _CAST_TORCH.get(dtype, "{0}.double()") for dtype in ir.DType
        },
        pypto="pypto.cast({0}, pypto.{dtype})",
        native=" ".join(f"[{dtype.value}](t)" for dtype in ir.DType),
        attributes=ir.Cast,
        bound=_exact_bound(lambda t, a, attributes: a.value, True),
    )


def _cropped(value, attributes: ir.Slice):
    return value[tuple(map(slice, attributes.starts, attributes.stops))]


def _concat_bound(t, operands, attributes):
    """The operands' values and errors side by side: nothing rounds."""
    a, b = operands
    scales = [o.scale.expand(o.value.shape) for o in operands]
    return t.cat([a.value, b.value], dim=attributes.axis), t.cat(scales, dim=attributes.axis)


# The torch reference of a window reduction, the same text in the emitted reference
# (`ptodsl.emission.reference`) and in the error bounds: per axis, the padded axis's taps
# picked with index_select and combined; independent of the kernel's reshapes and views.
WINDOW_REFERENCE = '''
def _window(x, reduction, axes, size, stride, padding, dilation, ceil_mode):
    """A window reduction over `axes`, as torch's pooling computes it: padding takes no part
    in a max or min; an average counts it (count_include_pad)."""
    fill = {"max": -math.inf, "min": math.inf}.get(reduction, 0.0)
    for axis, k, s, p, d in zip(axes, size, stride, padding, dilation, strict=True):
        span = x.shape[axis] + 2 * p - d * (k - 1) - 1
        count = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (count - 1) * s >= x.shape[axis] + p:
            count -= 1
        back = max(0, (count - 1) * s + d * (k - 1) + 1 - p - x.shape[axis])
        pads = [list(x.shape), list(x.shape)]
        pads[0][axis], pads[1][axis] = p, back
        x = torch.cat([x.new_full(pads[0], fill), x, x.new_full(pads[1], fill)], dim=axis)
        starts = torch.arange(count, device=x.device) * s
        taps = torch.stack([x.index_select(axis, starts + j * d) for j in range(k)])
        if reduction == "max":
            x = taps.amax(0)
        elif reduction == "min":
            x = taps.amin(0)
        else:
            x = taps.sum(0)
    return x / math.prod(size) if reduction == "mean" else x
'''


def _window_function(t):
    namespace = {"torch": t, "math": math}
    exec(WINDOW_REFERENCE, namespace)  # noqa: S102 - ptodsl's own text, above
    return namespace["_window"]


def _window_bound(reduction: str) -> Bound:
    """A max or min window moves by at most the largest error in the window and does not
    round; a sum rounds like the sum of its terms' magnitudes, an average once more."""

    def bound(t, operands, attributes):
        (a,) = operands
        window = _window_function(t)
        geometry = (
            attributes.axes,
            attributes.size,
            attributes.stride,
            attributes.padding,
            attributes.dilation,
            attributes.ceil_mode,
        )
        value = window(a.value, reduction, *geometry)
        scale = a.scale.expand(a.value.shape)
        if reduction in ("max", "min"):
            return value, window(scale, "max", *geometry)
        terms = window(scale + a.value.abs(), reduction, *geometry)
        return value, terms + value.abs() if reduction == "mean" else terms

    return bound


def _window_op(reduction: str) -> OpDef:
    """window_max(x, axis=..., size=..., stride=..., padding=..., dilation=...): one entry
    per combining reduction; materialise's window phases spell them in PyPTO."""
    return OpDef(
        f"window_{reduction}",
        Kind.WINDOW,
        1,
        spec=f"window_{reduction}",
        torch="_window({0}, "
        + f'"{reduction}"'
        + ", {axes}, {size}, {stride}, {padding}, {dilation}, {ceil_mode})",
        native="t",
        attributes=ir.Window,
        bound=_window_bound(reduction),
        rounds=reduction in ("sum", "mean"),
    )


# The torch reference of a convolution, the same text in the emitted reference and in the
# error bounds: torch's own convolution of the spatial rank the attributes give.
CONV_REFERENCE = '''
def _conv(x, weight, stride, padding, dilation, groups):
    """torch's convolution over the last len(stride) axes of x."""
    convolve = getattr(torch.nn.functional, f"conv{len(stride)}d")
    return convolve(x, weight, stride=stride, padding=padding, dilation=dilation, groups=groups)


def _conv_transpose(x, weight, stride, padding, output_padding, dilation, groups):
    """torch's transposed convolution over the last len(stride) axes of x."""
    convolve = getattr(torch.nn.functional, f"conv_transpose{len(stride)}d")
    return convolve(
        x,
        weight,
        stride=stride,
        padding=padding,
        output_padding=output_padding,
        dilation=dilation,
        groups=groups,
    )
'''


def _conv_function(t, transposed: bool):
    namespace = {"torch": t}
    exec(CONV_REFERENCE, namespace)  # noqa: S102 - ptodsl's own text, above
    if not transposed:
        return namespace["_conv"]
    return namespace["_conv_transpose"]


def _conv_bound(t, operands, attributes):
    """As for a matmul, with the convolution for the product: sqrt(s_x^2 * w^2) +
    sqrt(x^2 * s_w^2), and the products' and sums' own rounding |x| * |w| (the convolution
    of magnitudes)."""
    x, w = operands
    transposed = isinstance(attributes, ir.ConvTranspose)
    conv = _conv_function(t, transposed)
    geometry = (attributes.stride, attributes.padding)
    geometry += (attributes.output_padding,) if transposed else ()
    geometry += (attributes.dilation, attributes.groups)
    sx, sw = x.scale.expand(x.value.shape), w.scale.expand(w.value.shape)
    xa, wa = x.value.abs(), w.value.abs()
    propagated = conv(sx**2, wa**2, *geometry).sqrt() + conv(xa**2, sw**2, *geometry).sqrt()
    return conv(x.value, w.value, *geometry), propagated + conv(xa, wa, *geometry)


def _matmul_bound(t, operands, attributes):
    """sqrt(s_a^2 @ b^2) + sqrt(a^2 @ s_b^2), and the products' own rounding |a| @ |b|. The
    operands' errors reach the product as independent errors do, by their root sum of
    squares (the probabilistic model of rounding errors, Higham and Mary 2019): through
    |a| @ |b| they would compound, layer after layer, to bounds no wrong network exceeds
    (a 9-layer perceptron's reached 585 where its outputs are about 0.1)."""
    a, b = operands

    def oriented(x, transposed: bool):
        return x.transpose(-1, -2) if transposed else x

    av, bv = oriented(a.value, attributes.a_trans), oriented(b.value, attributes.b_trans)
    sa, sb = oriented(a.scale, attributes.a_trans), oriented(b.scale, attributes.b_trans)
    sa, sb = sa.expand(av.shape), sb.expand(bv.shape)
    propagated = t.matmul(sa**2, bv**2).sqrt() + t.matmul(av**2, sb**2).sqrt()
    return t.matmul(av, bv), propagated + t.matmul(av.abs(), bv.abs())


_OPS = [
    # ---- arithmetic (Python's operators in every dialect) -----------------------------
    OpDef(
        "add",
        Kind.ARITHMETIC,
        2,
        operator="{0} + {1}",
        native="t,t t,s",
        fold=lambda a, b: a + b,
        propagate=lambda t, v, a, b: a.scale + b.scale,
        reaches=_reaches_term,
    ),
    OpDef(
        "sub",
        Kind.ARITHMETIC,
        2,
        operator="{0} - {1}",
        native="t,t t,s",
        fold=lambda a, b: a - b,
        propagate=lambda t, v, a, b: a.scale + b.scale,
        reaches=_reaches_term,
    ),
    OpDef(
        "mul",
        Kind.ARITHMETIC,
        2,
        operator="{0} * {1}",
        native="t,t t,s",
        fold=lambda a, b: a * b,
        propagate=lambda t, v, a, b: a.scale * b.value.abs() + a.value.abs() * b.scale,
    ),
    OpDef(
        "div",
        Kind.ARITHMETIC,
        2,
        operator="{0} / {1}",
        native="t,t t,s",
        fold=lambda a, b: a / b,
        propagate=lambda t, v, a, b: _safe_ratio(t, a.scale + v.abs() * b.scale, b.value),
    ),
    OpDef(
        "neg",
        Kind.ARITHMETIC,
        1,
        operator="-{0}",
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
    _unary(
        "abs",
        abs,
        "abs({0})",
        lambda t, v, a: a.scale,
        pypto="pypto.abs({0})",
        rounds=False,
        reaches=lambda t, a: _sides(t, a, 0.0, "a negative operand", "a positive operand"),
    ),
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
        "math.exp(min({0}, 0.0)) / (1.0 + math.exp(-abs({0})))",
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
        reaches=lambda t, a: _sides(t, a, 0.0, "a negative operand", "a positive operand"),
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
        reaches=lambda t, a: _sides(t, a, 0.0, "a negative operand", "a positive operand"),
    ),
    # floor is exact; a computed operand within its error of an integer may step it.
    _unary(
        "floor",
        math.floor,
        "float(math.floor({0}))",
        lambda t, v, a: t.zeros_like(v),
        pypto="pypto.floor({0})",
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
        native="t,s",
        bound=_pow_bound,
    ),
    OpDef(
        "clamp",
        Kind.ELEMENTWISE,
        3,
        spec="clamp",
        fold=lambda a, lo, hi: min(max(a, lo), hi),
        scalar="min(max({0}, {1}), {2})",
        torch="torch.clamp({0}, {1}, {2})",
        bound=_clamp_bound,
        reaches=_reaches_clamp,
    ),
    # ---- selection and comparisons ------------------------------------------------------
    OpDef(
        "where",
        Kind.SELECT,
        3,
        spec="where",
        torch="torch.where({0}, {1}, {2})",
        pypto="pypto.where({0}, {1}, {2})",
        native="t,t,t t,s,t t,t,s t,s,s",
        bound=_where_bound,
        selects=True,
        reaches=lambda t, condition, a, b: [
            ("its condition true", condition),
            ("its condition false", ~condition),
        ],
    ),
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
        native="t",
        bound=_sum_bound,
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
        native="t",
        bound=_extreme_bound("amax"),
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
        native="t",
        bound=_extreme_bound("amin"),
    ),
    OpDef(
        "mean",
        Kind.REDUCTION,
        1,
        spec="mean",
        torch="torch.mean({0}, dim={axes}, keepdim={keepdim})",
        attributes=ir.Reduce,
        bound=_scaled_sum_bound(_reduced_count),
    ),
    # pypto 0.2.0's prod has no SIM pipe (ROWPROD_SINGLE): legalized through exp and log.
    OpDef(
        "prod",
        Kind.REDUCTION,
        1,
        spec="prod",
        torch="torch.prod({0}, dim={axis}, keepdim={keepdim})",
        attributes=ir.Reduce,
        bound=_prod_bound,
    ),
    OpDef(
        "var",
        Kind.REDUCTION,
        1,
        spec="var",
        torch="torch.var({0}, dim={axes}, keepdim={keepdim}, correction={correction})",
        attributes=ir.Variance,
        bound=_var_bound,
    ),
    OpDef(
        "batchmean",
        Kind.REDUCTION,
        1,
        spec="batchmean",
        torch="_batchmean({0})",
        attributes=ir.Reduce,
        bound=_scaled_sum_bound(lambda value, _attributes: value.shape[0]),
    ),
    # ---- whole-axis functions -----------------------------------------------------------
    OpDef(
        "softmax",
        Kind.AXIS,
        1,
        spec="softmax",
        torch="torch.softmax({0}, dim={axis})",
        attributes=ir.Along,
        bound=_softmax_bound,
    ),
    OpDef(
        "log_softmax",
        Kind.AXIS,
        1,
        spec="log_softmax",
        torch="torch.log_softmax({0}, dim={axis})",
        attributes=ir.Along,
        bound=_log_softmax_bound,
    ),
    OpDef(
        "logsumexp",
        Kind.AXIS,
        1,
        spec="logsumexp",
        torch="torch.logsumexp({0}, dim={axis}, keepdim={keepdim})",
        attributes=ir.AlongKeep,
        result=op_types.LOGSUMEXP,
        bound=_logsumexp_bound,
    ),
    # ---- scans ---------------------------------------------------------------------------
    OpDef(
        "cumsum",
        Kind.SCAN,
        1,
        spec="cumsum",
        torch={
            "cumsum(t)": "torch.cumsum({0}, dim={axis})",
            **{
                f"cumsum{variant}(t)": "_scan({0}, {axis}, reverse={reverse}, "
                "exclusive={exclusive}, running=torch.cumsum)"
                for variant in ("[reverse]", "[exclusive]", "[reverse,exclusive]")
            },
        },
        pypto="pypto.cumsum({0}, {axis})",
        native="t",
        attributes=ir.Scan,
        bound=_cumsum_bound,
    ),
    OpDef(
        "cumprod",
        Kind.SCAN,
        1,
        spec="cumprod",
        torch={
            "cumprod(t)": "torch.cumprod({0}, dim={axis})",
            **{
                f"cumprod{variant}(t)": "_scan({0}, {axis}, reverse={reverse}, "
                "exclusive={exclusive}, running=torch.cumprod)"
                for variant in ("[reverse]", "[exclusive]", "[reverse,exclusive]")
            },
        },
        attributes=ir.Scan,
        bound=_cumprod_bound,
    ),
    OpDef(
        "iota",
        Kind.INDEX,
        1,
        # `index(x, axis=a)` in a spec: the positions 0, 1, ... of x's `axis` (x's values
        # unused), shaped to broadcast against x, as a running count of ones: PyPTO's arange
        # gives a 1-D int32 tensor, which the vector ops here cannot broadcast.
        spec="index",
        torch="torch.arange(torch.Size({shape}).numel(), dtype=torch.float64).reshape({shape})",
        pypto="(pypto.cumsum(pypto.full({shape}, 1.0, pypto.{dtype}), {axis}) - 1.0)",
        native="t",
        attributes=ir.Along,
        bound=_exact_bound(lambda t, a, attributes: _iota(t, a.value, attributes.axis)),
    ),
    OpDef(
        "flip",
        Kind.REVERSE,
        1,
        # PyPTO 0.2.0 has no flip: selecting the positions last to first (an int32 arange
        # counting down) is exact in SIM and tiles along the axis (measured at 128 x 4000).
        spec="flip",
        torch="torch.flip({0}, [{axis}])",
        pypto="pypto.index_select({0}, {axis}, pypto.arange({last}, -1, -1))",
        native="t",
        attributes=ir.Along,
        bound=_exact_bound(lambda t, a, attributes: t.flip(a.value, [attributes.axis]), True),
    ),
    # ---- masks ---------------------------------------------------------------------------
    _triangle("triu"),
    _triangle("tril"),
    # ---- arg-reductions and conversions -------------------------------------------------
    _arg_reduction("argmax"),
    _arg_reduction("argmin"),
    _cast(),
    # ---- crops and concatenation --------------------------------------------------------
    OpDef(
        "slice",
        Kind.SLICE,
        1,
        torch="_crop({0}, {starts}, {stops})",
        pypto="pypto.view({0}, {shape}, {starts})",
        native="t",
        attributes=ir.Slice,
        bound=_exact_bound(lambda t, a, attributes: _cropped(a.value, attributes), True),
    ),
    OpDef(
        "cat",
        Kind.CONCAT,
        2,
        spec="cat",
        torch="torch.cat([{0}, {1}], dim={axis})",
        pypto="pypto.concat([{0}, {1}], {axis})",
        native="t,t",
        attributes=ir.Along,
        bound=_concat_bound,
    ),
    # ---- window reductions (pooling) ----------------------------------------------------
    *(_window_op(reduction) for reduction in ("max", "min", "sum", "mean")),
    # ---- convolution ---------------------------------------------------------------------
    OpDef(
        "conv",
        Kind.CONV,
        2,
        spec="conv",
        torch="_conv({0}, {1}, {stride}, {padding}, {dilation}, {groups})",
        native="t,t",
        attributes=ir.Conv,
        bound=_conv_bound,
    ),
    OpDef(
        "conv_transpose",
        Kind.CONV,
        2,
        spec="conv_transpose",
        torch="_conv_transpose({0}, {1}, {stride}, {padding}, {output_padding}, {dilation}, "
        "{groups})",
        native="t,t",
        attributes=ir.ConvTranspose,
        bound=_conv_bound,
    ),
    # ---- matmul and layout --------------------------------------------------------------
    OpDef(
        "matmul",
        Kind.MATMUL,
        2,
        torch="torch.matmul({0}, {1})",
        attributes=ir.Transposes,
        native="t,t",
        bound=_matmul_bound,
    ),
    OpDef("transpose", Kind.LAYOUT, 1, torch="{0}.mT", result=op_types.TRANSPOSE),
    OpDef("clone", Kind.LAYOUT, 1, pypto="pypto.clone({0})", result=op_types.SAME),
    OpDef(
        "expand",
        Kind.LAYOUT,
        1,
        pypto="pypto.expand_clone({0}, {shape})",
        attributes=ir.Expand,
        result=op_types.EXPAND,
    ),
    # A window phase's padding and its axis splits (materialise; pypto.reshape runs on
    # values inside a kernel, measured in SIM).
    OpDef(
        "fill",
        Kind.LAYOUT,
        0,
        pypto="pypto.full({shape}, {value}, pypto.{dtype})",
        attributes=ir.Fill,
        result=op_types.CREATED,
    ),
    OpDef(
        "reshape",
        Kind.LAYOUT,
        1,
        torch="torch.reshape({0}, {shape})",
        pypto="pypto.reshape({0}, {shape})",
        native="t",
        attributes=ir.Reshape,
        bound=_exact_bound(lambda t, a, attributes: a.value.reshape(attributes.shape), True),
        result=op_types.RESHAPE,
    ),
    # `x.transpose(1, 2)` of a spec (a kernel of its own: the partition cuts around it) and
    # a window phase's last-axis steps.
    OpDef(
        "swap",
        Kind.LAYOUT,
        1,
        torch="torch.transpose({0}, {first}, {second}).contiguous()",
        pypto="pypto.transpose({0}, {first}, {second})",
        native="t",
        attributes=ir.Swap,
        bound=_exact_bound(
            lambda t, a, attributes: a.value.transpose(attributes.first, attributes.second), True
        ),
        result=op_types.SWAP,
    ),
]

OPS: dict[str, OpDef] = {op.name: op for op in _OPS}


def lookup(name: str) -> OpDef:
    try:
        return OPS[name]
    except KeyError:
        raise UnknownOp(f"no op `{name}` in ptodsl's op registry") from None


# Each kind's type rule; a layout op names its own (`OpDef.result`).
_KIND_TYPE_RULES = {
    Kind.ARITHMETIC: op_types.ELEMENTWISE,
    Kind.ELEMENTWISE: op_types.ELEMENTWISE,
    Kind.COMPARISON: op_types.ELEMENTWISE,
    Kind.SELECT: op_types.SELECT,
    Kind.REDUCTION: op_types.REDUCTION,
    Kind.ARG_REDUCTION: op_types.ARG_REDUCTION,
    Kind.AXIS: op_types.SAME,
    Kind.SCAN: op_types.SAME,
    Kind.INDEX: op_types.POSITIONS,
    Kind.REVERSE: op_types.SAME,
    Kind.MASK: op_types.SAME,
    Kind.CAST: op_types.CAST,
    Kind.SLICE: op_types.CROP,
    Kind.CONCAT: op_types.CONCAT,
    Kind.WINDOW: op_types.WINDOW,
    Kind.CONV: op_types.CONV,
    Kind.MATMUL: op_types.MATMUL,
}


def type_fault(
    name: str, operands: tuple[ir.Expr, ...], attributes: ir.OpAttrs | None, given: ir.Type | None
) -> tuple[ir.Type | None, str | None]:
    """The type an op `name` of these operands and attributes has (`given`, where its rule
    accepts that layout, else its natural type), and what is wrong with it, if anything:
    the one rule the front end, the passes (through `ir.op`) and the verifier apply."""
    definition = lookup(name)
    if definition.arity != len(operands):
        return None, f"`{name}` takes {definition.arity} operands, not {len(operands)}"
    if type(attributes) is not (definition.attributes or type(None)):
        expected = definition.attributes.__name__ if definition.attributes else "none"
        return None, f"`{name}` has attributes {attributes!r}, not {expected}"
    types = [operand.type for operand in operands]
    try:
        natural = definition.type_rule.result(types, attributes)
    except op_types.TypeFault as fault:
        return None, f"`{name}` {fault}"
    if given is None:
        if natural is None:
            return None, f"`{name}` creates a value: its type must be given"
        return natural, None
    if not definition.type_rule.accepts(natural, given):
        shapes = ", ".join(map(str, types))
        return None, f"`{name}` of {shapes} has type {given}, not {natural}"
    return given, None


def of_kind(*kinds: Kind) -> tuple[OpDef, ...]:
    return tuple(op for op in _OPS if op.kind in kinds)


# Ops that apply element by element and broadcast their operands (NumPy's rules).
BROADCASTING = (Kind.ARITHMETIC, Kind.ELEMENTWISE, Kind.COMPARISON, Kind.SELECT, Kind.CAST)

# Ops whose result depends on positions along their `axis`, not only on values there.
POSITIONAL = (Kind.SCAN, Kind.INDEX, Kind.REVERSE, Kind.CONCAT)


def positional_axes(values: Iterable[ir.Expr]) -> frozenset[int]:
    """The axes the scans, position counts, flips and concatenations among these
    expressions run along, the axes crops cut and windows slide along: no pass may merge one
    with another axis or split it with a loop."""
    axes: set[int] = set()
    for value in values:
        for node in ir.walk(value):
            if not isinstance(node, ir.Op):
                continue
            kind = lookup(node.op).kind
            if kind in POSITIONAL:
                axes.add(node.attrs.axis)
            elif kind is Kind.SLICE:
                axes |= node.attrs.cut()
            elif kind is Kind.WINDOW:
                axes |= set(node.attrs.axes)
            elif kind is Kind.CONV:  # every axis: the cube reads it in its declared layout
                axes |= set(range(node.type.rank))
            elif moves_axes(node.op):  # its operand's views follow the axes it keeps
                axes |= {node.attrs.first, node.attrs.second}
    return frozenset(axes)


def reads_declared_layout(name: str) -> bool:
    """Whether the op reads its declared operands as they are stored (the cube's ops, a
    transpose): such inputs stay out of the kernel's frame of iteration axes."""
    return lookup(name).kind in (Kind.MATMUL, Kind.CONV) or moves_axes(name)


def moves_axes(name: str) -> bool:
    """Whether the op exchanges two axes of its operand (`pypto.transpose`, moving data)."""
    return lookup(name).attributes is ir.Swap


def native_forms() -> frozenset[str]:
    """Every form PyPTO 0.2.0 runs natively (`sub(t,s)`, `cast[i64](t)`); the others are
    legalized. An entry's native forms are operand kinds, or a variant and operand kinds."""
    return frozenset(
        f"{op.name}{kinds}" if kinds.startswith("[") else f"{op.name}({kinds})"
        for op in _OPS
        for kinds in op.native.split()
    )


# What each kind needs from its entry; checked at import.
_REQUIRED = {
    Kind.ARITHMETIC: ("operator", "fold", "propagate"),
    Kind.ELEMENTWISE: ("spec", "fold", "scalar", "torch"),
    Kind.COMPARISON: ("operator",),
    Kind.SELECT: ("spec", "torch", "pypto"),
    Kind.REDUCTION: ("spec", "torch", "attributes"),
    Kind.ARG_REDUCTION: ("spec", "torch", "attributes"),
    Kind.AXIS: ("spec", "torch", "attributes"),
    Kind.SCAN: ("spec", "torch", "attributes"),
    Kind.INDEX: ("pypto", "attributes"),
    Kind.REVERSE: ("spec", "torch", "pypto", "attributes"),
    Kind.MASK: ("spec", "torch", "attributes"),
    Kind.CAST: ("torch", "pypto", "attributes"),
    Kind.SLICE: ("torch", "pypto", "attributes"),
    Kind.CONCAT: ("spec", "torch", "pypto", "attributes"),
    Kind.WINDOW: ("spec", "torch", "attributes"),
    Kind.CONV: ("spec", "torch", "attributes"),
    Kind.MATMUL: ("torch", "attributes"),
    Kind.LAYOUT: (),
}


# Spelled in PyPTO without a template: matmul by codegen's cube phases, windows and
# convolutions by materialise's window and convolution phases (pads, reshapes, views,
# matmuls and elementwise ops).
_SPELLED_BY_PHASES = (Kind.MATMUL, Kind.WINDOW, Kind.CONV)

# The attributes passes read by kind: every reduction has axes, every whole-axis op an axis.
_ATTRIBUTE_FAMILY = {
    Kind.REDUCTION: ir.Reduce,
    Kind.ARG_REDUCTION: ir.Reduce,
    Kind.AXIS: ir.Along,
    Kind.SCAN: ir.Scan,
    Kind.INDEX: ir.Along,
    Kind.REVERSE: ir.Along,
    Kind.MASK: ir.Triangle,
    Kind.CAST: ir.Cast,
    Kind.SLICE: ir.Slice,
    Kind.CONCAT: ir.Along,
    Kind.WINDOW: ir.Window,
    Kind.CONV: ir.Conv,
    Kind.MATMUL: ir.Transposes,
}


def _template_faults(op: OpDef) -> list[str]:
    """Each spelling must parse as a Python expression whose operand holes are the op's."""
    templates = [op.operator, op.scalar, op.pypto, op.combine]
    templates += list(op.torch.values()) if isinstance(op.torch, Mapping) else [op.torch]
    faults = []
    for text in filter(None, templates):
        try:
            pytree.template(text)
        except SyntaxError:
            faults.append(f"a spelling that parses (`{text}`)")
            continue
        arity = 2 if text is op.combine else op.arity
        operands = {int(key) for key in pytree.holes(text) if key.isdigit()}
        if not operands <= set(range(arity)):
            faults.append(f"operand holes within its {arity} operands (`{text}`)")
    return faults


def _validate() -> None:
    names = [op.name for op in _OPS]
    duplicated = {name for name in names if names.count(name) > 1}
    if duplicated:
        raise AssertionError(f"ops defined twice: {sorted(duplicated)}")
    for op in _OPS:
        missing = [field for field in _REQUIRED[op.kind] if getattr(op, field) is None]
        if op.kind is Kind.REDUCTION and op.pypto is not None and op.combine is None:
            missing.append("combine")  # a native reduction may be split by a loop
        if op.kind is not Kind.LAYOUT and (op.propagate is None) == (op.bound is None):
            missing.append("one error-bound rule (propagate or bound)")
        if op.native and op.spelling("pypto", "") is None and op.kind not in _SPELLED_BY_PHASES:
            missing.append("pypto (it is native)")
        missing += _template_faults(op)
        if op.result is None and op.kind not in _KIND_TYPE_RULES:
            missing.append("a type rule")
        if missing:
            raise AssertionError(f"op `{op.name}` ({op.kind.value}) lacks {', '.join(missing)}")
        family = _ATTRIBUTE_FAMILY.get(op.kind)
        if family is not None and not issubclass(op.attributes, family):
            raise AssertionError(f"op `{op.name}`'s attributes are not {family.__name__}")


_validate()
