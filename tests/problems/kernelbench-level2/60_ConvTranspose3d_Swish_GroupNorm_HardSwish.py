# KernelBench level 2 #60 (v0 shapes), written for ptodsl's tests.
# ConvTranspose3d, Swish, GroupNorm(4 groups), HardSwish.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(
        self, in_channels, out_channels, kernel_size, stride, padding, groups, eps, bias=True
    ):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, bias=bias
        )
        self.group_norm = nn.GroupNorm(num_groups=groups, num_channels=out_channels, eps=eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv_transpose(x)
        y = torch.sigmoid(y) * y
        return F.hardswish(self.group_norm(y))


batch_size = 128
in_channels = 3
out_channels = 16
depth, height, width = 16, 32, 32
kernel_size = 3
stride = 2
padding = 1
groups = 4
eps = 1e-5


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, groups, eps]
