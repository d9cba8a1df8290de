# KernelBench level 2 #16 (v0 shapes), written for ptodsl's tests.
# ConvTranspose2d, Mish, add a constant, hardtanh to [-1, 1], scale.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(
        self,
        in_channels,
        out_channels,
        kernel_size,
        stride,
        padding,
        output_padding,
        add_value,
        scale,
    ):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride, padding, output_padding
        )
        self.shift = add_value
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.mish(self.conv_transpose(x)) + self.shift
        h = F.hardtanh(h, min_val=-1, max_val=1)
        return h * self.scale


batch_size = 128
in_channels = 32
out_channels = 64
height, width = 16, 16
kernel_size = 4
stride = 2
padding = 1
output_padding = 1
add_value = 0.5
scale = 2


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
        add_value,
        scale,
    ]
