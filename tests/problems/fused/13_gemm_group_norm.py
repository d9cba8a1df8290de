# Fused problem 13 for ptodsl's tests: Linear then GroupNorm over the features.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, num_groups: int):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.gn = nn.GroupNorm(num_groups, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gn(self.fc(x))


batch_size = 128
in_features = 512
out_features = 256
num_groups = 8


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, num_groups]
