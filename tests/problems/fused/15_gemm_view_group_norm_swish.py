# Fused problem 15 for ptodsl's tests: Linear, a group norm written by hand with views
# (the layer's output seen as [batch, groups, features per group] and back), a learned
# per-feature scale, then Swish.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, num_groups: int, eps: float):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.scale = nn.Parameter(torch.randn(out_features) * 0.1)
        self.num_groups = num_groups
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)
        batch, features = h.shape
        groups = h.view(batch, self.num_groups, -1)
        mean = groups.mean(dim=2, keepdim=True)
        var = groups.var(dim=2, keepdim=True, unbiased=False)
        groups = (groups - mean) / torch.sqrt(var + self.eps)
        h = groups.view(batch, features) * self.scale
        return h * torch.sigmoid(h)


batch_size = 128
in_features = 256
out_features = 512
num_groups = 16
eps = 1e-5


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, num_groups, eps]
