"""float64 convolutions one sample at a time, for the goldens.

torch's CPU convolution has no faster backend for float64; its fallback unfolds every tap's
view of the input into one matrix, for the whole batch at once in a forward 3-D
convolution: #66's problem (16 samples, 315 taps by 0.9 M outputs each) asked for 35.6 GB.
A convolution's samples are independent by definition, so running it one sample at a time,
each written into its place in the result, computes the same values with one sample's
unfolded matrix. It is done for torch's convolution functions, whatever module called them,
so it holds for a problem's own Model as for ptodsl's reference. (A `TorchDispatchMode`
would see the op itself, but using one makes torch create a `torchinductor_<user>` folder
in the temporary directory, which `check` must not leave behind.)
"""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode

CONVOLUTIONS = frozenset(
    {
        torch.conv1d,
        torch.conv2d,
        torch.conv3d,
        torch.conv_transpose1d,
        torch.conv_transpose2d,
        torch.conv_transpose3d,
        torch.convolution,
    }
)


class SampleBySample(TorchFunctionMode):
    """Within it, every float64 convolution of a batch of several samples runs one sample at
    a time."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        x = args[0] if args else kwargs.get("input")
        if (
            func not in CONVOLUTIONS
            or not args
            or not isinstance(x, torch.Tensor)
            or x.dtype != torch.float64
            or x.dim() < 3
            or x.shape[0] < 2
        ):
            return func(*args, **kwargs)
        result = None
        for sample in range(x.shape[0]):
            part = func(x[sample : sample + 1], *args[1:], **kwargs)
            if result is None:
                result = part.new_empty((x.shape[0], *part.shape[1:]))
            result[sample : sample + 1] = part
        return result
