# KernelBench level 2 #78 (v0 shapes), written for ptodsl's tests.
# ConvTranspose3d, MaxPool3d(2), MaxPool3d(3), sum over channels kept as one channel.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding
        )
        self.max_pool1 = nn.MaxPool3d(kernel_size=2)
        self.max_pool2 = nn.MaxPool3d(kernel_size=3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pooled = self.max_pool2(self.max_pool1(self.conv_transpose(x)))
        return pooled.sum(dim=1, keepdim=True)


batch_size = 16
in_channels = 8
out_channels = 16
depth, height, width = 16, 32, 32
kernel_size = 3
stride = 2
padding = 1


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding]
