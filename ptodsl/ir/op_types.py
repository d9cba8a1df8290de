"""Type rules of the ops: each registry entry (`ops.OpDef.result`) names one of these.

A rule takes the operands' types and the op's attributes and returns the type of the
result, or raises `TypeFault` saying why the op has none. `ops.make` builds every op
through its rule and the verifier checks every op against it: the front end, the passes
and the verifier cannot disagree on what an op's type is. A rule's `layouts` (where an op
has them) accept other shapes of the same elements that a pass may give the result: a
matmul seen in the kernel's frame, a 3-D convolution's batch and channel axes as one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import attrs

from ptodsl.ir import nodes as ir

Types = Sequence[ir.Type]


class TypeFault(Exception):
    """An op whose operands and attributes give it no type: a bug where it was built."""


@attrs.frozen
class Rule:
    """The natural result type of an op, and the other layouts its result may take."""

    result: Callable[[Types, object], ir.Type | None]  # None: the builder gives the type
    layouts: Callable[[ir.TensorType, ir.TensorType], bool] | None = None

    def accepts(self, natural: ir.Type | None, given: ir.Type) -> bool:
        if natural is None or natural == given:
            return True
        return (
            self.layouts is not None
            and isinstance(natural, ir.TensorType)
            and isinstance(given, ir.TensorType)
            and natural.dtype == given.dtype
            and self.layouts(natural, given)
        )


def _tensors(types: Types) -> list[ir.TensorType]:
    return [t for t in types if isinstance(t, ir.TensorType)]


def _one_tensor(types: Types) -> ir.TensorType:
    if len(types) != 1 or not isinstance(types[0], ir.TensorType):
        raise TypeFault(f"takes one tensor, not {', '.join(map(str, types))}")
    return types[0]


def _axis_of(axis: int, tensor: ir.TensorType) -> None:
    if not 0 <= axis < tensor.rank:
        raise TypeFault(f"along axis {axis} of {tensor}")


def _broadcast(tensors: list[ir.TensorType]) -> tuple[int, ...]:
    shape: tuple[int, ...] = ()
    for tensor in tensors:
        merged = ir.broadcast_shapes(shape, tensor.shape)
        if merged is None:
            raise TypeFault(f"of {', '.join(map(str, tensors))}: shapes that do not broadcast")
        shape = merged
    return shape


def _elementwise_of(tensors_agreeing: Callable[[Types], list[ir.TensorType]]) -> Rule:
    """Operands that broadcast; the tensors among them agree on one float dtype (computing
    happens in floats: typecheck converts integers and bools on use)."""

    def result(types: Types, _attributes: object) -> ir.Type:
        tensors = _tensors(types)
        if not tensors:
            return ir.SCALAR
        shape = _broadcast(tensors)
        dtypes = {t.dtype for t in tensors_agreeing(types)} or {tensors[0].dtype}
        if len(dtypes) > 1:
            raise TypeFault(f"mixes dtypes {', '.join(sorted(d.value for d in dtypes))}")
        if not all(t.dtype.is_float for t in tensors):
            raise TypeFault("computes on integers (convert them first)")
        return ir.TensorType(shape, dtypes.pop())

    return Rule(result)


ELEMENTWISE = _elementwise_of(_tensors)
# where's condition is a comparison's 0/1 in any float dtype; its branches agree
SELECT = _elementwise_of(lambda types: _tensors(types[1:]))


def _reduced(tensor: ir.TensorType, axes: tuple[int, ...], keepdim: bool) -> tuple[int, ...]:
    if list(axes) != sorted(set(axes)) or not all(0 <= a < tensor.rank for a in axes):
        raise TypeFault(f"over axes {list(axes)} of a rank-{tensor.rank} value")
    if keepdim:
        return tuple(1 if a in axes else size for a, size in enumerate(tensor.shape))
    return tuple(size for a, size in enumerate(tensor.shape) if a not in axes)


def _reduction(types: Types, attributes: ir.Reduce) -> ir.Type:
    tensor = _one_tensor(types)
    return ir.TensorType(_reduced(tensor, attributes.axes, attributes.keepdim), tensor.dtype)


def _arg_reduction(types: Types, attributes: ir.Reduce) -> ir.Type:
    tensor = _one_tensor(types)
    if len(attributes.axes) != 1:
        raise TypeFault(f"over {len(attributes.axes)} axes: a position is along one")
    return ir.TensorType(_reduced(tensor, attributes.axes, attributes.keepdim), ir.DType.I64)


def _same(types: Types, attributes: object) -> ir.Type:
    """A scan, a flip, a mask, softmax: its operand's type, along one of its axes."""
    tensor = _one_tensor(types)
    if isinstance(attributes, ir.Along):
        _axis_of(attributes.axis, tensor)
    return tensor


