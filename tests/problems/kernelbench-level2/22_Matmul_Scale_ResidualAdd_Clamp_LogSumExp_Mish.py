# KernelBench level 2 #22 (v0 shapes), written for ptodsl's tests.
# Linear, scale, double (h + h), clamp, row logsumexp to (N, 1), then y * mish(y).
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, input_size, hidden_size, scale_factor, clamp_min, clamp_max):
        super().__init__()
        self.matmul = nn.Linear(input_size, hidden_size)
        self.factor = scale_factor
        self.lo = clamp_min
        self.hi = clamp_max

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.matmul(x) * self.factor
        h = h + h
        h = torch.clamp(h, self.lo, self.hi)
        y = torch.logsumexp(h, dim=1, keepdim=True)
        return y * F.mish(y)


batch_size = 128
input_size = 512
hidden_size = 1024
scale_factor = 2.0
clamp_min = -10.0
clamp_max = 10.0


def get_inputs():
    return [torch.randn(batch_size, input_size)]


def get_init_inputs():
    return [input_size, hidden_size, scale_factor, clamp_min, clamp_max]
