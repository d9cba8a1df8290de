# KernelBench level 2 #18 (v0 shapes), written for ptodsl's tests.
# Linear then a row sum to (N, 1); the max, mean and two logsumexps after it all reduce a
# size-1 axis, so they hand the column back unchanged.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        col = torch.sum(self.linear(x), dim=1, keepdim=True)
        col = torch.max(col, dim=1, keepdim=True).values
        col = torch.mean(col, dim=1, keepdim=True)
        for _ in range(2):
            col = torch.logsumexp(col, dim=1, keepdim=True)
        return col


batch_size = 128
in_features = 10
out_features = 5


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
