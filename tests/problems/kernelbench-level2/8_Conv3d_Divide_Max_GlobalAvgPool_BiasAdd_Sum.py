# KernelBench level 2 #8 (v0 shapes), written for ptodsl's tests.
# Conv3d, divide by a constant, MaxPool3d, global average pool, per-channel bias, sum over an axis.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(
        self, in_channels, out_channels, kernel_size, divisor, pool_size, bias_shape, sum_dim
    ):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.divisor = divisor
        self.max_pool = nn.MaxPool3d(pool_size)
        self.global_avg_pool = nn.AdaptiveAvgPool3d((1, 1, 1))
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.reduce_dim = sum_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.max_pool(self.conv(x) / self.divisor)
        h = self.global_avg_pool(h) + self.bias  # (N, C, 1, 1, 1)
        return torch.sum(h, dim=self.reduce_dim)


batch_size = 128
in_channels = 3
out_channels = 16
depth, height, width = 16, 32, 32
kernel_size = (3, 3, 3)
divisor = 2.0
pool_size = (2, 2, 2)
bias_shape = (out_channels, 1, 1, 1)
sum_dim = 1


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, divisor, pool_size, bias_shape, sum_dim]
