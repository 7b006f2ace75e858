import torch
import torch.nn as nn


class Model(nn.Module):
    """A linear layer, then a scale and a ReLU."""

    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        x = self.linear(x)
        return torch.relu(x * self.scale)


batch_size = 8
in_features = 64
out_features = 32
scale = 0.5


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scale]
