# KernelBench level 2 #24 (v0 shapes), written for ptodsl's tests.
# Conv3d, minimum over one axis (depth by default), then softmax over channels.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, dim):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.min_dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lowest = torch.min(self.conv(x), dim=self.min_dim).values
        return torch.softmax(lowest, dim=1)


batch_size = 128
in_channels = 3
out_channels = 16
D, H, W = 16, 32, 32
kernel_size = 3
dim = 2


def get_inputs():
    return [torch.randn(batch_size, in_channels, D, H, W)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, dim]
