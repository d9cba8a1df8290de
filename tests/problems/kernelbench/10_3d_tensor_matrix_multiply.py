# KernelBench level 1 #10 (v0 shapes), written for ptodsl's tests.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


N = 16
M = 1024
K = 2048
L = 768


def get_inputs():
    return [torch.randn(N, M, K), torch.randn(K, L)]


def get_init_inputs():
    return []
