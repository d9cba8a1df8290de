# KernelBench level 2 #92 (v0 shapes), written for ptodsl's tests.
# Conv2d output c; c + hardswish(tanh(GroupNorm(c))); logsumexp over channels kept as one channel.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, groups, eps=1e-5):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.group_norm = nn.GroupNorm(groups, out_channels, eps=eps)
        self.tanh = nn.Tanh()
        self.hard_swish = nn.Hardswish()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = self.conv(x)
        branch = self.hard_swish(self.tanh(self.group_norm(c)))
        return torch.logsumexp(c + branch, dim=1, keepdim=True)


batch_size = 128
in_channels = 3
out_channels = 16
height, width = 32, 32
kernel_size = 3
groups = 8


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, groups]
