# KernelBench level 2 #2 (v0 shapes), written for ptodsl's tests.
# ConvTranspose2d plus a per-channel bias, clamp to [0, 1], scale, clamp again, unscale.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(
        self,
        in_channels,
        out_channels,
        kernel_size,
        stride,
        padding,
        output_padding,
        bias_shape,
        scaling_factor,
    ):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels,
            out_channels,
            kernel_size,
            stride=stride,
            padding=padding,
            output_padding=output_padding,
        )
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.factor = scaling_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv_transpose(x) + self.bias
        y = torch.clamp(y, min=0.0, max=1.0) * self.factor
        y = torch.clamp(y, min=0.0, max=1.0)
        return y / self.factor


batch_size = 128
in_channels = 3
out_channels = 16
height, width = 32, 32
kernel_size = 3
stride = 2
padding = 1
output_padding = 1
bias_shape = (out_channels, 1, 1)
scaling_factor = 2.0


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [
        in_channels,
        out_channels,
        kernel_size,
        stride,
        padding,
        output_padding,
        bias_shape,
        scaling_factor,
    ]
