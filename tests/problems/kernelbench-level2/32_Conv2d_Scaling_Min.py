# KernelBench level 2 #32 (v0 shapes), written for ptodsl's tests.
# Conv2d, scale, minimum over channels (kept as a size-1 axis).
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, scale_factor):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.factor = scale_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scaled = self.conv(x) * self.factor
        return torch.min(scaled, dim=1, keepdim=True).values


batch_size = 128
in_channels = 3
out_channels = 16
height, width = 32, 32
kernel_size = 3
scale_factor = 2.0


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, scale_factor]
