"""Well-formed random specs: elementwise trees over 1-3 broadcasting inputs, builtins,
params, constants and reductions, scans, masks (triangles and bool inputs), positions,
products, arg-reductions, crops, flips and concatenations, windows (pooling), on shapes of
rank 1 to 4 with primes and size-1 axes.

`generate(random.Random(seed))` is plain seeded Python, so a failing spec is reproduced from
its seed; `specs()` is the hypothesis strategy over seeds. Values stay sane: log, sqrt,
rsqrt, reciprocal, log1p and divisors only see positive operands (inputs `in positive`,
exp, sigmoid, positive constants and params, and sums, products and quotients of those);
exp only sees inputs, so nothing overflows.
"""

from __future__ import annotations

import math
import random

import attrs
from hypothesis import strategies as st

SIZES = [1, 1, 2, 3, 5, 7, 8, 13, 16, 31, 32, 64, 97, 128, 256, 1031]
CONSTANTS = ["0.5", "2.0", "1.5", "0.25", "3.0", "1e-5", "1.0"]
ANY_UNARY = ["abs", "sigmoid", "tanh", "relu", "sin", "cos", "erf"]
POSITIVE_UNARY = ["log", "sqrt", "rsqrt", "reciprocal", "log1p"]
REDUCTIONS = ["sum", "mean", "max", "min"]


@attrs.frozen
class GeneratedSpec:
    text: str
    seed: int
    elements: int  # of the largest tensor


@attrs.frozen
class _Value:
    text: str
    shape: tuple[int, ...] | None  # None: a scalar
    positive: bool


def _shape(rng: random.Random, rank: int, max_elements: int) -> tuple[int, ...]:
    while True:
        shape = tuple(rng.choice(SIZES) for _ in range(rank))
        if math.prod(shape) <= max_elements:
            return shape


def _broadcast(a: tuple[int, ...] | None, b: tuple[int, ...] | None) -> tuple[int, ...] | None:
    if a is None or b is None:
        return a if b is None else b
    rank = max(len(a), len(b))
    a, b = (1,) * (rank - len(a)) + a, (1,) * (rank - len(b)) + b
    return tuple(max(x, y) for x, y in zip(a, b, strict=True))


