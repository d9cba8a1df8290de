# KernelBench level 2 #44 (v0 shapes), written for ptodsl's tests.
# ConvTranspose2d, times a constant, spatial mean kept as 1x1; the second spatial mean then
# averages a 1x1 map, so it returns its input unchanged.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(
        self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier
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
        self.multiplier = multiplier

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv_transpose(x) * self.multiplier
        for _ in range(2):
            h = torch.mean(h, dim=[2, 3], keepdim=True)
        return h


batch_size = 128
in_channels = 3
out_channels = 16
height, width = 32, 32
kernel_size = 3
stride = 2
padding = 1
output_padding = 1
multiplier = 0.5


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier]
