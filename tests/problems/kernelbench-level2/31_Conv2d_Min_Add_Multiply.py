# KernelBench level 2 #31 (v0 shapes), written for ptodsl's tests.
# Conv2d, elementwise minimum with a constant (as a 0-d tensor), per-channel bias, scale.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(
        self, in_channels, out_channels, kernel_size, constant_value, bias_shape, scaling_factor
    ):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.cap = constant_value
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.factor = scaling_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        capped = torch.min(self.conv(x), torch.tensor(self.cap))
        return (capped + self.bias) * self.factor


batch_size = 128
in_channels = 3
out_channels = 16
height, width = 32, 32
kernel_size = 3
constant_value = 0.5
bias_shape = (out_channels, 1, 1)
scaling_factor = 2.0


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, constant_value, bias_shape, scaling_factor]
