# KernelBench level 2 #83 (v0 shapes), written for ptodsl's tests.
# Conv3d, GroupNorm, minimum with 0, clamp to [0, 1], Dropout: with these values the output is all
# zeros.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(
        self, in_channels, out_channels, kernel_size, groups, min_value, max_value, dropout_p
    ):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.norm = nn.GroupNorm(groups, out_channels)
        self.dropout = nn.Dropout(dropout_p)
        # Plain attributes (the KernelBench original reads the module-level globals instead).
        self.min_value = min_value
        self.max_value = max_value

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm(self.conv(x))
        y = torch.minimum(y, torch.tensor(self.min_value))
        y = torch.clamp(y, min=self.min_value, max=self.max_value)
        return self.dropout(y)


batch_size = 128
in_channels = 3
out_channels = 16
depth, height, width = 16, 32, 32
kernel_size = 3
groups = 8
min_value = 0.0
max_value = 1.0
dropout_p = 0.2


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, groups, min_value, max_value, dropout_p]
