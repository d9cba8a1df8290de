# KernelBench level 2 #79 (v0 shapes), written for ptodsl's tests.
# Conv3d, times a learned per-channel factor, InstanceNorm3d (no affine), clamp, times the same
# factor again, max over channels -> (B, D, H, W).
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(
        self, in_channels, out_channels, kernel_size, multiplier_shape, clamp_min, clamp_max
    ):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.multiplier = nn.Parameter(torch.randn(multiplier_shape))
        self.instance_norm = nn.InstanceNorm3d(out_channels)
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        m = self.multiplier
        y = self.instance_norm(self.conv(x) * m)
        y = torch.clamp(y, self.clamp_min, self.clamp_max) * m
        return y.max(dim=1).values


batch_size = 128
in_channels = 3
out_channels = 16
depth, height, width = 16, 32, 32
kernel_size = 3
multiplier_shape = (out_channels, 1, 1, 1)
clamp_min = -1.0
clamp_max = 1.0


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, multiplier_shape, clamp_min, clamp_max]
