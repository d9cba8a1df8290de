# KernelBench level 2 #57 (v0 shapes), written for ptodsl's tests.
# Conv2d, ReLU, then a hand-written hard-swish: r * clamp((r + 3) / 6, 0, 1).
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        r = torch.relu(self.conv(x))
        gate = torch.clamp((r + 3) / 6, 0, 1)
        return r * gate


batch_size = 128
in_channels = 3
out_channels = 16
height, width = 32, 32
kernel_size = 3


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
