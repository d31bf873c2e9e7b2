"""What the files of a checkpoint must hold before skorch restores them into a net.

Every check raises a ``ValueError`` saying what is wrong with the content; :mod:`skabc.training.checkpoints`
adds the file and what to do.  Tensors and plain containers only: the files are read with torch's safe loader.
"""

from __future__ import annotations

import copy
import math
from numbers import Integral, Real

import torch
from skorch import NeuralNet

#: The history entry of the held-out score (ValidationSetsScoring's default ``name``).
VALIDATION_SCORE = "valid_ari"


def first_mismatch(saved: dict, current: dict) -> str | None:
    """The first tensor name of two state dicts that only one holds, else whose shapes differ; ``None`` if they fit."""
    names = (sorted(set(saved) ^ set(current))
             or sorted(k for k in saved if tuple(saved[k].shape) != tuple(current[k].shape)))
    return names[0] if names else None


def check_generator_state(state: torch.Tensor) -> None:
    """Whether torch's CPU generator takes ``state`` (it refuses an invalid one only when it is set, at the first
    epoch of the resumed run); the caller's generator is left as it was."""
    current = torch.get_rng_state()
    try:
        torch.set_rng_state(state)
    finally:
        torch.set_rng_state(current)


def check_best_weights(saved, net: NeuralNet | None) -> None:
    """A run's saved best weights (:class:`~skabc.training.callbacks.BestWeightsCheckpoint`): ``{'epoch',
    'checkpoint'}`` positive integers and ``'state'`` weights that fit ``net``'s module."""
    if not isinstance(saved, dict) or set(saved) != {"epoch", "checkpoint", "state"}:
        raise ValueError("it is not a mapping of 'epoch', 'checkpoint' and 'state'")
    for key in ("epoch", "checkpoint"):
        value = saved[key]
        if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
            raise ValueError(f"its {key} {value!r} is not a positive integer")
    check_weights(saved["state"], net)


def check_weights(state, net: NeuralNet | dict | None) -> None:
    """Saved weights: dense, finite tensors by name that fit ``net``'s module, or the state dict ``net`` (torch's
    own errors for others name no file, and come only once training has ended)."""
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ValueError("the weights are not a mapping of tensor names to tensors")
    for name, value in state.items():
        if value.layout != torch.strided or value.is_meta or value.is_quantized:
            raise ValueError(f"the weight {name!r} is not a dense tensor of values")
        if value.is_floating_point() and not bool(torch.isfinite(value).all()):
            raise ValueError(f"the weight {name!r} holds NaN or infinite values")
    if net is not None:
        expected = net if isinstance(net, dict) else net.module_.state_dict()
        name = first_mismatch(state, expected) or next(
            (k for k in sorted(state) if state[k].dtype != expected[k].dtype), None)
        if name is not None:
            raise ValueError(f"the weights do not fit this configuration's network ({name!r} differs)")


def check_history(history, max_epochs=None) -> None:
    """skorch's Checkpoint history: 1 to ``max_epochs`` epochs numbered from 1, each with batches and a saved flag."""
    if not isinstance(history, list) or not history or not all(isinstance(row, dict) for row in history):
        raise ValueError("the history is not a list of epochs")
    if isinstance(max_epochs, Integral) and len(history) > max_epochs:
        raise ValueError(f"the history holds {len(history)} epochs, more than max_epochs={max_epochs}")
    for number, row in enumerate(history, start=1):
        if row.get("epoch") != number or not isinstance(row.get("event_cp"), bool):
            raise ValueError(f"epoch {number} of the history has no epoch number {number} or checkpoint flag")
        # A resume keeps the best of these scores (ValidationSetsScoring): finite numbers, flagged true or false.
        score, flag = row.get(VALIDATION_SCORE), row.get(VALIDATION_SCORE + "_best", False)
        if (VALIDATION_SCORE in row or flag) and (isinstance(score, bool) or not isinstance(score, Real)
                                                  or not math.isfinite(score) or not -1.0 <= score <= 1.0):
            raise ValueError(f"epoch {number} of the history has a {VALIDATION_SCORE} that is no adjusted Rand index")
        if not isinstance(flag, bool):
            raise ValueError(f"epoch {number} of the history flags its {VALIDATION_SCORE} with {flag!r}, not true "
                             "or false")
        if not isinstance(row.get("batches"), list) or not row["batches"]:
            raise ValueError(f"epoch {number} of the history has no list of batches")
        loss = row.get("train_loss", 0.0)  # a resume starts its comparison at the last one (KeepBestWeights)
        if isinstance(loss, bool) or not isinstance(loss, Real) or not math.isfinite(loss):
            # A run whose loss went non-finite diverged (the fit refuses it at its end): resuming trains to that end.
            raise ValueError(f"epoch {number} of the history has a train_loss of {loss!r}, not a finite number")
    if not any(row["event_cp"] for row in history):
        raise ValueError("the history records no saved epoch")


