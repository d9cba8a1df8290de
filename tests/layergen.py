"""Random *layer* specs in the style of KernelBench level 2: a convolution (1-D, 2-D or 3-D,
plain or transposed, sometimes grouped or depthwise, strided, padded or dilated, written as a
`conv2d(...)` module weight or as the `conv(x, w, ...)` function) followed by 1-4
channel-wise steps, or the same steps on a plain input (no convolution):

- `affine`: a per-channel bias or scale (`f32[C * 1 * 1]` or `f32[C, 1, 1]` weights);
- `activation`: relu, tanh, sigmoid, GELU written out (erf or tanh form), swish, hardtanh;
- `norm`: batch-norm statistics over `[0, 2, 3(, 4)]`, instance norm over the spatial axes,
  group norm through `reshape` into groups, layer norm over every axis but the batch;
- `window`: `window_max` / `window_mean` over one to three spatial axes;
- `join`: a `cat` of crops of the value (a rotation, a cut, channels doubled);
- `crop`: a slice of a spatial axis (bounds or a step);
- `where`: a leaky or clipping select, or one against the channel mean;
- `channel_reduce`: `sum` / `mean` / `max` over the channels with keepdim.

Shapes stay small (a check takes seconds), batches are 1 or 2, and last axes are often short
(1, 2, 3, 5). `generate(seed)` is plain seeded Python: a failing spec is reproduced from its
seed (`python tests/layergen.py SEED` prints it).
"""

from __future__ import annotations

import math
import random
import sys

import attrs

STEP_KINDS = (
    "affine", "activation", "norm", "window", "join", "crop", "where", "channel_reduce",
)  # fmt: skip


@attrs.frozen
class LayerSpec:
    text: str
    seed: int
    source: str  # "conv2d", "conv_transpose1d", ..., or "input3d" (no convolution)
    steps: tuple[str, ...]  # the kind of each step after the source, with its variant
    elements: int  # of the largest tensor

    @property
    def kinds(self) -> frozenset[str]:
        return frozenset(step.split(":")[0] for step in self.steps)


def _listed(values: list[int]) -> str:
    """One integer when every axis has the same, else a list."""
    return str(values[0]) if len(set(values)) == 1 else str(values)


def _shape_text(shape: tuple[int, ...]) -> str:
    return "f32[" + ", ".join(map(str, shape)) + "]"


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


