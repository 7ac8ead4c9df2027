"""The step service and run context of hooks running under `model.fit`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from monsession import SessionRunArgs, SessionRunContext


class FitSteps:
    """The global step under `model.fit`: the optimizer's iteration count, on the host.

    Read once from the variable at train begin, then advanced by the number
    of steps each `train_function` call ran (Keras passes the first and last
    step index of the call to the batch callbacks, so `steps_per_execution`
    is counted). Implements core's `StepService` protocol.

    Args:
      value: The iteration count at train begin.
    """

    def __init__(self, value: int) -> None:
        self._before = value
        self._after = value

    def start(self) -> None:
        """A batch begins: its step is the one after the previous batch."""
        self._before = self._after

    def finish(self, steps: int) -> None:
        """A batch of `steps` training steps ended."""
        self._after = self._before + steps

    def global_step_before(self) -> int | None:
        return self._before

    def global_step_after(self, reaching: Callable[[int], bool] | None = None) -> int | None:
        if reaching is not None and not reaching(self._after):
            return None
        return self._after


class FitRunContext(SessionRunContext):
    """A `SessionRunContext` of one `model.fit` batch; knows the step after it once it ran."""

    def __init__(self, session: Any, steps: FitSteps) -> None:
        super().__init__(SessionRunArgs(None), session, steps)
        self._fit_steps = steps
        self._batch_ran = False

    def batch_ran(self) -> None:
        """Called by `HooksCallback` once the batch ran."""
        self._batch_ran = True

    def global_step_after(self, reaching: Callable[[int], bool] | None = None) -> int | None:
        if not self._batch_ran:
            raise RuntimeError(
                "SessionRunContext.global_step_after() is known after the run: call it in "
                "after_run(), or use global_step in before_run()."
            )
        return self._fit_steps.global_step_after(reaching)


def _host(value: Any) -> Any:
    if isinstance(value, (tf.Tensor, tf.Variable)):
        return value.numpy()
    value_attribute = getattr(value, "value", None)  # A Keras variable.
    if isinstance(value_attribute, tf.Variable):
        return value_attribute.numpy()
    return value


def evaluate_fetches(owner: str, fetches: Any, logs: Mapping[str, Any]) -> Any:
    """A hook's fetches under `model.fit`, as host values in the same structure.

    A string names an entry of the batch's `logs` (e.g. ``"loss"``); a
    variable or tensor is read; a zero-argument callable is called and its
    result read.

    Raises:
      ValueError: If a name is not a `logs` entry.
    """

    def value_of(leaf: Any) -> Any:
        if isinstance(leaf, str):
            if leaf not in logs:
                raise ValueError(
                    f"{owner} fetches {leaf!r}, but model.fit's logs of this batch have no "
                    f"entry of that name; they have {sorted(logs)}. Under HooksCallback, "
                    "fetch names are the names of the model's losses and metrics."
                )
            return np.asarray(logs[leaf])
        if callable(leaf) and not isinstance(leaf, (tf.Tensor, tf.Variable)):
            return tf.nest.map_structure(_host, leaf())
        return _host(leaf)

    return tf.nest.map_structure(value_of, fetches)
