# KernelBench level 2 #17 (v0 shapes), written for ptodsl's tests.
# Conv2d, InstanceNorm2d (no affine, no running stats), divide by a constant.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, divide_by):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.instance_norm = nn.InstanceNorm2d(out_channels)
        self.divisor = divide_by

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.instance_norm(self.conv(x)) / self.divisor


batch_size = 128
in_channels = 3
out_channels = 16
height, width = 32, 32
kernel_size = 3
divide_by = 2.0


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, divide_by]