class _Builder:
    def __init__(self, seed: int):
        self.seed = seed
        self.rng = random.Random(seed)
        self.declarations: list[str] = []
        self.statements: list[str] = []
        self.steps: list[str] = []
        self.count = 0
        self.largest = 0

    # -- values ---------------------------------------------------------------------------

    def let(self, text: str, shape: tuple[int, ...]) -> tuple[str, tuple[int, ...]]:
        name = f"v{self.count}"
        self.count += 1
        self.statements.append(f"let {name} = {text}")
        self.largest = max(self.largest, math.prod(shape))
        return name, shape

    def fresh(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    # -- sources --------------------------------------------------------------------------

    def short_last(self) -> int:
        return self.rng.choice([1, 2, 3, 5])

    def conv_source(self) -> tuple[str, tuple[int, ...], str]:
        rng = self.rng
        rank = rng.choice([1, 2, 2, 2, 3])
        transposed = rng.random() < 0.3
        batch = rng.choice([1, 2])
        c_in = rng.choice([1, 2, 3, 4, 4, 6])
        kind = rng.random()
        if kind < 0.2 and c_in > 1:  # depthwise: a group per input channel
            groups = c_in
            c_out = c_in * rng.choice([1, 1, 2])
        elif kind < 0.45:  # grouped
            groups = rng.choice([g for g in _divisors(c_in)])
            c_out = groups * rng.choice([1, 2, 3])
        else:
            groups = 1
            c_out = rng.choice([1, 2, 3, 4, 5, 6, 8])
        sizes, kernel, stride, padding, dilation, output_padding, out = [], [], [], [], [], [], []
        for axis in range(rank):
            last = axis == rank - 1
            while True:
                k = rng.choice([1, 2, 3, 3])
                s = rng.choice([1, 1, 2]) if rng.random() < 0.5 else 1
                d = rng.choice([1, 1, 2])
                p = rng.randint(0, (d * (k - 1) + 1) // 2) if rng.random() < 0.5 else 0
                if rank == 3:
                    length = rng.choice([2, 3, 4, 5, 6])
                else:
                    length = rng.choice([3, 4, 5, 6, 7, 8, 10, 12])
                if last and rng.random() < 0.35:
                    length = self.short_last()
                op = 0
                if transposed:
                    if max(s, d) > 1 and rng.random() < 0.5:
                        op = rng.randrange(max(s, d))
                    if 2 * p > d * (k - 1) + op + (length - 1) * s:
                        p = 0
                    n_out = (length - 1) * s - 2 * p + d * (k - 1) + op + 1
                else:
                    span = length + 2 * p - d * (k - 1) - 1
                    if span < 0:
                        continue
                    n_out = span // s + 1
                if n_out >= 1:
                    break
            sizes.append(length)
            kernel.append(k)
            stride.append(s)
            padding.append(p)
            dilation.append(d)
            output_padding.append(op)
            out.append(n_out)
        x_shape = (batch, c_in, *sizes)
        y_shape = (batch, c_out, *out)
        self.declarations.append(f"input x: {_shape_text(x_shape)}")
        self.largest = max(self.largest, math.prod(x_shape))
        keywords = []
        if any(s > 1 for s in stride):
            keywords.append(f"stride={_listed(stride)}")
        if any(padding):
            keywords.append(f"padding={_listed(padding)}")
        if any(output_padding):
            keywords.append(f"output_padding={_listed(output_padding)}")
        if any(d > 1 for d in dilation):
            keywords.append(f"dilation={_listed(dilation)}")
        if groups > 1:
            keywords.append(f"groups={groups}")
        func = "conv_transpose" if transposed else "conv"
        source = f"{func}{rank}d" if transposed else f"conv{rank}d"
        if rng.random() < 0.6:  # a torch module, its weights drawn as nn.Conv*d draws them
            bias = rng.random() < 0.5
            if not bias:
                keywords.append("bias=false")
            args = ", ".join([str(c_in), str(c_out), _listed(kernel), *keywords])
            name = "conv_t" if transposed else "conv"
            self.declarations.append(f"weight {name}: {source}({args})")
            text = f"{name}(x)"
            source += "+bias" if bias else ""
        else:
            if transposed:
                w_shape = (c_in, c_out // groups, *kernel)
            else:
                w_shape = (c_out, c_in // groups, *kernel)
            self.declarations.append(f"weight w: {_shape_text(w_shape)} = randn")
            text = f"{func}({', '.join(['x', 'w', *keywords])})"
            source += ":function"
        if groups > 1:
            source += f":groups={groups}" + (":depthwise" if groups == c_in else "")
        return text, y_shape, source

    def input_source(self) -> tuple[str, tuple[int, ...], str]:
        rng = self.rng
        rank = rng.choice([1, 2, 2, 3])
        batch = rng.choice([1, 2])
        channels = rng.choice([1, 2, 3, 4, 6, 8])
        if rank == 3:
            sizes = [rng.choice([2, 3, 4, 5, 6]) for _ in range(3)]
        else:
            sizes = [rng.choice([3, 4, 5, 7, 8, 9, 12, 16]) for _ in range(rank)]
        if rng.random() < 0.5:
            sizes[-1] = self.short_last()
        shape = (batch, channels, *sizes)
        self.declarations.append(f"input x: {_shape_text(shape)}")
        self.largest = max(self.largest, math.prod(shape))
        if rng.random() < 0.3:  # a second input, broadcast along the batch
            self.declarations.append(f"input r: {_shape_text((1, *shape[1:]))}")
            return "x + r", shape, f"input{rank}d+residual"
        return "x", shape, f"input{rank}d"

    # -- steps ----------------------------------------------------------------------------

    def affine(self, v: str, shape: tuple[int, ...]) -> tuple[str, tuple[int, ...]]:
        rng = self.rng
        channels, spatial = shape[1], len(shape) - 2
        name = self.fresh("b")
        if rng.random() < 0.5 and channels > 1:
            declared = f"f32[{channels}{' * 1' * spatial}]"
        else:
            declared = _shape_text((channels, *(1,) * spatial))
        self.declarations.append(f"weight {name}: {declared} = randn")
        op = rng.choice(["+", "*"])
        self.steps.append(f"affine:{'bias' if op == '+' else 'scale'}")
        return self.let(f"{v} {op} {name}", shape)

    def activation(self, v: str, shape: tuple[int, ...]) -> tuple[str, tuple[int, ...]]:
        forms = {
            "relu": f"relu({v})",
            "tanh": f"tanh({v})",
            "sigmoid": f"sigmoid({v})",
            "gelu_erf": f"0.5 * {v} * (1.0 + erf({v} * 0.7071067811865476))",
            "gelu_tanh": (
                f"0.5 * {v} * (1.0 + tanh(0.7978845608028654 * ({v} + 0.044715 * {v} * {v} * {v})))"
            ),
            "swish": f"{v} * sigmoid({v})",
            "hardtanh": f"clamp({v}, -1.0, 1.0)",
        }
        kind = self.rng.choice(sorted(forms))
        self.steps.append(f"activation:{kind}")
        return self.let(forms[kind], shape)

    def norm(self, v: str, shape: tuple[int, ...]) -> tuple[str, tuple[int, ...]] | None:
        rng = self.rng
        rank = len(shape)
        spatial = list(range(2, rank))
        choices = []
        if shape[0] * math.prod(shape[2:]) >= 4:
            choices.append("batch")
        if math.prod(shape[2:]) >= 4:
            choices.append("instance")
        groups = [g for g in _divisors(shape[1]) if g < shape[1]]
        if groups and math.prod(shape[1:]) // max(groups) >= 4:
            choices.append("group")
        if math.prod(shape[1:]) >= 4:
            choices.append("layer")
        if not choices:
            return None
        kind = rng.choice(choices)
        eps = rng.choice(["1e-5", "1e-5", "0.001"])
        if kind == "group":
            g = rng.choice([g for g in groups if math.prod(shape[1:]) // g >= 4])
            grouped = (shape[0], g, shape[1] // g, *shape[2:])
            reshape = ", ".join(map(str, grouped))
            if rng.random() < 0.5:
                reshape = ", ".join([str(shape[0]), str(g), "-1", *map(str, shape[2:])])
            gv, _ = self.let(f"{v}.reshape({reshape})", grouped)
            axes = list(range(2, len(grouped)))
            mu, _ = self.let(f"mean({gv}, axis={axes}, keepdim=true)", grouped)
            var, _ = self.let(f"var({gv}, axis={axes}, keepdim=true, correction=0)", grouped)
            back = ", ".join(map(str, shape))
            self.steps.append(f"norm:group={g}")
            return self.let(f"(({gv} - {mu}) * rsqrt({var} + {eps})).reshape({back})", shape)
        axes = {"batch": [0, *spatial], "instance": spatial, "layer": list(range(1, rank))}[kind]
        mu, _ = self.let(f"mean({v}, axis={axes}, keepdim=true)", shape)
        if rng.random() < 0.5:
            var = f"var({v}, axis={axes}, keepdim=true, correction=0)"
        else:  # written out, as some problems do
            var = f"mean(({v} - {mu}) * ({v} - {mu}), axis={axes}, keepdim=true)"
        var, _ = self.let(var, shape)
        self.steps.append(f"norm:{kind}")
        return self.let(f"({v} - {mu}) * rsqrt({var} + {eps})", shape)

    def window(self, v: str, shape: tuple[int, ...]) -> tuple[str, tuple[int, ...]] | None:
        rng = self.rng
        long_axes = [a for a in range(2, len(shape)) if shape[a] >= 2]
        if not long_axes:
            return None
        count = rng.randint(1, len(long_axes))
        axes = sorted(rng.sample(long_axes, count))
        func = rng.choice(["max", "max", "mean"])
        out = list(shape)
        sizes, strides, paddings, dilations = [], [], [], []
        for axis in axes:
            size = rng.choice([2, 2, 3])
            size = min(size, shape[axis])
            stride = rng.choice([1, size, size])
            dilation = 1 if func == "mean" or size * 2 > shape[axis] else rng.choice([1, 1, 2])
            widest = dilation * (size - 1) + 1
            padding = rng.randint(0, widest // 2) if rng.random() < 0.4 else 0
            span = shape[axis] + 2 * padding - widest
            if span < 0:
                size, stride, dilation, padding, span = 2, 1, 1, 0, shape[axis] - 2
            out[axis] = span // stride + 1
            sizes.append(size)
            strides.append(stride)
            paddings.append(padding)
            dilations.append(dilation)
        keywords = [f"axis={_listed(axes) if len(axes) == 1 else axes}", f"size={_listed(sizes)}"]
        if strides != sizes:
            keywords.append(f"stride={_listed(strides)}")
        if any(paddings):
            keywords.append(f"padding={_listed(paddings)}")
        if any(d > 1 for d in dilations):
            keywords.append(f"dilation={_listed(dilations)}")
        self.steps.append(f"window:{func}x{len(axes)}")
        return self.let(f"window_{func}({v}, {', '.join(keywords)})", tuple(out))

    @staticmethod
    def sliced(v: str, axis: int, bounds: str) -> str:
        return f"{v}[{', '.join([':'] * axis + [bounds])}]"

    def join(self, v: str, shape: tuple[int, ...]) -> tuple[str, tuple[int, ...]] | None:
        rng = self.rng
        long_axes = [a for a in range(2, len(shape)) if shape[a] >= 2]
        kinds = ["channels"] + (["rotate", "cut"] if long_axes else [])
        kind = rng.choice(kinds)
        if kind == "channels":  # the channels doubled: the value and a scaled copy
            out = (shape[0], 2 * shape[1], *shape[2:])
            text = f"cat([{v}, {v} * 0.5], axis=1)"
            if shape[1] >= 2 and rng.random() < 0.5:  # or its channels exchanged
                half = shape[1] // 2
                out = shape
                first, second = self.sliced(v, 1, f"{half}:"), self.sliced(v, 1, f":{half}")
                text = f"cat([{first}, {second}], axis=1)"
                kind = "channel_rotate"
        else:
            axis = rng.choice(long_axes)
            cut = rng.randint(1, shape[axis] - 1)
            written = axis if rng.random() < 0.7 else axis - len(shape)
            if kind == "rotate":
                first, second = self.sliced(v, axis, f"{cut}:"), self.sliced(v, axis, f":{cut}")
                out = shape
            else:  # the middle cut out
                first, second = self.sliced(v, axis, f":{cut}"), self.sliced(v, axis, "-1:")
                out = tuple(cut + 1 if a == axis else s for a, s in enumerate(shape))
            text = f"cat([{first}, {second}], axis={written})"
        self.steps.append(f"join:{kind}")
        return self.let(text, out)

    def crop(self, v: str, shape: tuple[int, ...]) -> tuple[str, tuple[int, ...]] | None:
        rng = self.rng
        long_axes = [a for a in range(2, len(shape)) if shape[a] >= 3]
        if not long_axes:
            return None
        axis = rng.choice(long_axes)
        n = shape[axis]
        kind = rng.choice(["trim", "step", "head"])
        if kind == "trim":
            bounds, size = "1:-1", n - 2
        elif kind == "step":
            step = rng.choice([2, 3]) if n >= 4 else 2
            bounds, size = f"::{step}", len(range(0, n, step))
        else:
            bounds, size = f":{n - 1}", n - 1
        text = self.sliced(v, axis, bounds)
        if axis == len(shape) - 1 and rng.random() < 0.5:
            text = f"{v}[..., {bounds}]"
        self.steps.append(f"crop:{kind}")
        return self.let(text, tuple(size if a == axis else s for a, s in enumerate(shape)))

    def where(self, v: str, shape: tuple[int, ...]) -> tuple[str, tuple[int, ...]]:
        forms = {
            "leaky": f"where({v} > 0.0, {v}, {v} * 0.1)",
            "clip": f"where({v} < 0.5, {v}, 0.5)",
            "channel_mean": f"where({v} >= mean({v}, axis=1, keepdim=true), {v}, 0.0)",
        }
        kind = self.rng.choice(sorted(forms))
        if kind == "channel_mean" and shape[1] == 1:
            kind = "leaky"
        self.steps.append(f"where:{kind}")
        return self.let(forms[kind], shape)

    def channel_reduce(self, v: str, shape: tuple[int, ...]) -> tuple[str, tuple[int, ...]] | None:
        if shape[1] < 2 or math.prod(shape) // shape[1] < 4:
            return None
        func = self.rng.choice(["sum", "mean", "max"])
        self.steps.append(f"channel_reduce:{func}")
        out = (shape[0], 1, *shape[2:])
        return self.let(f"{func}({v}, axis=1, keepdim=true)", out)

    # -- the spec -------------------------------------------------------------------------

    def spec(self) -> LayerSpec:
        rng = self.rng
        text, shape, source = self.conv_source() if rng.random() < 0.7 else self.input_source()
        v, shape = self.let(text, shape)
        wanted = rng.randint(1, 4)
        reduced = False
        attempts = 0
        while len(self.steps) < wanted and attempts < 20:
            attempts += 1
            kind = rng.choice(STEP_KINDS)
            if kind == "channel_reduce" and reduced:
                continue
            result = getattr(self, kind)(v, shape)
            if result is None:
                continue
            v, shape = result
            reduced = reduced or kind == "channel_reduce"
        # the last value is the output
        last = self.statements.pop()
        body = last.removeprefix(f"let {v} = ")
        lines = [f"# generated by tests/layergen.py from seed {self.seed}", "kernel layer"]
        lines += self.declarations
        lines.append(f"output y: {_shape_text(shape)}")
        lines += self.statements
        lines.append(f"y = {body}")
        return LayerSpec(
            "\n".join(lines) + "\n", self.seed, source, tuple(self.steps), self.largest
        )


def generate(seed: int) -> LayerSpec:
    return _Builder(seed).spec()


if __name__ == "__main__":
    for argument in sys.argv[1:]:
        spec = generate(int(argument))
        print(spec.text, f"# source {spec.source}, steps {', '.join(spec.steps)}", sep="")
