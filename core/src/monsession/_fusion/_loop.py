"""The fused loop, and the seam between fusion and the backends.

What a run may be given beside plain fetches: a `BoundStep` (`sess.call`), a `StepSource` (an
`Epochs` step); what fusion asks a backend for: its `LoopRunner`. `loop_for` builds the loop
once per step function, global step and kept entries (`_build_loop`), across sessions, and never
per count. `_fusion` decides how many steps to run; the backend's `LoopRunner` runs it.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Protocol, TypeVar

import tensorflow as tf

from monsession._api._types import FeedDict, FeedValue, Fetches, Results, StepFunction
from monsession._tf_compat import local_replica_values

_T = TypeVar("_T")


class BoundStep:
    """A step with the arguments of one `MonitoredSession.call()`.

    Calling it calls the step with them (and a hook's feeds as keywords). `retry=False`: after a
    preemption error the session is re-created (the checkpoint restored) but the call is not
    retried with these arguments; it returns `None` (`Epochs.run` takes the batch again at the
    restored position).
    """

    def __init__(
        self,
        step: StepFunction,
        args: tuple[FeedValue, ...],
        kwargs: Mapping[str, FeedValue],
        retry: bool = True,
    ) -> None:
        self.step = step
        self.args = args
        self.kwargs = kwargs
        self.retry = retry

    def __call__(self, **feeds: FeedValue) -> Results:
        return self.step(*self.args, **self.kwargs, **feeds)

    @property
    def __name__(self) -> str:
        return getattr(self.step, "__name__", None) or type(self.step).__name__


class StepSource:
    """Fetches that take their input just before they run (an `Epochs` loop's steps).

    The hooked session calls `bind(silent)` after the silent steps of a run, before the hooks'
    `before_run` (or, for a quiet step, without the hooks): it takes the input and returns the
    fetches to run. Silent steps pull their input inside `fused`, a `tf.function` without
    arguments (`None` when the step cannot be fused), at most `silent_limit` of them; a quiet
    step only while `silent_limit` is at least 1, unless `ends_silently`: then the silent (or
    quiet) steps may take the last input too, and `bind` returns `None`. A step source is not
    run again after a preemption error: its input was taken before the restore.
    """

    fused: tf.types.experimental.PolymorphicFunction | None = None
    silent_limit = 0
    ends_silently = False

    def bind(self, silent: int) -> Fetches | None:
        """The fetches to run now, `silent` steps after the ones the last bind knew of."""
        raise NotImplementedError


class LoopRunner(Protocol):
    """The backend side of fused steps (eager mode): what `_fusion` runs its loops with."""

    def known_step(self) -> int | None:
        """The global step after the last run, if the host counts it (no device read)."""

    def schedules_steps(self) -> bool:
        """Whether steps run later, as closures on workers (a `ClusterCoordinator`): a loop
        then runs exactly the steps asked for, counted when it is scheduled."""

    def calls_a_step(self, fetches: Fetches) -> bool:
        """Whether running `fetches` calls a step (a callable, not only values)."""

    def loop_step(
        self, step: tf.types.experimental.PolymorphicFunction
    ) -> tuple[tf.types.experimental.PolymorphicFunction, tf.Variable]:
        """The step as the loop calls it (advancing a global step the session owns, if no
        closure does), and the global step the loop reads after its steps."""

    def run_loop(
        self,
        loop: tf.types.experimental.PolymorphicFunction,
        max_steps: int,
        deadline: float,
        keeps: bool,
    ) -> tuple[int, Mapping[str, tf.Tensor]]:
        """Runs `loop(max_steps, deadline)` and advances the host step by the steps it ran;
        returns how many ran (or were scheduled) and the kept outputs, stacked (`keeps`: the
        loop keeps outputs, a scheduled loop's are then waited for)."""


class RunsLoops(Protocol):
    """A backend, as fusion sees it."""

    def loop_runner(self) -> LoopRunner | None:
        """What runs this backend's fused loops; `None`: it runs single steps."""


FUSED_STEP_ATTRIBUTE = "monsession_fused_step"
_LOOP_SIGNATURE = [tf.TensorSpec([], tf.int64), tf.TensorSpec([], tf.float64)]


def fused_function(fetches: Fetches) -> tf.types.experimental.PolymorphicFunction | None:
    """The `tf.function` to fuse for `run(fetches)`, or `None`.

    A `tf.function` (or `sess.call` of one, without arguments), or a wrapper that names the
    `tf.function` it calls in its `monsession_fused_step` attribute (a wrapper that does nothing
    on the steps where no hook acts, e.g. `NanTensorHook.watch`).
    """
    if isinstance(fetches, BoundStep) and not (fetches.args or fetches.kwargs):
        fetches = fetches.step  # sess.call(step): the step itself.
    elif isinstance(fetches, StepSource):
        fetches = fetches.fused
    step = fused_target(fetches)
    if isinstance(step, tf.types.experimental.PolymorphicFunction):
        return step
    return None


def fused_target(step: Fetches) -> Fetches:
    """What `step` names in its `monsession_fused_step` attribute, through wrappers of wrappers
    (`NanTensorHook.watch` of a step that names the `tf.function` it schedules)."""
    for _ in range(8):  # Wrappers nest a few deep; a cycle ends here.
        inner = getattr(step, FUSED_STEP_ATTRIBUTE, None)
        if inner is None or inner is step:
            break
        step = inner
    return step


def why_not_fused(fetches: Fetches, feed_dict: FeedDict | None, schedules: bool) -> str:
    """Why a call of a step cannot fuse (`schedules`: its backend schedules closures)."""
    inside = "to fuse, read the batch inside the tf.function (next(iterator)) and call "
    inside += "sess.run(step)"
    if feed_dict:
        return f"it is given a feed_dict; {inside}"
    if isinstance(fetches, BoundStep):
        return f"it is called with arguments (sess.call(step, *args)); {inside}"
    if schedules:
        return (
            "it schedules its closure itself; to fuse, name the tf.function it schedules "
            f"in the step's {FUSED_STEP_ATTRIBUTE} attribute"
        )
    return f"it is not a tf.function; {inside}"


# Fused loops by step function, then by kept entries: (global step, loop). Kept
# across sessions as TensorFlow keeps a `tf.function`'s traces, so a new session
# over the same step does not trace its loop again; weak, so it dies with the step.
_LOOPS: weakref.WeakKeyDictionary[
    tf.types.experimental.PolymorphicFunction,
    dict[tuple[str, ...], tuple[tf.Variable, tf.types.experimental.PolymorphicFunction]],
] = weakref.WeakKeyDictionary()


def loop_for(
    step: tf.types.experimental.PolymorphicFunction, keep: tuple[str, ...], runner: LoopRunner
) -> tf.types.experimental.PolymorphicFunction:
    """The fused loop of `step` keeping `keep`, for `runner`, traced on first use.

    With a global step the session owns, each step advances it (`LoopRunner.loop_step`).
    """
    step, variable = runner.loop_step(step)
    loops = _LOOPS.setdefault(step, {})
    cached = loops.get(keep)
    if cached is None or cached[0] is not variable:
        loop = _build_loop(step, variable, keep)
        loop.get_concrete_function()
        cached = loops[keep] = (variable, loop)
    return cached[1]


def is_per_replica(value: Results) -> bool:
    """Whether `value` holds one value per replica (a synced variable is one value)."""
    return isinstance(value, tf.distribute.DistributedValues) and not isinstance(value, tf.Variable)


def replica_value(value: _T, what: str) -> _T | tf.Tensor:
    """One tensor for a per-replica `value` of `strategy.run`, on the device.

    A hook that takes a step's outputs itself (not as fetches), e.g. to keep them on the device,
    gets one value per step as fetches do: the mean over this process's replicas of a
    floating-point value, else the value every replica holds. Works inside a `tf.function` too;
    any other value is returned as it is.

    ```python
    loss = monsession.plugins.replica_value(outputs["loss"], "MyHook keeps 'loss'")
    ```

    Args:
      value: A step output.
      what: Who takes it, for the error, e.g. ``"MyHook keeps the step's 'loss'"``.

    Raises:
      tf.errors.InvalidArgumentError: If non-floating values differ between
        replicas (when the value is computed).
    """
    if not is_per_replica(value):
        return value
    replicas = local_replica_values(value)
    first = replicas[0]
    if first.dtype.is_floating or first.dtype.is_complex:
        return tf.reduce_mean(tf.stack(replicas), axis=0)
    message = (
        f"{what}: a per-replica value of strategy.run whose replicas differ, and whose dtype "
        "has no mean. Reduce it in the step, e.g. strategy.reduce(tf.distribute.ReduceOp.SUM, "
        "value, axis=None), and return that."
    )
    checks = [tf.debugging.assert_equal(item, first, message=message) for item in replicas[1:]]
    with tf.control_dependencies(checks):
        return tf.identity(first)


def _kept_specs(
    step: tf.types.experimental.PolymorphicFunction, keep: tuple[str, ...]
) -> list[tf.TensorSpec]:
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
        output = outputs[name]
        if is_per_replica(output):
            output = local_replica_values(output)[0]
        specs.append(tf.TensorSpec(output.shape, output.dtype))
    return specs


def _build_loop(
    step: tf.types.experimental.PolymorphicFunction, variable: tf.Variable, keep: tuple[str, ...]
) -> tf.types.experimental.PolymorphicFunction:
    """A `tf.function(max_steps, deadline)` running `step` silently while fewer than
    `max_steps` ran and before `deadline`; it returns how many ran, the global step after
    them, and the kept entries stacked (the count and deadline are tensors: traced once)."""
    specs = _kept_specs(step, keep) if keep else []
    traced = weakref.ref(step)  # Called only while tracing: the cache's key stays weak.

    @tf.function(input_signature=_LOOP_SIGNATURE, autograph=False)
    def loop(max_steps: tf.Tensor, deadline: tf.Tensor) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
        def more(done: tf.Tensor, *arrays: tf.TensorArray) -> tf.Tensor:
            return tf.logical_and(done < max_steps, tf.timestamp() < deadline)

        def one_step(done: tf.Tensor, *arrays: tf.TensorArray) -> tuple[tf.Tensor, ...]:
            outputs = traced()()  # type: ignore[misc]
            written = [
                array.write(
                    tf.cast(done, tf.int32),
                    replica_value(outputs[name], f"A hook keeps the step's {name!r} output"),
                )
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
