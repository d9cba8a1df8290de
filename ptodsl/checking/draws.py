"""The input draws a check runs a kernel on, and what the spec needs them to reach.

One seeded draw leaves parts of a computation unexercised: the row maximum of 256 normal
samples is always above 1, so a kernel that clamps it at 1 passes; at unit variance,
LayerNorm's eps moves its output by less than f32's bound, so a kernel without eps passes.
A check therefore runs the kernel on several draws (`draws`), judged alike:

    seed S          the seeded draw (with --against, the problem's own get_inputs())
    small negative  a fresh draw, every real input -|v| x 1e-3: below every threshold
                    at 0 or above, rows that vary little (eps terms dominate)
    negative        a fresh draw, every real input -|v|
    small           a fresh draw, every real input x 1e-3
    positive        a fresh draw, every real input |v|
    large           a fresh draw, every real input x 30
    at thresholds   a fresh draw, half of every real input's values set to the constants
                    the spec compares with (`z != 0.5` is false only at 0.5 exactly)
    reseeded        a fresh draw of the inputs and of the weights

The first two always run; the others run when they reach a branch or a term the earlier
draws left unreached, as the spec's own float64 evaluation observes it (each op's registry
entry says what it has to reach: `ops.OpDef.reaches`), and while an output cannot be judged
(a trivial kernel would pass on every draw run, or no draw of the inputs changes it). A
domain is kept: a `positive` input is only scaled, other domains are only drawn afresh. A
draw whose exact values leave a value's dtype range anywhere is not run: a correct kernel
overflows there. Weights keep the seeded draw's values but on `reseeded`, so that an output
no input changes is seen as such.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import attrs
import torch

from ptodsl.checking.error_bounds import Bounded
from ptodsl.emission.codegen import DROPOUT_MASK
from ptodsl.ir import nodes as ir
from ptodsl.ir import ops

TORCH_DTYPES = {d: getattr(torch, d.torch_name) for d in ir.DType}
# The largest finite value of each floating dtype: a draw whose exact values pass it
# anywhere makes a correct kernel overflow.
LARGEST = {d: torch.finfo(TORCH_DTYPES[d]).max for d in (ir.DType.F32, ir.DType.F16, ir.DType.BF16)}


@attrs.frozen
class Draw:
    """One set of inputs a check runs: the seeds of its inputs and weights, and what is done
    to each real input (`TRANSFORMS`)."""

    name: str
    data_seed: int
    weight_seed: int
    transform: str
    always: bool  # run whatever it reaches
    why: str
    # With --against, its inputs are the problem's own get_inputs() under `data_seed` (the
    # seeded draw, and the reseeded one: fresh inputs of the problem's own distribution)
    problem_inputs: bool = False
    # the values `at thresholds` puts into the inputs (`with_thresholds`)
    values: tuple[float, ...] = ()


def draws(seed: int) -> tuple[Draw, ...]:
    """Every draw a check may run, the seeded one first, the rest in the order tried."""
    return (
        Draw(f"seed {seed}", seed, seed, "as drawn", True, "the seeded inputs", True),
        Draw(
            "small negative",
            seed + 100,
            seed,
            "small negative",
            True,
            "real inputs -|v| x 1e-3: thresholds at 0 and above, eps terms",
        ),
        Draw("negative", seed + 101, seed, "negative", False, "real inputs -|v|"),
        Draw("small", seed + 102, seed, "small", False, "real inputs x 1e-3"),
        Draw("positive", seed + 103, seed, "positive", False, "real inputs |v|"),
        Draw("large", seed + 104, seed, "large", False, "real inputs x 30"),
        Draw(
            THRESHOLDS,
            seed + 106,
            seed,
            THRESHOLDS,
            False,
            "half the real inputs' values at the constants the spec compares with",
        ),
        Draw(
            "reseeded", seed + 105, seed + 105, "as drawn", False, "other inputs and weights", True
        ),
    )


THRESHOLDS = "at thresholds"


def with_thresholds(candidates: Sequence[Draw], seen: set[float]) -> tuple[Draw, ...]:
    """`candidates` with the `at thresholds` draw given the constants the seeded draw saw
    compared with (`Observation.thresholds`), or left out when the spec compares with none."""
    values = tuple(sorted(seen))
    return tuple(
        attrs.evolve(d, values=values) if d.transform == THRESHOLDS else d
        for d in candidates
        if values or d.transform != THRESHOLDS
    )


# What each draw does to a real input's values, by the input's domain: an input that must
# stay positive is only scaled, one of another domain (unit, softmax, sign, range) is only
# drawn afresh.
TRANSFORMS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "as drawn": lambda v: v,
    "small negative": lambda v: -v.abs() * 1e-3,
    "negative": lambda v: -v.abs(),
    "positive": lambda v: v.abs(),
    "small": lambda v: v * 1e-3,
    "large": lambda v: v * 30,
}
# What a draw does to an input that must stay positive: scaling it keeps it positive.
POSITIVE_FORMS = {"small negative": "small", "small": "small", "large": "large"}


def transformed(values: torch.Tensor, domain: str, draw: Draw, index: int = 0) -> torch.Tensor:
    """`values` (input `index`, of `domain`) as `draw` makes them."""
    if not values.is_floating_point() or domain not in ("real", "positive"):
        return values
    exact = values.to(torch.float64)
    if draw.transform == THRESHOLDS:
        return _at_values(exact, draw, index, positive=domain == "positive").to(values.dtype)
    transform = draw.transform
    if domain == "positive":
        transform = POSITIVE_FORMS.get(transform, "as drawn")
    return TRANSFORMS[transform](exact).to(values.dtype)


def _at_values(values: torch.Tensor, draw: Draw, index: int, positive: bool) -> torch.Tensor:
    """Half of `values`, at seeded places, set to the draw's constants (the positive ones
    only, for a positive input)."""
    constants = [v for v in draw.values if v > 0 or not positive]
    if not constants:
        return values
    generator = torch.Generator().manual_seed(draw.data_seed * 1009 + index)
    pick = torch.randint(0, 2 * len(constants), values.shape, generator=generator)
    table = torch.tensor(constants, dtype=torch.float64)
    return torch.where(pick < len(constants), table[pick % len(constants)], values)


def draw_inputs(kernel: ir.Kernel, draw: Draw) -> list[torch.Tensor]:
    """Every input of the checked `kernel` (weights included, in declaration order) as
    `draw` gives them."""
    tied = arg_reduced_inputs(kernel)
    values = []
    masks = iter(dropout_masks(kernel, draw.data_seed))
    for index, tensor in enumerate(kernel.inputs):
        if isinstance(tensor.init, ir.DropoutMask):
            values.append(next(masks))
            continue
        if isinstance(tensor.init, ir.Registered):  # a constant: as the module registers it
            values.append(registered_value(tensor))
            continue
        # A module buffer (a running statistic) or a carried state varies as data does: a
        # small running variance is where eval mode's eps matters.
        weight = tensor.is_weight
        seed = draw.weight_seed if weight else draw.data_seed
        value = make_input(tensor, index, seed, ties=tensor.name in tied)
        values.append(value if weight else transformed(value, tensor.domain, draw, index))
    return values


def registered_value(tensor: ir.Input) -> torch.Tensor:
    """A registered buffer's constant value (`tril(ones)`)."""
    init = tensor.init
    assert isinstance(init, ir.Registered)
    values = torch.full(tensor.declared_shape, init.fill, dtype=TORCH_DTYPES[tensor.type.dtype])
    if init.triangle is not None:
        values = getattr(torch, init.triangle)(values, diagonal=init.diagonal)
    return values