def check_fits(key: str, content, net: NeuralNet) -> None:
    """The weights (``key`` ``'f_params'``) or optimizer state (``'f_optimizer'``) fit the net they would be loaded
    into."""
    if key == "f_params":
        check_weights(content, net)
        return
    groups = net.optimizer_.state_dict()["param_groups"]
    saved = content.get("param_groups") if isinstance(content, dict) else None
    if (not isinstance(saved, list) or not isinstance(content.get("state"), dict) or len(saved) != len(groups)
            or any(not isinstance(g, dict) or not isinstance(g.get("params"), list)
                   or len(g["params"]) != len(e["params"]) for g, e in zip(saved, groups, strict=True))):
        raise ValueError("the optimizer state does not fit this configuration's network")
    # torch pairs the saved ids with this net's parameters by position; the state of each must be shaped like it.
    parameters = [p for group in net.optimizer_.param_groups for p in group["params"]]
    ids = [i for group in saved for i in group["params"]]
    if any(isinstance(i, bool) or not isinstance(i, Integral) for i in ids) or len(set(ids)) != len(ids):
        raise ValueError("the optimizer state does not name its parameters by distinct numbers")
    shapes = {i: tuple(p.shape) for i, p in zip(ids, parameters, strict=True)}
    for i, state in content["state"].items():
        if i not in shapes or not isinstance(state, dict):
            raise ValueError(f"the optimizer state holds an entry {i!r} for no parameter of this network")
        for name, value in state.items():
            if (not isinstance(value, torch.Tensor) or value.layout != torch.strided or value.is_meta
                    or value.is_quantized):
                raise ValueError(f"the optimizer state's {name!r} of parameter {i} is not a tensor of values")
            if value.dim() and tuple(value.shape) != shapes[i]:  # 0-d: a count such as 'step'
                raise ValueError(f"the optimizer state's {name!r} of parameter {i} has shape {tuple(value.shape)}, "
                                 f"not its parameter's {shapes[i]}: it is another network's")
            if value.dim() and not value.is_floating_point():
                raise ValueError(f"the optimizer state's {name!r} of parameter {i} holds {value.dtype} values, not "
                                 "floating-point ones")
    _check_settings(saved, groups)
    _check_a_step(content, net.optimizer_)


#: Settings of a parameter group that training changes (the schedule sets ``lr``; torch's schedulers record
#: ``initial_lr``); every other one a checkpoint holds is the configuration's own.
_SCHEDULED = frozenset({"params", "lr", "initial_lr"})


def _check_settings(saved: list, groups: list) -> None:
    """Each saved group's fixed settings equal this configuration's (a saved ``maximize=True`` would ascend the loss,
    silently); a setting one torch release records and another does not is passed over."""
    for saved_group, group in zip(saved, groups, strict=True):
        for name in (saved_group.keys() - _SCHEDULED) & group.keys():
            try:
                same = bool(saved_group[name] == group[name])
            except (TypeError, ValueError, RuntimeError):  # e.g. a tensor of several values
                same = False
            if not same:
                raise ValueError(f"the optimizer state sets {name}={saved_group[name]!r}, where this configuration's "
                                 f"optimizer has {group[name]!r}")


def _check_a_step(content: dict, optimizer: torch.optim.Optimizer) -> None:
    """Load ``content`` into a copy of ``optimizer`` (over copies of its parameters) and take one step of zero
    gradients: torch reads a group's settings ('betas') and a parameter's moments ('exp_avg') by name only there,
    and a KeyError at the resumed run's first step names no file."""
    trial = copy.deepcopy(optimizer)
    try:
        trial.load_state_dict(content)
        for group in trial.param_groups:
            for parameter in group["params"]:
                parameter.grad = torch.zeros_like(parameter)
        trial.step()
    except (KeyError, TypeError, ValueError, RuntimeError, IndexError, AssertionError) as exc:  # torch asserts too
        raise ValueError(f"the optimizer state does not work with this network's optimizer ({type(exc).__name__}: "
                         f"{str(exc).splitlines()[0] if str(exc) else ''})") from None
