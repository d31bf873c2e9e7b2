"""Training harness of the learned kernels (skorch net, public callbacks, resume, memory policy)."""

from .callbacks import EveryNthEpoch, KeepBestWeights, RedrawEachEpoch, WarmupCosine
from .net import check_training_memory, make_net, train

__all__ = ["EveryNthEpoch", "KeepBestWeights", "RedrawEachEpoch", "WarmupCosine", "check_training_memory",
           "make_net", "train"]
