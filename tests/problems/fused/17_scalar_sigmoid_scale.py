# Fused problem 17 for ptodsl's tests: a tensor scaled and shifted by functions of alpha.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = torch.tensor(self.alpha, dtype=x.dtype)
        shift = torch.tanh(a) * torch.sigmoid(a * 3.0) / (1.0 + torch.exp(-a))
        return x * (2.0 / torch.sigmoid(a)) - shift


batch_size = 128
features = 512
alpha = 0.7


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [alpha]
