"""How far a correct kernel's output may be from the exact result, element by element.

The checked spec is evaluated in float64 a second time, carrying beside every value its
*error scale*: a first-order bound, in units of the dtype's rounding unit, on how far a
correct low-precision evaluation of that value may drift. Inputs are exact (they are given
in the kernel's dtype); every op adds the rounding of its own result (|value|) to what its
operands' errors become through it (the op's derivative, in magnitudes):

    a + b      s_a + s_b + |a + b|
    a * b      s_a |b| + |a| s_b + |a b|
    exp(a)     exp(a) (s_a + 1)
    sum(a)     sqrt(sum(s_a^2)) + sum(|a|)     the terms' magnitudes, never the (cancelling) result
    a @ b      sqrt(s_a^2 @ b^2) + sqrt(a^2 @ s_b^2) + |a| @ |b|

A contraction (a sum, a matmul, a convolution) adds its terms' errors as independent errors
add, by their root sum of squares (the probabilistic model of rounding error, Higham and
Mary 2019), and counts its own rounding whole. Adding magnitudes instead compounds layer
after layer: a 9-layer perceptron's bound reached 585 where its outputs are about 0.1, and
a kernel ignoring its input would have passed.

A correct kernel then satisfies |kernel - exact| <= atol + rtol * scale for every element;
rtol is a multiple of the rounding unit that absorbs accumulation order and the accuracy of
the hardware's function approximations. Nothing here looks at the tensor's mean: a large
output elsewhere never loosens the bound of a small element.

`axis_ambiguities` reports the reductions whose result the inputs cannot tell from a
reduction over other axes (a kernel reducing the wrong axis would pass).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence

import attrs
import torch

from ptodsl.ir import nodes as ir
from ptodsl.ir import ops


@attrs.frozen
class Bounded:
    """A float64 value and its error scale (same shape, >= 0); comparisons carry no scale."""

    value: torch.Tensor
    scale: torch.Tensor


def _exact_scale(value: float) -> float:
    """A constant rounds when the kernel's dtype cannot hold it exactly (0.1, not 0.5)."""
    return 0.0 if float(torch.tensor(value, dtype=torch.float32)) == value else abs(value)


def _scalar(value: float) -> Bounded:
    tensor = torch.tensor(float(value), dtype=torch.float64)
    return Bounded(tensor, torch.tensor(_exact_scale(float(value)), dtype=torch.float64))


# Each rule: (operands, the node's typed attributes) -> Bounded. Every op's rule comes from
# its registry entry (`ptodsl.ir.ops`): elementwise ops state how operand errors propagate
# through their derivative (the result's own rounding is added here), the others state the
# whole rule (`bound`).
Rule = Callable[[list[Bounded], "ir.OpAttrs | None"], Bounded]


def _elementwise(op: ops.OpDef) -> Rule:
    """An elementwise op from the registry: its value (the torch function of its name), how
    operand errors propagate through it (`op.propagate`, in magnitudes), the result's own
    rounding |v| unless it only selects or flips a sign, and `op.hidden`, the magnitude of
    an intermediate the target's formula rounds and then cancels (tanh as 2 sigmoid(2x) - 1
    rounds values near 1 even where tanh is near 0)."""
    function = getattr(torch, op.name)

    def rule(operands: list[Bounded], _attributes: ir.OpAttrs | None) -> Bounded:
        result = function(*(o.value for o in operands))
        scale = op.propagate(torch, result, *operands)  # type: ignore[misc]
        scale = scale + (result.abs() if op.rounds else 0.0) + op.hidden
        return Bounded(result, scale)

    return rule


def _own_rule(op: ops.OpDef) -> Rule:
    """An op whose entry states its whole rule (`op.bound`): reductions, softmax, matmul,
    selections and comparisons."""

    def rule(operands: list[Bounded], attributes: ir.OpAttrs | None) -> Bounded:
        value, scale = op.bound(torch, operands, attributes)  # type: ignore[misc]
        return Bounded(value, scale)

    return rule


RULES: dict[str, Rule] = {
    op.name: _elementwise(op) if op.propagate is not None else _own_rule(op)
    for op in ops.OPS.values()
    if op.propagate is not None or op.bound is not None
}


# Called with every op node evaluated, its operands and its result (`ptodsl.checking.draws`).
Observer = Callable[[ir.Op, list[Bounded], Bounded], None]