def dropout_masks(kernel: ir.Kernel, seed: int) -> list[torch.Tensor]:
    """The masks ModelNew's forward draws after `torch.manual_seed(seed)`, as it draws
    them (the problem's dropouts draw the same under that seed: torch's own draw)."""
    masks = []
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        for mask in kernel.dropout_masks:
            assert isinstance(mask.init, ir.DropoutMask)
            p = mask.init.p
            rate = (
                next(q.default for q in kernel.params if q.name == p) if isinstance(p, str) else p
            )
            dtype = TORCH_DTYPES[mask.type.dtype]
            masks.append(_DROPOUT_MASK(mask.declared_shape, rate, dtype, "cpu"))
    return masks


def _generated_helper(source: str, name: str) -> Callable:
    """A helper generated modules define, defined here from the same text: the check draws
    exactly what ModelNew draws."""
    namespace = {"torch": torch}
    exec(source, namespace)  # noqa: S102 - ptodsl's own helper text
    return namespace[name]


_DROPOUT_MASK = _generated_helper(DROPOUT_MASK, "_dropout_mask")


def spread(initial: torch.Tensor) -> float:
    """How far the problem's own initial values of a parameter spread (their standard
    deviation; a single value's magnitude): the check's random weights are drawn at that
    scale, so that they meet the layer as the problem's own would. Drawn at 1, a 3-D
    convolution's 81 taps made outputs of about 9 that a later clamp saturated everywhere
    (#96 of level 2: every kernel returning its bound would pass). A parameter that starts
    constant (a norm's ones) keeps 1."""
    values = initial.double().flatten()
    spread = values.std().item() if values.numel() >= 2 else values.abs().item()
    return spread if spread > 0 and math.isfinite(spread) else 1.0


