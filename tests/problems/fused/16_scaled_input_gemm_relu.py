# Fused problem 16 for ptodsl's tests: a learned per-feature input scale (drawn before the
# layer), then Linear of the scaled input, then ReLU: the matmul's operand is computed.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.scale = nn.Parameter(torch.rand(in_features))
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc(x * self.scale))


batch_size = 128
in_features = 512
out_features = 256


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
