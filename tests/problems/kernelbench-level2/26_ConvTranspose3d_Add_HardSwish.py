# KernelBench level 2 #26 (v0 shapes), written for ptodsl's tests.
# ConvTranspose3d, add a second input of the output's shape, then h * hardswish(h).
# The `bias` parameter is created (and drawn from the RNG) but never used.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(
        self, in_channels, out_channels, kernel_size, stride, padding, output_padding, bias_shape
    ):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(
            in_channels,
            out_channels,
            kernel_size,
            stride=stride,
            padding=padding,
            output_padding=output_padding,
        )
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x: torch.Tensor, add_input: torch.Tensor) -> torch.Tensor:
        h = self.conv_transpose(x) + add_input
        return h * F.hardswish(h)


batch_size = 128
in_channels = 32
out_channels = 64
D, H, W = 16, 16, 16
kernel_size = 3
stride = 2
padding = 1
output_padding = 1
bias_shape = (out_channels, 1, 1, 1, 1)


def get_inputs():
    x = torch.randn(batch_size, in_channels, D, H, W)
    extra = torch.randn(batch_size, out_channels, D * stride, H * stride, W * stride)
    return [x, extra]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding, bias_shape]
