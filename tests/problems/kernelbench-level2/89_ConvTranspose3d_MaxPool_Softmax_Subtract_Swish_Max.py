# KernelBench level 2 #89 (v0 shapes), written for ptodsl's tests.
# ConvTranspose3d, MaxPool3d, softmax over channels, minus a per-channel vector, Swish, max over
# channels -> (B, D, H, W).
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
        pool_stride,
        pool_padding,
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
        self.max_pool = nn.MaxPool3d(
            kernel_size=pool_kernel_size, stride=pool_stride, padding=pool_padding
        )
        self.subtract = nn.Parameter(torch.randn(out_channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        probs = torch.softmax(self.max_pool(self.conv_transpose(x)), dim=1)
        shifted = probs - self.subtract.reshape(1, -1, 1, 1, 1)
        act = torch.sigmoid(shifted) * shifted
        return act.max(dim=1).values


batch_size = 128
in_channels = 3
out_channels = 16
depth, height, width = 16, 32, 32
kernel_size = 3
stride = 2
padding = 1
output_padding = 1
pool_kernel_size = 2
pool_stride = 2
pool_padding = 0


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
        pool_stride,
        pool_padding,
    ]
