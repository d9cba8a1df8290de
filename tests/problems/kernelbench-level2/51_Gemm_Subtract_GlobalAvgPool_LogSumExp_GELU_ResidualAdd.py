# KernelBench level 2 #51 (v0 shapes), written for ptodsl's tests.
# Linear minus a learned vector, row mean, logsumexp over that length-1 axis, GELU, plus the input.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=bias)
        self.subtract = nn.Parameter(torch.randn(out_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skip = x.clone().detach()
        h = self.gemm(x) - self.subtract
        # From here the tensor is (batch, 1): the logsumexp sees one element per row.
        h = torch.logsumexp(h.mean(dim=1, keepdim=True), dim=1, keepdim=True)
        # Broadcast back over the input's columns.
        return F.gelu(h) + skip


batch_size = 128
in_features = 1024
out_features = 512


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
