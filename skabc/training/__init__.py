"""Training harness of the learned kernels (skorch net, public callbacks, schedule, early stopping, resume)."""

from .callbacks import EveryNthEpoch, KeepBestWeights, RedrawEachEpoch, WarmupCosine
from .early_stopping import StartWeightMix, TimeLimit, ValidationSetsScoring, mix_weights
from .net import check_training_memory, make_net, train
from .schedule import Schedule, auto_batch_size, relative_step_cost, training_schedule

__all__ = ["EveryNthEpoch", "KeepBestWeights", "RedrawEachEpoch", "Schedule", "StartWeightMix", "TimeLimit",
           "ValidationSetsScoring", "WarmupCosine", "auto_batch_size", "check_training_memory", "make_net",
           "mix_weights", "relative_step_cost", "train", "training_schedule"]
