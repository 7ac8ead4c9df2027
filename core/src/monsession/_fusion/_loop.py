"""The fused loop: silent steps inside one `tf.function`; which function a run fuses, or why none.

`Loops.loop_for` builds (once per session, step function and kept entries)
a `tf.function(max_steps, deadline)` that runs the step while fewer than
`max_steps` ran and the deadline has not passed, and returns how many ran,
the global step after them, and the entries hooks keep from every step. It
takes the count and the deadline as tensors, so it is traced once per step
function, never per count. `_fusion` decides how many steps to run; the
backend's `LoopRunner` runs the loop.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping

import tensorflow as tf

from monsession._api._types import Fetches
from monsession._backends._backend import FeedDict, LoopRunner, StepSource
from monsession._backends._eager import BoundStep
from monsession._backends._owned_step import advancing
from monsession._backends._per_replica import is_per_replica, replica_value
from monsession._tf_compat import local_replica_values

FUSED_STEP_ATTRIBUTE = "monsession_fused_step"
_LOOP_SIGNATURE = [tf.TensorSpec([], tf.int64), tf.TensorSpec([], tf.float64)]


def fused_function(fetches: Fetches) -> tf.types.experimental.PolymorphicFunction | None:
    """The `tf.function` to fuse for `run(fetches)`, or `None`.

    A `tf.function` (or `sess.call` of one, without arguments), or a wrapper
    that names the `tf.function` it calls in its `monsession_fused_step`
    attribute (a wrapper that does nothing on the steps where no hook acts,
    e.g. `NanTensorHook.watch`).
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
    """What `step` names in its `monsession_fused_step` attribute, through wrappers of wrappers.

    E.g. `NanTensorHook.watch` of a step that schedules a closure names that step,
    which names the `tf.function` it schedules.
    """
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


class Loops:
    """One session's fused loops: traced once per step function, kept entries
    and global step variable."""

    def __init__(self) -> None:
        self._loops: weakref.WeakKeyDictionary[
            tf.types.experimental.PolymorphicFunction,
            dict[tuple[str, ...], tuple[tf.Variable, tf.types.experimental.PolymorphicFunction]],
        ] = weakref.WeakKeyDictionary()

    def loop_for(
        self,
        step: tf.types.experimental.PolymorphicFunction,
        keep: tuple[str, ...],
        runner: LoopRunner,
    ) -> tf.types.experimental.PolymorphicFunction:
        """The fused loop of `step` keeping `keep`, for `runner`, traced on first use.

        With a global step the session owns, each step is wrapped to advance it.
        """
        variable, owned = runner.loop_variables()
        if owned is not None:
            step = advancing(step, owned)
        loops = self._loops.setdefault(step, {})
        cached = loops.get(keep)
        if cached is None or cached[0] is not variable:
            loop = _build_loop(step, variable, keep)
            loop.get_concrete_function()
            cached = loops[keep] = (variable, loop)
        return cached[1]


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
    """A `tf.function(max_steps, deadline)` running `step` silently.

    It runs the step while fewer than `max_steps` ran and `tf.timestamp()`
    is before `deadline`, and returns how many ran, the global step after
    them, and the kept entries stacked.
    """
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
