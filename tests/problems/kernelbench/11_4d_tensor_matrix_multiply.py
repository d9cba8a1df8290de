# KernelBench level 1 #11 (v0 shapes), written for ptodsl's tests.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.einsum("bijl,lk->bijk", A, B)


b = 16
i = 256
j = 512
l = 256  # noqa: E741 (KernelBench's name)
k = 768


def get_inputs():
    return [torch.randn(b, i, j, l), torch.randn(l, k)]


def get_init_inputs():
    return []