def module_spreads(kernel: ir.Kernel, model: torch.nn.Module) -> dict[str, float]:
    """Each weight's `spread` as the spec's own torch module (its reference's Model, built
    under a seed) starts it: torch's initialisation for a linear or convolution layer,
    randn's 1, a constant's 1."""
    parameters = [p.detach() for p in model.parameters()]
    weights = kernel.weights_in_torch_order
    return {w.name: spread(p) for w, p in zip(weights, parameters, strict=True)}


@attrs.frozen
class Reach:
    """Something an op of the spec must reach on some draw: a branch, a term."""

    line: int
    column: int
    what: str
    text: str  # the op's source text

    def describe(self) -> str:
        return f"`{self.text}` (line {self.line}): {self.what}"


class Observation:
    """What the spec's float64 evaluation on one draw reached (`reached`, of `possible`),
    the values that left their dtype's range (`overflows`) and the constants its
    comparisons compare with (`thresholds`)."""

    def __init__(self, source_text: str):
        self._lines = source_text.splitlines()
        self.possible: set[Reach] = set()
        self.reached: set[Reach] = set()
        self.overflows: list[str] = []
        self.thresholds: set[float] = set()

    def __call__(self, expr: ir.Op, operands: list[Bounded], result: Bounded) -> None:
        entry = ops.lookup(expr.op)
        if entry.kind is ops.Kind.COMPARISON:
            self.thresholds.update(
                float(o.value) for o in operands if o.value.dim() == 0 and bool(o.value.isfinite())
            )
        if entry.reaches is not None:
            for what, mask in entry.reaches(torch, *(o.value for o in operands)):
                reach = Reach(expr.span.line, expr.span.column, what, self._text(expr))
                self.possible.add(reach)
                if bool(torch.as_tensor(mask).any()):
                    self.reached.add(reach)
        dtype = getattr(expr.type, "dtype", None)
        if dtype in LARGEST and result.value.is_floating_point() and result.value.numel():
            magnitudes = result.value.abs()
            if any(bool(o.value.isinf().any()) for o in operands):
                # an infinity the spec writes (`masked_fill(mask, -inf)`) propagates, as in
                # torch; only finite values beyond the range overflow
                magnitudes = torch.where(magnitudes.isinf(), 0.0, magnitudes)
            largest = float(magnitudes.max())
            if largest > LARGEST[dtype] or math.isnan(largest):
                self.overflows.append(
                    f"`{self._text(expr)}` (line {expr.span.line}) reaches {largest:.3g}, "
                    f"beyond {dtype.value}'s range"
                )

    def _text(self, expr: ir.Op) -> str:
        span = expr.span
        if span.line != span.end_line or span.line > len(self._lines):
            return expr.op
        return self._lines[span.line - 1][span.column - 1 : span.end_column - 1]


def unreached(observations: Sequence[Observation]) -> list[Reach]:
    """What some draw could reach and none of `observations` did, in source order."""
    possible = set().union(*(o.possible for o in observations))
    reached = set().union(*(o.reached for o in observations))
    return sorted(possible - reached, key=lambda r: (r.line, r.column, r.what))


