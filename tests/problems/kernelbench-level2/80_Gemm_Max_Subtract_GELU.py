# KernelBench level 2 #80 (v0 shapes), written for ptodsl's tests.
# Linear, row max (batch, 1), minus its own mean over that length-1 axis (exactly zero), GELU.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features, max_dim):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.max_dim = max_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        top = self.gemm(x).max(dim=self.max_dim, keepdim=True).values
        centred = top - top.mean(dim=1, keepdim=True)
        return F.gelu(centred)


batch_size = 128
in_features = 512
out_features = 1024
max_dim = 1


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, max_dim]
