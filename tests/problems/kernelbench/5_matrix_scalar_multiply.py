# KernelBench level 1 #5 (v0 shapes), written for ptodsl's tests.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, s: float) -> torch.Tensor:
        return A * s


M = 16384
N = 4096


def get_inputs():
    return [torch.randn(M, N), 3.14]


def get_init_inputs():
    return []
