# KernelBench level 2 #28 (v0 shapes), written for ptodsl's tests.
# Linear, then InstanceNorm2d on the rows viewed as (N, 1, 1, F): it normalises each row over its
# F features (one "channel", so PyTorch warns that num_features does not match); then (h + y) * y.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, eps=1e-5, momentum=0.1):
        super().__init__()
        self.bmm = nn.Linear(in_features, out_features)
        self.instance_norm = nn.InstanceNorm2d(out_features, eps=eps, momentum=momentum)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        rows = self.bmm(x)
        as_image = rows.unsqueeze(1).unsqueeze(1)  # (N, 1, 1, F)
        normed = self.instance_norm(as_image).squeeze(1).squeeze(1)
        return (normed + y) * y


batch_size = 128
in_features = 64
out_features = 128


def get_inputs():
    return [torch.randn(batch_size, in_features), torch.randn(batch_size, out_features)]


def get_init_inputs():
    return [in_features, out_features]