class _Builder:
    def __init__(self, rng: random.Random, dtype: str, max_elements: int, max_rank: int):
        self.rng = rng
        rank = rng.randint(1, max_rank)
        self.frame = _shape(rng, rank, max_elements)
        self.dims = {f"D{i}": size for i, size in enumerate(self.frame) if size > 1}
        self.names = {size: name for name, size in self.dims.items()}
        self.dtype = dtype
        self.inputs: list[tuple[str, tuple[int, ...], str]] = []
        for index in range(rng.randint(1, 3)):
            if index == 0:
                shape = self.frame  # one input spans the whole frame
            else:
                r = rng.randint(1, rank)  # lower ranks align right, as in NumPy
                shape = tuple(1 if rng.random() < 0.3 else s for s in self.frame[rank - r :])
            domain = "positive" if rng.random() < 0.6 else "real"
            self.inputs.append((f"x{index}", shape, domain))
        self.params = [
            (f"p{i}", rng.choice(["0.5", "1.5", "2.0", "0.75"])) for i in range(rng.randint(0, 2))
        ]

    def type_text(self, shape: tuple[int, ...], dtype: str | None = None) -> str:
        sizes = ", ".join(self.names.get(s, str(s)) for s in shape)
        return f"{dtype or self.dtype}[{sizes}]"

    def leaf(self, tensor: bool = False) -> _Value:
        rng = self.rng
        kind = "input" if tensor else rng.choice(["input", "input", "input", "param", "const"])
        if kind == "param" and self.params:
            return _Value(rng.choice(self.params)[0], None, True)
        if kind == "const" or kind == "param":
            return _Value(rng.choice(CONSTANTS), None, True)
        name, shape, domain = rng.choice(self.inputs)
        return _Value(name, shape, domain == "positive")

    def positive(self, depth: int) -> _Value:
        """A positive value: a positive input, exp or sigmoid, or a sum/product of those."""
        rng = self.rng
        choice = rng.randrange(5) if depth > 0 else 0
        if choice == 0:
            value = self.leaf()
            if value.positive:
                return value
            return _Value(f"exp({value.text})", value.shape, True)
        if choice == 1:
            value = self.expr(depth - 1)
            return _Value(f"sigmoid({value.text})", value.shape, True)
        a, b = self.positive(depth - 1), self.positive(depth - 1)
        op = rng.choice([" + ", " * ", " / "])
        return _Value(f"({a.text}{op}{b.text})", _broadcast(a.shape, b.shape), True)

    def expr(self, depth: int) -> _Value:
        rng = self.rng
        if depth == 0:
            return self.leaf()
        kind = rng.randrange(10)
        if kind == 0:
            value = self.expr(depth - 1)
            return _Value(f"{rng.choice(ANY_UNARY)}({value.text})", value.shape, False)
        if kind == 1:
            value = self.positive(depth - 1)
            return _Value(f"{rng.choice(POSITIVE_UNARY)}({value.text})", value.shape, False)
        if kind == 2:
            name, shape, _ = rng.choice(self.inputs)
            func = rng.choice(["exp", "expm1"])
            return _Value(f"{func}({name})", shape, func == "exp")
        if kind in (3, 4):
            a, b = self.expr(depth - 1), self.expr(depth - 1)
            op = rng.choice([" + ", " - ", " * "])
            return _Value(f"({a.text}{op}{b.text})", _broadcast(a.shape, b.shape), False)
        if kind == 5:
            a, b = self.expr(depth - 1), self.positive(depth - 1)
            return _Value(f"({a.text} / {b.text})", _broadcast(a.shape, b.shape), False)
        if kind == 6:
            a, b = self.expr(depth - 1), self.expr(depth - 1)
            func = rng.choice(["max", "min"])
            return _Value(f"{func}({a.text}, {b.text})", _broadcast(a.shape, b.shape), False)
        if kind == 7:
            base = self.positive(depth - 1)
            exponent = rng.choice(["2.0", "0.5", "3.0", "-1.0"])
            text = rng.choice([f"pow({base.text}, {exponent})", f"{base.text} ** {exponent}"])
            return _Value(text, base.shape, True)
        if kind == 8:
            a, b = self.expr(depth - 1), self.expr(depth - 1)
            t, f = self.expr(depth - 1), self.expr(depth - 1)
            if a.shape is None and b.shape is None:
                a = self.leaf(tensor=True)
            compare = rng.choice(["<", "<=", ">", ">="])  # `==` on floats is all-or-nothing
            shape = _broadcast(_broadcast(a.shape, b.shape), _broadcast(t.shape, f.shape))
            text = f"where({a.text} {compare} {b.text}, {t.text}, {f.text})"
            return _Value(text, shape, False)
        value = self.expr(depth - 1)
        lo = rng.choice(["-1.0", "-0.5", "0.0"])
        hi = rng.choice(["0.5", "1.0", "2.0"])
        text = rng.choice(
            [f"clamp({value.text}, {lo}, {hi})", f"clamp({value.text}, min={lo})",
             f"clamp({value.text}, max={hi})", f"({rng.choice(CONSTANTS)} - {value.text})"]
        )  # fmt: skip
        return _Value(text, value.shape, False)

    def tensor_expr(self, depth: int) -> _Value:
        value = self.expr(depth)
        if value.shape is None:  # a scalar-only tree: make it a tensor
            leaf = self.leaf(tensor=True)
            value = _Value(f"{leaf.text} * {value.text}", leaf.shape, False)
        return value

    def reduction(self, value: _Value) -> tuple[str, tuple[int, ...]]:
        rng = self.rng
        assert value.shape is not None
        rank = len(value.shape)
        func = rng.choice(REDUCTIONS)
        keepdim = rng.random() < 0.5
        keywords = []
        if rng.random() < 0.25:
            axes = tuple(range(rank))
        else:
            axes = tuple(sorted(rng.sample(range(rank), rng.randint(1, rank))))
            written = [a - rank if rng.random() < 0.3 else a for a in axes]
            keywords.append(
                f"axis={written[0]}" if len(written) == 1 and rng.random() < 0.5
                else f"axis=[{', '.join(map(str, written))}]"
            )  # fmt: skip
        if keepdim or rng.random() < 0.5:
            keywords.append(f"keepdim={'true' if keepdim else 'false'}")
        if keepdim:
            shape = tuple(1 if a in axes else s for a, s in enumerate(value.shape))
        else:
            shape = tuple(s for a, s in enumerate(value.shape) if a not in axes)
        return f"{func}({', '.join([value.text, *keywords])})", shape

    def spec(self, seed: int) -> GeneratedSpec:
        rng = self.rng
        statements = []
        value = self.tensor_expr(rng.randint(1, 3))
        if rng.random() < 0.2:  # a normalisation: a reduction broadcast back
            assert value.shape is not None
            axis = rng.randrange(len(value.shape))
            denominator = self.positive(1)
            if denominator.shape is None:
                leaf = self.leaf(tensor=True)
                denominator = _Value(f"exp({leaf.text})", leaf.shape, True)
            func = rng.choice(["sum", "mean", "max"])
            reduced = f"{func}({denominator.text}, axis={axis}, keepdim=true)"
            rank = max(len(value.shape), len(denominator.shape))
            shape = _broadcast(
                value.shape,
                tuple(
                    1 if a == axis else s
                    for a, s in enumerate(
                        (1,) * (rank - len(denominator.shape)) + denominator.shape
                    )
                ),
            )
            if len(denominator.shape) == rank:
                value = _Value(f"{value.text} / {reduced}", shape, False)
        # A scan or a mask draws from a stream of its own: the specs without one stay as
        # they were.
        scan_rng = random.Random(seed * 7919 + 1)
        if scan_rng.random() < 0.2 and value.shape:
            axis = scan_rng.randrange(len(value.shape))
            flags = "".join(
                f", {flag}=true" for flag in ("reverse", "exclusive") if scan_rng.random() < 0.4
            )
            value = _Value(f"cumsum({value.text}, axis={axis}{flags})", value.shape, False)
        elif scan_rng.random() < 0.1 and len(value.shape or ()) >= 2:
            mask = scan_rng.choice(["triu", "tril"])
            diagonal = scan_rng.choice([-2, 0, 1])
            value = _Value(f"{mask}({value.text}, diagonal={diagonal})", value.shape, False)
        # Masks, positions, products and arg-reductions: a third stream of their own.
        extra_rng = random.Random(seed * 7919 + 2)
        extra_inputs = []
        if extra_rng.random() < 0.15:
            extra_inputs.append(f"input m: {self.type_text(self.frame, 'bool')}")
            masked = extra_rng.choice([f"{value.text} * m", f"where(m, {value.text}, 0.5)"])
            value = _Value(masked, _broadcast(value.shape, self.frame), False)
        if extra_rng.random() < 0.1 and value.shape:
            axis = extra_rng.randrange(len(value.shape))
            positions = f"index({value.text}, axis={axis}) * 0.25"
            value = _Value(f"{value.text} + {positions}", value.shape, False)
        # Products of factors in (0.5, 1.5) along at most 64 stay within f32's range and vary.
        short = [a for a, size in enumerate(value.shape or ()) if 2 <= size <= 64]
        if extra_rng.random() < 0.1 and short:
            axis = extra_rng.choice(short)
            value = _Value(f"cumprod(0.5 + sigmoid({value.text}), axis={axis})", value.shape, True)
        if extra_rng.random() < 0.08 and value.shape and value.shape[0] >= 3:
            cropped = (value.shape[0] - 2, *value.shape[1:])
            value = _Value(f"({value.text})[1:-1]", cropped, value.positive)
        if extra_rng.random() < 0.08 and value.shape:
            axis = extra_rng.randrange(len(value.shape))
            joined = tuple(2 * s if a == axis else s for a, s in enumerate(value.shape))
            text = f"cat([{value.text}, {value.text} * 0.5], axis={axis})"
            value = _Value(text, joined, value.positive)
        # Flips and crops of the last axis: a fifth stream.
        flip_rng = random.Random(seed * 7919 + 4)
        if flip_rng.random() < 0.1 and value.shape:
            count = min(len(value.shape), flip_rng.choice([1, 1, 2]))
            axes = flip_rng.sample(range(len(value.shape)), count)
            axis = axes[0] if len(axes) == 1 else axes
            value = _Value(f"flip({value.text}, axis={axis})", value.shape, value.positive)
        if flip_rng.random() < 0.08 and value.shape and value.shape[-1] >= 2:
            cropped = (*value.shape[:-1], value.shape[-1] - 1)
            value = _Value(f"({value.text})[..., :-1]", cropped, value.positive)
        # A where of two tensor branches (its own UB rule): a sixth stream.
        select_rng = random.Random(seed * 7919 + 5)
        if select_rng.random() < 0.1 and value.shape:
            text = f"where({value.text} > 0.5, {value.text}, {value.text} * 0.25)"
            value = _Value(text, value.shape, value.positive)
        # Windows: a fourth stream of their own.
        window_rng = random.Random(seed * 7919 + 3)
        long_axes = [a for a, size in enumerate(value.shape or ()) if size >= 3]
        if window_rng.random() < 0.1 and long_axes:
            value = self.window(window_rng, value, long_axes)
        output_dtype = None
        if rng.random() < 0.3:
            statements.append(f"let t = {value.text}")
            value = _Value("t", value.shape, value.positive)
        short = [a for a, size in enumerate(value.shape or ()) if 2 <= size <= 64]
        if extra_rng.random() < 0.1 and short:
            axis = extra_rng.choice(short)
            func = extra_rng.choice(["argmax", "argmin", "prod"])
            if extra_inputs or any("cumprod(" in text for text in (*statements, value.text)):
                func = "prod"  # positions in masked zeros or running products tie everywhere
            operand = f"0.5 + sigmoid({value.text})" if func == "prod" else value.text
            text = f"{func}({operand}, axis={axis})"
            shape = tuple(s for a, s in enumerate(value.shape) if a != axis)
            output_dtype = None if func == "prod" else "i64"
        elif rng.random() < 0.45:
            text, shape = self.reduction(value)
        else:
            text, shape = value.text, value.shape
        assert shape is not None
        lines = [f"# generated by tests/specgen.py from seed {seed}", "kernel generated"]
        if self.dims:
            lines.append("dims " + ", ".join(f"{n} = {s}" for n, s in self.dims.items()))
        lines += [f"param {name}: f32 = {value}" for name, value in self.params]
        for name, input_shape, domain in self.inputs:
            suffix = " in positive" if domain == "positive" else ""
            lines.append(f"input {name}: {self.type_text(input_shape)}{suffix}")
        lines += extra_inputs
        lines.append(f"output y: {self.type_text(shape, output_dtype)}")
        lines += statements
        lines.append(f"y = {text}")
        elements = max(math.prod(s) for _, s, _ in self.inputs)
        return GeneratedSpec("\n".join(lines) + "\n", seed, max(elements, math.prod(shape)))

    def window(self, rng: random.Random, value: _Value, long_axes: list[int]) -> _Value:
        """window_max/min/sum/mean over one or two axes, torch's pooling arithmetic."""
        axes = sorted(rng.sample(long_axes, min(len(long_axes), rng.choice([1, 1, 2]))))
        reduction = rng.choice(["max", "min", "sum", "mean"])
        shape = list(value.shape)
        sizes, strides, paddings, dilations = [], [], [], []
        for axis in axes:
            size, stride = rng.choice([2, 3]), rng.choice([1, 2, 3])
            dilation = 1 if reduction == "mean" else rng.choice([1, 2])
            widest = size if reduction == "mean" else dilation * (size - 1) + 1
            padding = rng.randint(0, widest // 2)
            span = shape[axis] + 2 * padding - dilation * (size - 1) - 1
            if span < 0:
                size, dilation, padding, span = 2, 1, 1, shape[axis] - 1
            shape[axis] = span // stride + 1
            sizes.append(size)
            strides.append(stride)
            paddings.append(padding)
            dilations.append(dilation)

        def listed(values: list[int]) -> str:
            return str(values[0]) if len(values) == 1 else str(values)

        text = (
            f"window_{reduction}({value.text}, axis={listed(axes)}, size={listed(sizes)}, "
            f"stride={listed(strides)}, padding={listed(paddings)}, "
            f"dilation={listed(dilations)})"
        )
        return _Value(text, tuple(shape), value.positive)


def generate(
    seed: int, dtype: str = "f32", max_elements: int = 1 << 20, max_rank: int = 4
) -> GeneratedSpec:
    return _Builder(random.Random(seed), dtype, max_elements, max_rank).spec(seed)


def specs(dtype: str = "f32", max_elements: int = 1 << 20) -> st.SearchStrategy[GeneratedSpec]:
    return st.integers(0, 2**32 - 1).map(lambda seed: generate(seed, dtype, max_elements))


def generate_loop(seed: int) -> GeneratedSpec:
    """A random time loop: a sequence `x`, one or two carried values, an input read whole
    and a weight, each step a random tree of them (a matmul by the weight now and then),
    every step's output and, now and then, a carried value's last; the loop as long as the
    sequence or one step shorter."""
    rng = random.Random(seed)
    steps, batch, width = (
        rng.choice([1, 2, 3, 5]),
        rng.choice([1, 2, 3, 8]),
        rng.choice([1, 4, 16, 31]),
    )
    count = steps - 1 if steps > 1 and rng.random() < 0.3 else steps
    carried = ["h", "c"][: rng.randint(1, 2)]

    def term(depth: int) -> str:
        if depth == 0:
            return rng.choice(["x[t]", *carried, "b", rng.choice(CONSTANTS)])
        shape = rng.random()
        if shape < 0.3:
            return f"{rng.choice(ANY_UNARY)}({term(depth - 1)})"
        if shape < 0.4:  # a matmul of a carried value, which is [B, N]
            return f"({rng.choice(carried)} @ w.T)"
        op = rng.choice(["+", "-", "*"])
        return f"({term(depth - 1)} {op} {term(depth - 1)})"

    body = []
    for name in carried:
        # bounded, so that a long loop's values stay in range
        body.append(f"    {name} = {rng.choice(['tanh', 'sigmoid'])}({term(2)} + {name})")
    body.append(f"    y[t] = {term(2)} + {carried[0]}")  # [B, N] whatever the tree's shape
    final = rng.random() < 0.5
    lines = [
        "kernel looped",
        f"dims T = {steps}, S = {count}, B = {batch}, N = {width}",
        "input x: f32[T, B, N]",
        *(f"input {name}0: f32[B, N]" for name in carried),
        "input b: f32[N]",
        "weight w: f32[N, N] = randn * 0.1",
        "output y: f32[S, B, N]",
        *(["output last: f32[B, N]"] if final else []),
        *(f"let {name} = {name}0" for name in carried),
        "for t in range(S)",
        *body,
        "end",
        *([f"last = {carried[-1]}"] if final else []),
    ]
    return GeneratedSpec("\n".join(lines) + "\n", seed, steps * batch * width)


def loop_specs() -> st.SearchStrategy[GeneratedSpec]:
    return st.integers(0, 2**32 - 1).map(generate_loop)
