# KernelBench level 2 #27 (v0 shapes), written for ptodsl's tests.
# Conv3d, hardswish, ReLU, softmax over channels, then the spatial mean: output (N, C).
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias=True):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(F.hardswish(self.conv(x)))
        probs = torch.softmax(h, dim=1)
        return torch.mean(probs, dim=[2, 3, 4])


batch_size = 128
in_channels = 3
out_channels = 16
depth, height, width = 16, 32, 32
kernel_size = 3


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
