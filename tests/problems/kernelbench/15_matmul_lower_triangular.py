# KernelBench level 1 #15 (v0 shapes), written for ptodsl's tests.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.tril(torch.matmul(A, B))


M = 4096


def get_inputs():
    return [torch.tril(torch.randn(M, M)), torch.tril(torch.randn(M, M))]


def get_init_inputs():
    return []
