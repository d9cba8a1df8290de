# KernelBench level 2 #77 (v0 shapes), written for ptodsl's tests.
# ConvTranspose3d, times a scalar, BatchNorm3d, global average over (D, H, W) -> (B, C, 1, 1, 1).
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(
        self, in_channels, out_channels, kernel_size, scale_factor, eps=1e-5, momentum=0.1
    ):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size)
        self.scale_factor = scale_factor
        self.batch_norm = nn.BatchNorm3d(out_channels, eps=eps, momentum=momentum)
        self.global_avg_pool = nn.AdaptiveAvgPool3d((1, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv_transpose(x) * self.scale_factor
        return self.global_avg_pool(self.batch_norm(y))


batch_size = 16
in_channels = 64
out_channels = 32
depth, height, width = 16, 32, 32
kernel_size = 3
scale_factor = 2.0


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, scale_factor]
