# KernelBench level 2 #46 (v0 shapes), written for ptodsl's tests.
# Conv2d, subtract a constant, tanh, subtract another constant, AvgPool2d.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(
        self,
        in_channels,
        out_channels,
        kernel_size,
        subtract1_value,
        subtract2_value,
        kernel_size_pool,
    ):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.pre_shift = subtract1_value
        self.post_shift = subtract2_value
        self.avgpool = nn.AvgPool2d(kernel_size_pool)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.conv(x) - self.pre_shift) - self.post_shift
        return self.avgpool(h)


batch_size = 128
in_channels = 3
out_channels = 16
height, width = 32, 32
kernel_size = 3
subtract1_value = 0.5
subtract2_value = 0.2
kernel_size_pool = 2


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [
        in_channels,
        out_channels,
        kernel_size,
        subtract1_value,
        subtract2_value,
        kernel_size_pool,
    ]
