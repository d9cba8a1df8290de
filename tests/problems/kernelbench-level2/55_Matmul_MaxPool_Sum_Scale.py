# KernelBench level 2 #55 (v0 shapes), written for ptodsl's tests.
# Linear, MaxPool1d along the features (5 -> 2, the last feature is dropped), row sum, times a
# scalar.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, kernel_size, scale_factor):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.max_pool = nn.MaxPool1d(kernel_size)
        self.scale_factor = scale_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Treat each row as a one-channel signal for the pooling.
        pooled = self.max_pool(self.matmul(x).unsqueeze(1)).squeeze(1)
        return pooled.sum(dim=1) * self.scale_factor


batch_size = 128
in_features = 10
out_features = 5
kernel_size = 2
scale_factor = 0.5


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, kernel_size, scale_factor]
