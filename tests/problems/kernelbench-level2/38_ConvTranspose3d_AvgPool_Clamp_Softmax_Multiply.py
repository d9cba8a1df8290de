# KernelBench level 2 #38 (v0 shapes), written for ptodsl's tests.
# ConvTranspose3d, AvgPool3d, clamp to [0, 1], softmax over channels, times 2.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(
        self,
        in_channels,
        out_channels,
        kernel_size,
        stride,
        padding,
        output_padding,
        pool_kernel_size,
        clamp_min,
        clamp_max,
    ):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(
            in_channels,
            out_channels,
            kernel_size,
            stride=stride,
            padding=padding,
            output_padding=output_padding,
        )
        self.avg_pool = nn.AvgPool3d(pool_kernel_size)
        self.lo = clamp_min
        self.hi = clamp_max

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pooled = self.avg_pool(self.conv_transpose(x))
        probs = torch.softmax(torch.clamp(pooled, self.lo, self.hi), dim=1)
        return probs * 2


batch_size = 16
in_channels = 8
out_channels = 16
depth, height, width = 16, 32, 32
kernel_size = 3
stride = 2
padding = 1
output_padding = 1
pool_kernel_size = 2
clamp_min = 0.0
clamp_max = 1.0


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [
        in_channels,
        out_channels,
        kernel_size,
        stride,
        padding,
        output_padding,
        pool_kernel_size,
        clamp_min,
        clamp_max,
    ]
