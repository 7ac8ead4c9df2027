"""Eager mode: TensorFlow's own hooks, which run only in graph mode, refused by name.

`tf.compat.v1.train.StopAtStepHook`, `LoggingTensorHook` and the other hooks
of TensorFlow's `basic_session_run_hooks` build graph ops in `begin()` and
look tensors up by graph name: in an eager session they fail at the first
step with errors that name neither the hook nor the fix (``Tensor.op is
undefined when eager execution is enabled``, ``KeyError: 'loss:0'``). The
session refuses them when it is created and names monsession's equivalent,
which takes the same arguments and works in both modes.
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from monsession._api._types import Unchecked

# The module of TensorFlow's own hooks, named through a public class.
_TF_HOOKS_MODULE = tf.compat.v1.train.StopAtStepHook.__module__
_CORE_HOOKS = frozenset({"StopAtStepHook", "FeedFnHook", "FinalOpsHook", "GlobalStepWaiterHook"})


def _tensorflow_hook_class(hook: Unchecked) -> type | None:
    """The TensorFlow hook class `hook` is (or derives from), or `None`."""
    for cls in type(hook).__mro__:
        if cls.__module__ == _TF_HOOKS_MODULE:
            return cls
    return None


def _equivalent(name: str) -> str:
    if name in _CORE_HOOKS:
        return f"monsession.{name}"
    from monsession._plugins._families import KNOWN_HOOK_FAMILIES

    family = KNOWN_HOOK_FAMILIES.get(name)
    where = f" (pip install {family})" if family else ""
    return f"monsession.hooks.{name}{where}"


def refuse_tensorflow_hooks(owner: str, hooks: Sequence[Unchecked]) -> None:
    """Raises if one of `hooks` is one of TensorFlow's own hooks (eager mode only).

    Raises:
      TypeError: Naming the hook, its index and monsession's equivalent.
    """
    for index, hook in enumerate(hooks):
        cls = _tensorflow_hook_class(hook)
        if cls is None:
            continue
        raise TypeError(
            f"{owner}: hooks[{index}] is tf.compat.v1.train.{cls.__name__} "
            f"({type(hook).__name__}), TensorFlow's own hook, which works only in graph mode; "
            f"this session runs in eager mode (it was created outside a tf.Graph). Use "
            f"{_equivalent(cls.__name__)} instead: the same arguments, in both modes."
        )
