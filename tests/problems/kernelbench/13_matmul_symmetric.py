# KernelBench level 1 #13 (v0 shapes), written for ptodsl's tests.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


N = 4096


def get_inputs():
    A = torch.randn(N, N)
    A = (A + A.T) / 2
    B = torch.randn(N, N)
    B = (B + B.T) / 2
    return [A, B]


def get_init_inputs():
    return []
