# KernelBench level 2 #13 (v0 shapes), written for ptodsl's tests.
# ConvTranspose3d, channel mean (keeps a size-1 channel axis), add a bias, softmax over that
# size-1 axis (so every value becomes exactly 1), tanh, scale: the output is constant tanh(1) * 2.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(
        self, in_channels, out_channels, kernel_size, stride, padding, bias_shape, scaling_factor
    ):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding
        )
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.factor = scaling_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        avg = torch.mean(self.conv_transpose(x), dim=1, keepdim=True)
        p = torch.softmax(avg + self.bias, dim=1)
        return torch.tanh(p) * self.factor


batch_size = 16
in_channels = 8
out_channels = 16
depth, height, width = 16, 32, 32
kernel_size = 3
stride = 2
padding = 1
bias_shape = (1, 1, 1, 1, 1)
scaling_factor = 2.0


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, bias_shape, scaling_factor]
