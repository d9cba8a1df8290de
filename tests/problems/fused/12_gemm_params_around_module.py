# Fused problem 12 for ptodsl's tests: a bias drawn before the Linear and a scale drawn after it.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.shift = nn.Parameter(torch.randn(out_features))
        self.fc = nn.Linear(in_features, out_features)
        self.gain = nn.Parameter(torch.rand(out_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.fc(x) + self.shift) * self.gain


batch_size = 128
in_features = 512
out_features = 256


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
