# Fused problem 14 for ptodsl's tests: Linear, AvgPool1d over the features, GELU, a scale,
# then the maximum over the features.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(
        self, in_features: int, out_features: int, pool_kernel_size: int, scale_factor: float
    ):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.avg_pool = nn.AvgPool1d(kernel_size=pool_kernel_size)
        self.scale_factor = scale_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.avg_pool(self.fc(x).unsqueeze(1)).squeeze(1)
        h = nn.functional.gelu(h) * self.scale_factor
        return torch.max(h, dim=1).values


batch_size = 128
in_features = 512
out_features = 256
pool_kernel_size = 4
scale_factor = 2.0


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, pool_kernel_size, scale_factor]
