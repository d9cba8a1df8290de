# KernelBench level 3 #4 (v0 shapes), written for ptodsl's tests.
# LeNet-5: two 5x5 convolutions, each with ReLU and 2x2 max pooling, then three linear
# layers (ReLU between them).
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, kernel_size=5, stride=1)
        self.conv2 = nn.Conv2d(6, 16, kernel_size=5, stride=1)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.max_pool2d(F.relu(self.conv1(x)), kernel_size=2, stride=2)
        h = F.max_pool2d(F.relu(self.conv2(h)), kernel_size=2, stride=2)
        h = h.view(-1, 16 * 5 * 5)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(h)))))


batch_size = 1
num_classes = 10


def get_inputs():
    return [torch.randn(batch_size, 1, 32, 32)]


def get_init_inputs():
    return [num_classes]
