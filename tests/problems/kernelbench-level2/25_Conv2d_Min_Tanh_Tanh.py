# KernelBench level 2 #25 (v0 shapes), written for ptodsl's tests.
# Conv2d, minimum over channels (kept as a size-1 axis), tanh twice.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lowest = torch.min(self.conv(x), dim=1, keepdim=True).values
        return torch.tanh(torch.tanh(lowest))


batch_size = 128
in_channels = 3
out_channels = 16
height, width = 32, 32
kernel_size = 3


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
