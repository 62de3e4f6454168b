"""The Python classes pickled into tests/data/torch_wild/ by
scripts/make_torch_wild_fixtures.py: a module of their own, so the files
name them `torch_wild_classes.Net` (not `__main__.Net`) and torch.load
finds them again with scripts/ on sys.path."""

import torch
from torch import nn


class Block(nn.Module):
    """A nested submodule: a 1x1 convolution and its batch norm."""

    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 1, bias=False)
        self.bn = nn.BatchNorm2d(channels)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


class Net(nn.Module):
    """A whole model as `torch.save(model)` pickles it: a Sequential with
    Conv2d, BatchNorm2d (running_mean, running_var, num_batches_tracked)
    and ReLU; a nested custom submodule; a Linear head; one Linear
    reachable under two names (`shared` and `alias`: state_dict() lists
    its tensors under both); a non-persistent buffer (not in state_dict());
    a plain tensor attribute (neither parameter nor buffer)."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.ReLU())
        self.block = Block(2)
        self.head = nn.Linear(8, 3)
        self.shared = nn.Linear(3, 3)
        self.alias = self.shared
        self.register_buffer("scale", torch.tensor([0.5, 2.0]), persistent=False)
        self.anchor = torch.tensor([1.0, -1.0, 0.25])

    def forward(self, x):
        x = self.block(self.features(x) * self.scale.view(1, 2, 1, 1))
        return self.alias(self.shared(self.head(x.flatten(1))))


class TaggedTensor(torch.Tensor):
    """A torch.Tensor subclass: pickled through
    torch._tensor._rebuild_from_type_v2 with this class."""
