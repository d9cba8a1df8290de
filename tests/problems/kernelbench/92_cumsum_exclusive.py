# KernelBench level 1 #92 (v0 shapes), written for ptodsl's tests.
# As in KernelBench, `[:-1]` slices the batch axis (axis 0), not the scan axis: the zero
# column is prepended along `dim`, the last row is dropped, and the output is
# [batch_size - 1, 4000 + 1], not [batch_size, 4000].
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        zeros = torch.zeros_like(x.select(self.dim, 0).unsqueeze(self.dim))
        exclusive_cumsum = torch.cat((zeros, x), dim=self.dim)[:-1]
        return torch.cumsum(exclusive_cumsum, dim=self.dim)


batch_size = 128
input_shape = (4000,)
scan_dim = 1


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return [scan_dim]
