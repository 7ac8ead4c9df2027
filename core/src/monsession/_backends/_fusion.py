"""Fused steps (eager mode): the steps before the next hook action, in one call.

With `steps_per_execution` other than 1, each `run(step)` first asks every
hook when it next acts (`SessionRunHook.next_action`), then runs the steps
before that inside one `tf.function` built here (the *silent* steps: no hook
is called), then the step at which some hook acts as usual. The loop takes
its step count and deadline as tensors, so it is traced once per step
function, never per count.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import tensorflow as tf

from monsession._api._hook_api import NextAction, hook_overrides
from monsession._backends._eager import BoundStep
from monsession._backends._eager_backend import EagerBackend, _calls_a_step, _hook_name
from monsession._backends._owned_step import advancing

logger = logging.getLogger("monsession")

AUTO = "auto"

# How long one fused call may run: time-based schedules and Ctrl-C wait no longer.
MAX_SECONDS_PER_CALL = 0.5

# The step count of "auto": no cap but time.
_UNCAPPED = 2**62

FUSED_STEP_ATTRIBUTE = "monsession_fused_step"

_LOOP_SIGNATURE = [tf.TensorSpec([], tf.int64), tf.TensorSpec([], tf.float64)]


def check_steps_per_execution(owner: str, value: Any, eager: bool) -> int | None:
    """Validates `steps_per_execution`.

    Returns:
      The cap on steps per call, or `None` for `"auto"`.

    Raises:
      TypeError: If `value` is neither an int nor `"auto"`.
      ValueError: If it is smaller than 1, or other than 1 in graph mode.
    """
    if value == AUTO and isinstance(value, str):
        cap = None
    elif isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise ValueError(
                f"{owner}: steps_per_execution must be an int >= 1 or 'auto'; got {value}."
            )
        cap = value
    else:
        raise TypeError(
            f"{owner}: steps_per_execution must be an int >= 1 or 'auto'; got {value!r} "
            f"of type {type(value).__name__}."
        )
    if cap != 1 and not eager:
        raise ValueError(
            f"{owner}: steps_per_execution={value!r} fuses the steps of a TF2 (eager) loop; "
            "in graph mode each Session.run() is one step: leave it at 1."
        )
    return cap


def fusable_step(fetches: Any, owned: Any) -> Any:
    """The `tf.function` to fuse for `run(fetches)`, or `None` (see `_fusable`).

    With a global step the session owns (`owned`), the step wrapped to advance it.
    """
    step = _fusable(fetches)
    if step is None or owned is None:
        return step
    return advancing(step, owned)


def _fusable(fetches: Any) -> Any:
    """The `tf.function` to fuse for `run(fetches)`, or `None`.

    A `tf.function` (or `sess.call` of one, without arguments), or a wrapper
    that names the `tf.function` it calls in its `monsession_fused_step`
    attribute (a wrapper that does nothing on the steps where no hook acts,
    e.g. `NanTensorHook.watch`).
    """
    if isinstance(fetches, BoundStep) and not (fetches.args or fetches.kwargs):
        fetches = fetches.step  # sess.call(step): the step itself.
    step = getattr(fetches, FUSED_STEP_ATTRIBUTE, fetches)
    if isinstance(step, tf.types.experimental.PolymorphicFunction):
        return step
    return None


def _plans_ahead(hook: Any) -> bool:
    """Whether `hook` has a `next_action()` of its own (not the base class's)."""
    return hook_overrides(hook, "next_action")


class Fusion:
    """Plans and runs the silent steps of one monitored session.

    Args:
      owner: The session's class name, for log lines.
      cap: The most steps per call (silent ones plus the last), or `None`.
      hooks: The session's hooks.
    """

    def __init__(self, owner: str, cap: int | None, hooks: list[Any]) -> None:
        self._owner = owner
        self._cap = _UNCAPPED if cap is None else cap
        per_run = [
            h for h in hooks if hook_overrides(h, "before_run") or hook_overrides(h, "after_run")
        ]
        self._hooks = [h for h in per_run if _plans_ahead(h)]
        blocking = [_hook_name(h) for h in per_run if not _plans_ahead(h)]
        self._enabled = self._cap > 1
        self._explained = False  # Whether a call that cannot be fused was explained.
        if blocking:
            self._stop_fusing(
                logging.INFO,
                f"{', '.join(blocking)} must act on every step (no next_action() method)",
            )

    def run_silent_steps(
        self, fetches: Any, feed_dict: Any, backend: Any
    ) -> tuple[int, Mapping[str, Any]]:
        """Runs the silent steps before the coming run, if any.

        Returns:
          How many steps ran, and the entries hooks asked to keep.
        """
        if not self._enabled or not isinstance(backend, EagerBackend):
            return 0, {}
        step = None if feed_dict else fusable_step(fetches, backend.owned_global_step)
        if step is None:
            self._explain(fetches, feed_dict)
            return 0, {}
        if not backend.counts_steps():
            self._stop_fusing(
                logging.INFO,
                "the step does not advance the global step by exactly one (or there is none)",
            )
            return 0, {}
        global_step = backend.global_step_after()
        assert global_step is not None
        steps, at_time, keep = self._plan(global_step)
        if steps <= 1 or (at_time is not None and at_time <= time.time()):
            return 0, {}
        loop = _loop_for(step, keep, backend.global_step_variable)  # Traced before the clock.
        deadline = time.time() + MAX_SECONDS_PER_CALL
        if at_time is not None:
            deadline = min(deadline, at_time)
        done, kept = backend.run_silent(loop, steps - 1, deadline)
        if not backend.counts_steps():
            self._stop_fusing(logging.WARNING, "the global step did not advance once per step")
        return done, kept

    def _plan(self, global_step: int) -> tuple[int, float | None, tuple[str, ...]]:
        """The steps until the first hook acts (capped), the time it acts, the entries to keep."""
        steps = self._cap
        deadline: float | None = None
        keep: list[str] = []
        for hook in self._hooks:
            action = hook.next_action(global_step)
            if not isinstance(action, NextAction):
                raise TypeError(
                    f"{_hook_name(hook)}.next_action() returned {action!r}; expected a "
                    "monsession.NextAction."
                )
            if action.steps is not None:
                steps = min(steps, action.steps)
            if action.at_time is not None:
                deadline = action.at_time if deadline is None else min(deadline, action.at_time)
            keep.extend(name for name in action.keep if name not in keep)
        return steps, deadline, tuple(keep)

    def _explain(self, fetches: Any, feed_dict: Any) -> None:
        """Says once per session why a call of a step runs one step, though fusion is on."""
        if self._explained or not _calls_a_step(fetches):
            return
        self._explained = True
        if feed_dict:
            why = "it is given a feed_dict"
        elif isinstance(fetches, BoundStep):
            why = (
                "it is called with arguments (sess.call(step, *args); Epochs.run passes each "
                "batch so)"
            )
        else:
            why = "it is not a tf.function"
        logger.warning(
            "%s: steps_per_execution runs this step one step per call: %s, and fused steps "
            "run a tf.function without arguments from the host. To fuse, read the batch "
            "inside the tf.function (next(iterator)) and call sess.run(step).",
            self._owner,
            why,
        )

    def _stop_fusing(self, level: int, reason: str) -> None:
        if self._enabled:
            logger.log(level, "%s: steps_per_execution runs single steps: %s.", self._owner, reason)
        self._enabled = False


# Each step's loops, by the entries they keep: traced once per step and
# global step variable, shared by the sessions that run the step.
_LOOPS: weakref.WeakKeyDictionary[Any, dict[tuple[str, ...], tuple[Any, Any]]] = (
    weakref.WeakKeyDictionary()
)


def _loop_for(step: Any, keep: tuple[str, ...], variable: Any) -> Callable[..., Any]:
    """The fused loop of `step` keeping `keep` and reading `variable`, traced on first use."""
    loops = _LOOPS.setdefault(step, {})
    cached = loops.get(keep)
    if cached is None or cached[0] is not variable:
        loop = _build_loop(step, variable, keep)
        loop.get_concrete_function()  # type: ignore[attr-defined]
        cached = loops[keep] = (variable, loop)
    return cached[1]


def _kept_specs(step: Any, keep: tuple[str, ...]) -> list[Any]:
    """The specs of the entries `keep` names in the step's outputs."""
    outputs = step.get_concrete_function().structured_outputs
    specs = []
    for name in keep:
        if not isinstance(outputs, Mapping) or name not in outputs:
            got = sorted(outputs) if isinstance(outputs, Mapping) else type(outputs).__name__
            raise ValueError(
                f"A hook keeps the step's {name!r} output from every step, but the step "
                f"returns {got}."
            )
        specs.append(tf.TensorSpec(outputs[name].shape, outputs[name].dtype))
    return specs


def _build_loop(step: Any, variable: Any, keep: tuple[str, ...]) -> Callable[..., Any]:
    """A `tf.function(max_steps, deadline)` running `step` silently.

    It runs the step while fewer than `max_steps` ran and `tf.timestamp()`
    is before `deadline`, and returns how many ran, the global step after
    them, and the kept entries stacked.
    """
    specs = _kept_specs(step, keep) if keep else []
    traced = weakref.ref(step)  # Called only while tracing: the cache's key stays weak.

    @tf.function(input_signature=_LOOP_SIGNATURE, autograph=False)
    def loop(max_steps: Any, deadline: Any) -> Any:
        def more(done: Any, *arrays: Any) -> Any:
            return tf.logical_and(done < max_steps, tf.timestamp() < deadline)

        def one_step(done: Any, *arrays: Any) -> Any:
            outputs = traced()()  # type: ignore[misc]
            written = [
                array.write(tf.cast(done, tf.int32), outputs[name])
                for array, name in zip(arrays, keep, strict=True)
            ]
            return (done + 1, *written)

        start = [
            tf.TensorArray(spec.dtype, size=0, dynamic_size=True, element_shape=spec.shape)
            for spec in specs
        ]
        done, *arrays = tf.while_loop(more, one_step, [tf.constant(0, tf.int64), *start])
        with tf.control_dependencies([done]):
            after = tf.cast(variable.read_value(), tf.int64)
        return tf.stack([done, after]), {
            name: a.stack() for name, a in zip(keep, arrays, strict=True)
        }

    return loop