def _logsumexp(types: Types, attributes: ir.AlongKeep) -> ir.Type:
    tensor = _one_tensor(types)
    _axis_of(attributes.axis, tensor)
    return ir.TensorType(_reduced(tensor, (attributes.axis,), attributes.keepdim), tensor.dtype)


def _positions(types: Types, attributes: ir.Along) -> ir.Type:
    """Its operand's extent along `axis`, 1 along every other axis."""
    tensor = _one_tensor(types)
    _axis_of(attributes.axis, tensor)
    shape = tuple(s if a == attributes.axis else 1 for a, s in enumerate(tensor.shape))
    return ir.TensorType(shape, tensor.dtype)


def _all_ones(natural: ir.TensorType, given: ir.TensorType) -> bool:
    """Positions along an axis merge_axes dropped (of size 1): every position is 0."""
    return given.rank == natural.rank and all(size == 1 for size in given.shape)


def _cast(types: Types, attributes: ir.Cast) -> ir.Type:
    return attrs.evolve(_one_tensor(types), dtype=attributes.dtype)


def _crop(types: Types, attributes: ir.Slice) -> ir.Type:
    """Per axis, stop - start within the operand, or its whole extent where not cut."""
    tensor = _one_tensor(types)
    starts, stops = attributes.starts, attributes.stops
    if not len(starts) == len(stops) == tensor.rank:
        raise TypeFault(f"of {tensor} with bounds of another rank")
    shape = []
    for start, stop, size in zip(starts, stops, tensor.shape, strict=True):
        inside = start == 0 if stop is None else 0 <= start < stop <= size
        if not inside:
            raise TypeFault(f"with bounds {start}:{stop} on an axis of {size}")
        shape.append(size if stop is None else stop - start)
    return ir.TensorType(tuple(shape), tensor.dtype)


def _concat(types: Types, attributes: ir.Along) -> ir.Type:
    """Two values equal on every axis but `axis`, whose extents add up there."""
    tensors = _tensors(types)
    if len(tensors) != 2 or len(types) != 2:
        raise TypeFault("joins two tensors")
    a, b = tensors
    _axis_of(attributes.axis, a)
    if a.rank != b.rank or a.dtype != b.dtype:
        raise TypeFault(f"of {a} and {b}")
    shape = []
    for axis, (x, y) in enumerate(zip(a.shape, b.shape, strict=True)):
        if axis != attributes.axis and x != y:
            raise TypeFault(f"along axis {attributes.axis} of {a} and {b}")
        shape.append(x + y if axis == attributes.axis else x)
    return ir.TensorType(tuple(shape), a.dtype)


def _window(types: Types, attributes: ir.Window) -> ir.Type:
    tensor = _one_tensor(types)
    axes = attributes.axes
    per_axis = (attributes.size, attributes.stride, attributes.padding, attributes.dilation)
    if (
        not axes
        or list(axes) != sorted(set(axes))
        or not 0 <= axes[0] <= axes[-1] < tensor.rank
        or any(len(values) != len(axes) for values in per_axis)
    ):
        raise TypeFault(f"over axes {list(axes)} of {tensor}")
    return ir.TensorType(attributes.result_shape(tensor.shape), tensor.dtype)


def _conv(types: Types, attributes: ir.Conv) -> ir.Type:
    """A declared input and weight of one rank (3 to 5) and dtype, one value per spatial
    axis, channels the groups divide; torch's extents."""
    tensors = _tensors(types)
    if len(tensors) != 2 or len(types) != 2:
        raise TypeFault("convolves a tensor with a weight")
    x, weight = tensors
    spatial = x.rank - 2
    per_axis = [attributes.stride, attributes.padding, attributes.dilation]
    transposed = isinstance(attributes, ir.ConvTranspose)
    if transposed:
        per_axis.append(attributes.output_padding)
    groups = attributes.groups
    in_channels = weight.shape[0] if transposed else weight.shape[1] * groups
    out_channels = weight.shape[1] * groups if transposed else weight.shape[0]
    if not (
        3 <= x.rank <= 5
        and weight.rank == x.rank
        and x.dtype == weight.dtype
        and all(len(values) == spatial for values in per_axis)
        and groups >= 1
        and x.shape[1] == in_channels
        and in_channels % groups == 0
        and out_channels % groups == 0
    ):
        raise TypeFault(f"of {x} by {weight} with {attributes}")
    return ir.TensorType(attributes.result_shape(x.shape, weight.shape), x.dtype)