class _Evaluator:
    def __init__(
        self,
        kernel: ir.Kernel,
        inputs: Sequence[torch.Tensor],
        params: Mapping,
        observer: Observer | None = None,
    ):
        self.kernel = kernel
        self.observer = observer
        self.env: dict[str, Bounded] = {}
        for tensor, value in zip(kernel.inputs, inputs, strict=True):
            exact = value.to(torch.float64).reshape(tensor.type.shape)
            self.env[tensor.name] = Bounded(exact, torch.zeros_like(exact))
        for param in kernel.kernel_params:
            if param.name in params:
                self.env[param.name] = _scalar(float(params[param.name]))  # type: ignore[arg-type]
        self.ambiguities: list[str] = []

    def evaluate(self, expr: ir.Expr) -> Bounded:
        if isinstance(expr, ir.Const):
            return _scalar(expr.value)
        if isinstance(expr, ir.Ref):
            return self.env[expr.name]
        operands = [self.evaluate(operand) for operand in expr.operands]
        rule = RULES.get(ops.lookup(expr.op).name)
        if rule is None:
            raise ops.UnknownOp(f"op `{expr.op}` has no error-bound rule")
        result = rule(operands, expr.attrs)
        if bool(result.value.isinf().any()):
            # an infinity the spec writes (a mask's `-inf`) and what it propagates to: exact,
            # as IEEE arithmetic gives it (overflowing finite values are a draw's failure)
            scale = torch.where(result.value.isinf(), 0.0, result.scale.expand(result.value.shape))
            result = Bounded(result.value, scale)
        if self.observer is not None:
            self.observer(expr, operands, result)
        if isinstance(expr.attrs, ir.Reduce):
            self._note_ambiguous_axes(expr, rule, operands, expr.attrs, result)
        return result

    def _note_ambiguous_axes(
        self,
        expr: ir.Op,
        rule: Rule,
        operands: list[Bounded],
        attributes: ir.Reduce,
        result: Bounded,
    ) -> None:
        """Another choice of axes with the same result shape whose result the inputs make
        indistinguishable from this one: a kernel reducing those axes would pass."""
        shape = tuple(operands[0].value.shape)
        axes = attributes.axes

        def counted(chosen: tuple[int, ...]) -> set[int]:
            return {a for a in chosen if shape[a] > 1}

        for other in itertools.combinations(range(len(shape)), len(axes)):
            # Axes 1 long reduce nothing: choices that differ only in those (BatchNorm's
            # [0, 2, 3] and [1, 2, 3] at batch 1 and one channel) are the same reduction.
            if counted(other) == counted(axes):
                continue
            alternative = rule(operands, attrs.evolve(attributes, axes=other))
            if alternative.value.shape != result.value.shape:
                continue
            scale = torch.maximum(result.scale, alternative.scale)
            bound = element_bound(scale, expr.type.dtype)  # type: ignore[union-attr]
            if bool(((alternative.value - result.value).abs() <= bound).all()):
                self.ambiguities.append(
                    f"`{expr.op}` over axes {list(axes)} (spec line {expr.span.line}) gives "
                    f"the same result over axes {list(other)} for these inputs"
                )


def evaluate_bounds(
    kernel: ir.Kernel,
    inputs: Sequence[torch.Tensor],
    params: Mapping[str, object],
    observer: Observer | None = None,
) -> tuple[list[Bounded], list[str]]:
    """Every output of the checked `kernel` (declared shapes) with its error scale, and the
    reductions whose axes the inputs cannot tell apart. `observer` sees every op node."""
    evaluator = _Evaluator(kernel, inputs, params, observer)
    results: dict[str, Bounded] = {}
    # A let is let go after its last read: attention's float64 scores and their scales
    # are the largest values of a network, and holding every one held them all.
    ending = ir.let_lifetimes(kernel.body)
    for index, stmt in enumerate(kernel.body):
        value = evaluator.evaluate(stmt.value)
        if isinstance(stmt, ir.Let):
            evaluator.env[stmt.name] = value
        else:
            results[stmt.output] = value
        for name in ending.get(index, ()):
            del evaluator.env[name]
    outputs = []
    for output in kernel.outputs:
        bounded = results[output.name]
        shape = output.declared_shape
        outputs.append(
            Bounded(
                bounded.value.expand(output.type.shape).reshape(shape),
                bounded.scale.expand(output.type.shape).reshape(shape),
            )
        )
    return outputs, evaluator.ambiguities


# Per output dtype: every element within atol + rtol * scale. f32: rtol is about 67
# rounding units (accumulation order, the hardware's function approximations); atol is a
# floor for values that should be exact zeros or flush to zero, far below any value a
# kernel computes (hidden cancellations are in the rules above, not in atol). Calibrated on
# every example: the largest f32 error is 0.06 of its bound (ptodsl bench bounds).
# f16/bf16: rtol is twice the dtype's unit roundoff u (2^-11, 2^-8): a correctly rounded
# evaluation stays within u * scale, and 22 correct f16 and bf16 kernels (elementwise,
# selections, sums, softmax, norms, matmul) reached at most 0.97 u * scale in SIM, so 0.48
# of the bound; a kernel one or two units off fails (an f16 output rounded through bf16:
# 2.4 of its bound; x 1.002: 1.6). f16's atol is twice its smallest normal, 2^-13: a target
# that flushes subnormals to zero stays within it.
TOLERANCES = {
    ir.DType.F32: (1e-8, 4e-6),
    ir.DType.F16: (2.0**-13, 2.0**-10),
    ir.DType.BF16: (1e-8, 2.0**-7),
    # Integer outputs are positions (argmax): exact, where the scale is 0, and free where
    # a tie within the operand's errors makes it infinite.
    ir.DType.I64: (0.0, 1.0),
}
BOUND_RULE = (
    "each element within atol + rtol * scale of the golden; scale is the computation's "
    "own error scale there (every op's rounding and condition, sum(|terms|), |A| @ |B|, "
    "operand errors through sums and products by their root sum of squares), "
    "never a mean over the tensor; f32 atol 1e-8 rtol 4e-6; f16 atol 2^-13 rtol 2^-10 and "
    "bf16 atol 1e-8 rtol 2^-7 (twice the dtype's unit roundoff); i64 positions exact "
    "unless tied within their operand's errors"
)


def element_bound(scale: torch.Tensor, dtype: ir.DType) -> torch.Tensor:
    """How far each element of a correct kernel's output may be from the exact value."""
    atol, rtol = TOLERANCES[dtype]
    return atol + rtol * scale.to(torch.float64)
