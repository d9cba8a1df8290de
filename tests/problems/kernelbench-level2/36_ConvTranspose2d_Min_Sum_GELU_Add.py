# KernelBench level 2 #36 (v0 shapes), written for ptodsl's tests.
# ConvTranspose2d, min over channels -> (N, 1, H, W), sum over height -> (N, 1, 1, W), GELU,
# then a (C, 1, 1) bias broadcast back to (N, C, 1, W).
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(
        self, in_channels, out_channels, kernel_size, stride, padding, output_padding, bias_shape
    ):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride, padding, output_padding
        )
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lowest = torch.min(self.conv_transpose(x), dim=1, keepdim=True).values
        col_sum = torch.sum(lowest, dim=2, keepdim=True)
        return F.gelu(col_sum) + self.bias


batch_size = 128
in_channels = 3
out_channels = 16
height, width = 32, 32
kernel_size = 3
stride = 2
padding = 1
output_padding = 1
bias_shape = (out_channels, 1, 1)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding, bias_shape]