def make_input(tensor: ir.Input, index: int, seed: int, ties: bool = False) -> torch.Tensor:
    """Seeded values in the input's domain. Each input index draws from its own
    distribution (scale and offset differ), so that swapping two operands changes results.
    With `ties` (the input reaches an argmax), values are rounded to quarters so that many
    extrema are tied and the tie rule (the first position wins) is checked."""
    generator = torch.Generator().manual_seed(seed * 1009 + index)
    shape = tensor.declared_shape
    if tensor.type.dtype is ir.DType.BOOL:
        return _signs(shape, generator) > 0
    if tensor.domain == "range":
        assert tensor.extent is not None, "typecheck gives every range its extent"
        values = torch.randint(0, tensor.extent, shape, generator=generator)
        return values.to(TORCH_DTYPES[tensor.type.dtype])
    values = _real_values(tensor, index, shape, generator)
    if ties and tensor.domain in TIE_GRID:
        low, high = TIE_GRID[tensor.domain]
        values = (torch.round(values * 4) / 4).clamp(low, high)
    return values.to(TORCH_DTYPES[tensor.type.dtype])


# Quarters that stay inside each domain when an arg-reduction's inputs are rounded for ties
# (rounding would put 0 into `positive` and `unit`); softmax rows and signs are left alone.
TIE_GRID = {"real": (-math.inf, math.inf), "positive": (0.25, math.inf), "unit": (0.25, 0.75)}


def _real_values(
    tensor: ir.Input, index: int, shape: tuple[int, ...], generator: torch.Generator
) -> torch.Tensor:
    if tensor.domain == "positive":
        values = torch.rand(shape, generator=generator, dtype=torch.float64)
        values = 0.1 + 0.15 * index + (1.5 + 0.5 * index) * values
    elif tensor.domain == "unit":
        values = torch.rand(shape, generator=generator, dtype=torch.float64)
        values = 0.02 + 0.96 * values ** (1.0 + 0.5 * index)
    elif tensor.domain == "softmax":
        logits = torch.randn(shape, generator=generator, dtype=torch.float64)
        values = torch.softmax(logits * (1.0 + 0.5 * index), dim=-1)
    elif tensor.domain == "sign":
        values = _signs(shape, generator)
    else:
        # Close enough that norms of differences stay comparable (triplet margins matter),
        # apart enough that swapping two inputs changes every result.
        values = torch.randn(shape, generator=generator, dtype=torch.float64)
        values = _scale_along_every_axis(values, generator)
        values = values * (1.0 + 0.05 * index) + 0.05 * index * (-1) ** index
    return values


def arg_reduced_inputs(kernel: ir.Kernel) -> frozenset[str]:
    """The inputs an argmax or argmin reads, directly or through `let` bindings."""
    lets = {stmt.name: stmt.value for stmt in kernel.body if isinstance(stmt, ir.Let)}

    def names(expr: ir.Expr) -> set[str]:
        found = set()
        for node in ir.walk(expr):
            if isinstance(node, ir.Ref):
                found |= names(lets[node.name]) if node.name in lets else {node.name}
        return found

    return frozenset(
        name
        for stmt in kernel.body
        for node in ir.walk(stmt.value)
        if isinstance(node, ir.Op) and ops.lookup(node.op).kind is ops.Kind.ARG_REDUCTION
        for name in names(node.operands[0])
    )