def _merged_batch(natural: ir.TensorType, given: ir.TensorType) -> bool:
    """A 3-D convolution's batch and channel axes as one (PyPTO 0.2.0 has rank 4)."""
    return natural.rank == 5 and given.shape == (
        natural.shape[0] * natural.shape[1],
        *natural.shape[2:],
    )


def product_shape(
    a: tuple[int, ...], b: tuple[int, ...], transposes: ir.Transposes
) -> tuple[int, ...]:
    """The shape the cube computes from its operands' layouts and transpose flags."""
    if transposes.a_trans:
        a = (*a[:-2], a[-1], a[-2])
    if transposes.b_trans:
        b = (*b[:-2], b[-1], b[-2])
    return (*a[:-1], b[-1])


def _matmul(types: Types, attributes: ir.Transposes) -> ir.Type:
    tensors = _tensors(types)
    if len(tensors) != 2 or len(types) != 2 or min(t.rank for t in tensors) < 2:
        raise TypeFault(f"of {', '.join(map(str, types))}: matrices")
    a, b = tensors
    contraction_a = a.shape[-2] if attributes.a_trans else a.shape[-1]
    contraction_b = b.shape[-1] if attributes.b_trans else b.shape[-2]
    if contraction_a != contraction_b or a.dtype != b.dtype:
        raise TypeFault(f"of {a} and {b}")
    return ir.TensorType(product_shape(a.shape, b.shape, attributes), a.dtype)


def _split(natural: ir.TensorType, given: ir.TensorType) -> bool:
    """The product's axes split, or axes of size 1 added, for the kernel's frame."""
    return ir.splits_into(natural.shape, given.shape)


def _transpose(types: Types, _attributes: object) -> ir.Type:
    tensor = _one_tensor(types)  # a matrix's, or each matrix's of a batch
    return ir.TensorType(ir.swap_last(tensor.shape), tensor.dtype)


def _reshape(types: Types, attributes: ir.Reshape) -> ir.Type:
    tensor = _one_tensor(types)
    if math.prod(attributes.shape) != tensor.size:
        raise TypeFault(f"of {tensor} to {list(attributes.shape)}")
    return ir.TensorType(attributes.shape, tensor.dtype)


def _expand(types: Types, attributes: ir.Expand) -> ir.Type:
    tensor = _one_tensor(types)
    if ir.broadcast_shapes(tensor.shape, attributes.shape) != attributes.shape:
        raise TypeFault(f"of {tensor} to {list(attributes.shape)}")
    return ir.TensorType(attributes.shape, tensor.dtype)


def _swap(types: Types, attributes: ir.Swap) -> ir.Type:
    tensor = _one_tensor(types)
    _axis_of(attributes.first, tensor)
    _axis_of(attributes.second, tensor)
    shape = list(tensor.shape)
    shape[attributes.first], shape[attributes.second] = (
        shape[attributes.second],
        shape[attributes.first],
    )
    return ir.TensorType(tuple(shape), tensor.dtype)


def _created(types: Types, _attributes: object) -> None:
    """An op that creates its value (fill): the type its builder gives it."""
    if types:
        raise TypeFault("takes no operands")
    return None


REDUCTION = Rule(_reduction)
ARG_REDUCTION = Rule(_arg_reduction)
SAME = Rule(_same)
LOGSUMEXP = Rule(_logsumexp)
POSITIONS = Rule(_positions, layouts=_all_ones)
CAST = Rule(_cast)
CROP = Rule(_crop)
CONCAT = Rule(_concat)
WINDOW = Rule(_window)
CONV = Rule(_conv, layouts=_merged_batch)
MATMUL = Rule(_matmul, layouts=_split)
TRANSPOSE = Rule(_transpose)
RESHAPE = Rule(_reshape)
EXPAND = Rule(_expand)
SWAP = Rule(_swap)
CREATED = Rule(_created)