def _scale_along_every_axis(values: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Multiplies in a scale per index of every axis (0.75 to 1.25): sums along any axis then
    depend on where they are, not only on the distribution. With plain randn every row of
    4096 has a norm close to 64, and a kernel computing sqrt(sum(x / x)) instead of
    sqrt(sum(x * x)) passes."""
    for axis, extent in enumerate(values.shape):
        scales = 0.75 + 0.5 * torch.rand(extent, generator=generator, dtype=torch.float64)
        values.mul_(scales.reshape([extent if a == axis else 1 for a in range(values.dim())]))
    return values


def _signs(shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    """Coin flips of -1 and +1, with about a quarter of the slices along every axis all -1:
    a max along one axis then varies and differs from a max along another (with plain
    coin flips every max is 1). A min of signs stays -1 everywhere, which the check reports
    as vacuous: no input can have both all -1 rows and all +1 columns."""
    values = torch.randint(0, 2, shape, generator=generator).to(torch.float64) * 2 - 1
    for axis, extent in enumerate(shape):
        forced = torch.rand(extent, generator=generator) < 0.25
        mask = forced.reshape([extent if a == axis else 1 for a in range(len(shape))])
        values = torch.where(mask, -1.0, values)
    return values


NodeKey = tuple[int, int, int, int, str]


def node_key(expr: ir.Op) -> NodeKey:
    span = expr.span
    return (span.line, span.column, span.end_line, span.end_column, expr.op)


@attrs.frozen
class NodeValues:
    """Two projections of an op node's values and their range, summed over the parts it
    was evaluated in; the node's operands; the sizes of the axes it reduces."""

    projections: torch.Tensor
    low: float
    high: float
    operands: tuple[NodeKey | str | None, ...]  # an op's key, a name, or None: a constant
    reduced_sizes: tuple[int, ...]


class Fingerprints:
    """What every op node of the spec's float64 evaluation gave on one draw, cheaply enough
    to hold for any shape: equal projections on two draws mean the same values (barring a
    coincidence of measure zero)."""

    def __init__(self) -> None:
        self.nodes: dict[NodeKey, NodeValues] = {}

    def __call__(self, expr: ir.Op, operands: list[Bounded], result: Bounded) -> None:
        values = result.value.to(torch.float64).flatten()
        weights = torch.cos(torch.arange(values.numel(), dtype=torch.float64) * 0.618 + 0.1)
        projections = torch.stack([values.sum(), (values * weights).sum()])
        low = float(values.min()) if values.numel() else 0.0
        high = float(values.max()) if values.numel() else 0.0
        key = node_key(expr)
        seen = self.nodes.get(key)
        if seen is not None:  # another part of the same node (a launch's samples)
            projections = projections + seen.projections
            low, high = min(low, seen.low), max(high, seen.high)
        self.nodes[key] = NodeValues(
            projections,
            low,
            high,
            tuple(map(_operand_key, expr.operands)),
            _reduced(expr, operands),
        )


def _operand_key(expr: ir.Expr) -> NodeKey | str | None:
    if isinstance(expr, ir.Op):
        return node_key(expr)
    return expr.name if isinstance(expr, ir.Ref) else None


def _reduced(expr: ir.Op, operands: list[Bounded]) -> tuple[int, ...]:
    shape = tuple(operands[0].value.shape) if operands else ()
    attributes = expr.attrs
    axes = getattr(attributes, "axes", None)
    if axes is None and getattr(attributes, "axis", None) is not None:
        axes = (attributes.axis,)
    return tuple(shape[a] for a in axes or () if a < len(shape))


def first_constant(
    kernel: ir.Kernel, prints: Sequence[Fingerprints], source_text: str
) -> str | None:
    """The first op node (in evaluation order) whose values are the same on every draw
    while an operand's are not, described: why the outputs after it cannot change."""
    lets = {stmt.name: stmt.value for stmt in kernel.body if isinstance(stmt, ir.Let)}
    first = prints[0].nodes

    def varies(operand: NodeKey | str | None) -> bool:
        if operand is None:
            return False
        if isinstance(operand, str):
            value = lets.get(operand)
            return True if value is None else varies(_operand_key(value))
        return any(
            not torch.allclose(
                p.nodes[operand].projections, first[operand].projections, rtol=1e-12, atol=1e-300
            )
            for p in prints[1:]
        )

    lines = source_text.splitlines()
    for key, node in first.items():
        if varies(key) or not any(varies(o) for o in node.operands):
            continue
        line, column, end_line, end_column, op = key
        text = lines[line - 1][column - 1 : end_column - 1] if line == end_line else op
        value = f"{node.low:.6g} everywhere" if node.low == node.high else "the same values"
        sizes = node.reduced_sizes
        why = " (it reduces axes of size 1)" if sizes and all(s == 1 for s in sizes) else ""
        return f"`{text}` (line {line}) gives {value} whatever its operands{why}"
    return None


def seeded_draw(seed: int) -> Draw:
    """The check's own seeded draw (the problem's get_inputs() with --against)."""
    return draws(seed)[0]
