"""`KerasCallbacksHook`: Keras 3 callbacks in a monsession training loop."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import keras

from monsession import (
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
    tf_logging,
)
from monsession.plugins import as_run_context, in_eager_mode
from monsession_hooks_keras import _callback_state, _keras_compat
from monsession_hooks_keras._logs import acts_on, host_logs, needs_logs

_NAME = "KerasCallbacksHook"

_GRAPH_MODE = (
    f"{_NAME} runs Keras 3 callbacks in eager mode only (TF2 loops), and this session runs "
    "in graph mode (tf.compat.v1); Keras 3 has no graph-mode training. Use the monsession "
    "hooks (monsession.hooks.CheckpointSaverHook, SummarySaverHook, ...) in graph mode."
)


def _check_callbacks(callbacks: Iterable[Any]) -> list[Any]:
    if isinstance(callbacks, keras.callbacks.Callback):
        callbacks = [callbacks]
    if isinstance(callbacks, keras.callbacks.CallbackList):
        callbacks = callbacks.callbacks
    checked = list(callbacks)
    for index, callback in enumerate(checked):
        if not isinstance(callback, keras.callbacks.Callback):
            raise TypeError(
                f"{_NAME}: callbacks[{index}] is {callback!r}; expected a Keras 3 "
                "keras.callbacks.Callback (tf.keras in TF >= 2.16; tf_keras callbacks are "
                "Keras 2 and do not work with Keras 3 models)."
            )
        if type(callback).__name__ == "HooksCallback":
            raise ValueError(
                f"{_NAME}: callbacks[{index}] is a HooksCallback, which runs monsession hooks "
                "inside model.fit; in a monsession loop pass those hooks to the session instead."
            )
        if isinstance(callback, keras.callbacks.TensorBoard) and callback.write_graph:
            tf_logging.warning(
                "%s: callbacks[%d] is TensorBoard(write_graph=True), which writes the graph of "
                "model.fit's train_function; outside fit there is none, so no graph is written "
                "(its scalars, histograms and profiles are). Pass write_graph=False to silence "
                "this warning.",
                _NAME,
                index,
            )
    return checked


# Callbacks that change or read the optimizer (`model.optimizer`) during training.
_NEEDS_OPTIMIZER = ("LearningRateScheduler", "ReduceLROnPlateau")


def _needs_optimizer(callback: Any) -> bool:
    if isinstance(callback, keras.callbacks.TensorBoard):
        return bool(callback.write_steps_per_second)  # It reads the optimizer's iterations.
    return any(isinstance(callback, getattr(keras.callbacks, name)) for name in _NEEDS_OPTIMIZER)


def _attach_optimizer(model: Any, optimizer: Any, callbacks: list[Any]) -> None:
    """Gives `model` the optimizer the callbacks read, as `compile` would; checks it."""
    current = getattr(model, "optimizer", None)  # Set by `compile`, absent before.
    if optimizer is not None:
        if not isinstance(optimizer, keras.optimizers.Optimizer):
            raise TypeError(
                f"{_NAME}: optimizer must be a Keras 3 keras.optimizers.Optimizer (the one the "
                f"step applies), got {optimizer!r}."
            )
        if current is not None and current is not optimizer:
            raise ValueError(
                f"{_NAME}: model is compiled with the optimizer {current!r}, and optimizer= is "
                f"another one, {optimizer!r}; pass the optimizer the step applies, once."
            )
        model.optimizer = optimizer
        return
    if current is not None:
        return
    for index, callback in enumerate(callbacks):
        if _needs_optimizer(callback):
            raise ValueError(
                f"{_NAME}: callbacks[{index}] is {type(callback).__name__}, which reads or "
                "changes model.optimizer, and model has no optimizer (it was never compiled); "
                "pass the optimizer the step applies: KerasCallbacksHook(..., optimizer=optimizer)."
            )
    # What Keras's callbacks expect of a model without an optimizer (they test for None).
    model.optimizer = None


def _check_logs(logs: str | Sequence[str]) -> tuple[str, ...]:
    names = (logs,) if isinstance(logs, str) else tuple(logs)
    for name in names:
        if not isinstance(name, str) or not name:
            raise TypeError(
                f"{_NAME}: logs must be the names of entries of the mapping the step returns "
                f"(e.g. ('loss', 'accuracy')); got {logs!r}."
            )
    return names


class KerasCallbacksHook(SessionRunHook):
    """Runs Keras 3 callbacks in a monsession loop, as `model.fit` would.

    The session's lifecycle and steps drive the callbacks:

    * `on_train_begin` when the session is created (not again when it is
      re-created after a preemption error; again in a new session that
      holds the same hook); `on_train_end` in `end()`, with the logs of the
      last epoch.
    * `on_epoch_begin` / `on_epoch_end` when the loop calls `epoch_begin()`
      / `epoch_end()` (`monsession.Epochs` does). Steps that run while no
      epoch is open open one: a loop without epochs is one epoch, as `fit`
      with ``epochs=1`` (`on_epoch_begin` before its first step,
      `on_epoch_end` in `end()`). An epoch still open in `end()` (the
      session stopped mid-epoch) ends there, as in `fit`. The epoch in
      progress is saved with each checkpoint (the hook's state), so a run
      resumed mid-epoch goes on in that epoch.
    * `on_train_batch_begin` / `on_train_batch_end` around every step. The
      batch index is the number of global steps since the epoch began, from
      the step service: the hook never reads the global step itself.

    `logs` of a batch are the entries `logs` of the mapping the step
    returns, fetched by name and converted to host floats when some
    callback reads logs (has its own batch-end, `on_epoch_end` or
    `on_train_end` method). An epoch's logs are those given to
    `epoch_end()`, else the logs of its last step, as `fit` logs its last
    step's metrics. The model's metrics are reset when an epoch begins, as
    `fit` does. A callback that sets `model.stop_training = True` in a batch
    stops the session after that step; in `epoch_end()` the method returns
    `True` so the loop can stop.

    Eager mode only: Keras 3 does not train in graph mode, so a session in
    graph mode raises a `RuntimeError` in `begin()`.

    ```python
    hook = KerasCallbacksHook([keras.callbacks.ModelCheckpoint(path, save_freq=3)], model)
    with monsession.MonitoredSession(hooks=[hook]) as sess:  # One epoch.
        for x, y in dataset:
            sess.run(train_step, feed_dict={"x": x, "y": y})
    ```

    Args:
      callbacks: Keras 3 `keras.callbacks.Callback`s (or a `CallbackList`).
      model: The `keras.Model` the callbacks act on (saved, stopped, its
        optimizer's learning rate changed...).
      logs: The names of the entries of the step's output mapping given to
        the callbacks as logs; ``()`` fetches nothing.
      epochs: What `fit(epochs=...)` would say (`ProgbarLogger` shows it);
        `None` says 1.
      steps: Steps per epoch, if known (`ProgbarLogger`'s target).
      verbose: The `verbose` parameter the callbacks see.
      optimizer: The `keras.optimizers.Optimizer` the step applies, for a
        model that was never compiled: it becomes `model.optimizer` (as
        `compile` does), which `TensorBoard`, `LearningRateScheduler` and
        `ReduceLROnPlateau` read; a `tf.train.Checkpoint` of the model then
        holds it too. `None`: the model's own, if compiled, else none
        (`model.optimizer` is set to `None`).

    Raises:
      TypeError: If a callback is not a Keras 3 callback, `model` is not a
        `keras.Model`, `optimizer` is not a Keras optimizer, or `logs` holds
        something other than names.
      ValueError: If a callback is a `HooksCallback`; if `optimizer` is not
        the one the model was compiled with; if a callback needs an
        optimizer (`LearningRateScheduler`, `ReduceLROnPlateau`,
        `TensorBoard(write_steps_per_second=True)`) and there is none.
      RuntimeError: If built while TensorFlow is in graph mode.
    """

    def __init__(
        self,
        callbacks: Iterable[Any],
        model: Any,
        *,
        logs: str | Sequence[str] = ("loss",),
        epochs: int | None = None,
        steps: int | None = None,
        verbose: int = 1,
        optimizer: Any = None,
    ) -> None:
        if not in_eager_mode():
            raise RuntimeError(_GRAPH_MODE)
        if not isinstance(model, keras.Model):
            raise TypeError(f"{_NAME}: model must be a Keras 3 keras.Model, got {model!r}.")
        self._callbacks = _check_callbacks(callbacks)
        self._log_names = _check_logs(logs)
        _attach_optimizer(model, optimizer, self._callbacks)
        self._model = model
        params = {"verbose": verbose, "epochs": 1 if epochs is None else epochs, "steps": steps}
        for callback in self._callbacks:
            callback.set_model(model)
            callback.set_params(params)
        # `fit` calls every callback's batch methods; the no-op ones are skipped here.
        self._batch_begin = [cb for cb in self._callbacks if acts_on(cb, "begin")]
        self._batch_end = [cb for cb in self._callbacks if acts_on(cb, "end")]
        self._fetches = (
            {name: name for name in self._log_names}
            if self._log_names and needs_logs(self._callbacks)
            else None
        )
        self._started = False
        self._epoch: int | None = None  # The open epoch.
        self._next_epoch = 0  # The epoch that steps outside an epoch open.
        self._restored: dict[str, Any] | None = None  # The checkpoint's hook state.
        self._resumed: dict[str, Any] | None = None  # The epoch the checkpoint left open.
        self._first_step: int | None = None  # Global step at the start of the epoch.
        self._batch = 0
        self._step_logs: dict[str, Any] = {}  # The last step's.
        self._epoch_logs: dict[str, Any] | None = None  # The last epoch's.

    @property
    def callbacks(self) -> list[Any]:
        """The callbacks, in the order they are called."""
        return list(self._callbacks)

    @property
    def initial_epoch(self) -> int:
        """The epoch to start the loop at: where `BackupAndRestore` resumes, else 0.

        Known once the session is created (`on_train_begin` restores).
        """
        return _keras_compat.initial_epoch(self._model)

    def begin(self) -> None:
        if not in_eager_mode():
            raise RuntimeError(_GRAPH_MODE)
        self._started = False  # A new session: training begins (again).
        self._epoch = None
        self._restored = None
        self._resumed = None
        self._epoch_logs = None

    def after_create_session(self, session: Any, coord: Any) -> None:
        if self._started:
            return  # Re-created after a preemption error: training goes on.
        self._started = True
        self._model.stop_training = False
        for callback in self._callbacks:
            callback.on_train_begin({})
        restored, self._restored = self._restored, None
        if restored is None:
            self._next_epoch = self.initial_epoch
            return
        # The checkpoint's, over `BackupAndRestore`'s; after `on_train_begin`, which resets.
        self._next_epoch = int(restored["epoch"])
        if "callbacks" in restored:
            _callback_state.restore(self._callbacks, restored["callbacks"], epochs=True)
            self._epoch_logs = restored["epoch_logs"]
            if restored["open"]:
                self._resumed = restored

    def state_dict(self) -> dict[str, Any]:
        """Where training is, for the callbacks (see `monsession.StatefulHook`).

        Saved with each checkpoint: the epoch in progress (or the next), the
        global step it began at, the last step's and the last epoch's logs,
        and the standard callbacks' counters (`ModelCheckpoint`'s batches
        since its last save, `TensorBoard`'s batch number, `EarlyStopping`'s
        best, `History`'s records...). A restarted run goes on in that epoch
        with the same batch indices, and its callbacks save, write and
        decide at the steps of the uninterrupted run.
        """
        return {
            "epoch": self._next_epoch if self._epoch is None else self._epoch,
            "open": self._epoch is not None,
            "first_step": self._first_step,
            "logs": _callback_state.plain(self._step_logs),
            "epoch_logs": _callback_state.plain(self._epoch_logs),
            "callbacks": _callback_state.collect(self._callbacks),
        }

    def load_state_dict(self, state: Any) -> None:
        """Takes back where training was (`state_dict`).

        In a new session, applied after the callbacks' `on_train_begin`
        (which resets them). After a recovery in the same session, the
        counters that follow the batches go back to the checkpoint's step;
        what sums up the epochs stays, since no epoch's end is repeated.

        Raises:
          ValueError: If the state was saved by a hook with other callbacks
            (the session then warns and the callbacks go on as they are).
        """
        if "callbacks" in state:
            _callback_state.check(self._callbacks, state["callbacks"])
        if not self._started:
            self._restored = dict(state)
            return
        # Recovered within training: the checkpoint's epoch and batches go on.
        if "callbacks" in state:
            _callback_state.restore(self._callbacks, state["callbacks"], epochs=False)
        if self._epoch is None:
            self._next_epoch = int(state["epoch"])

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        run_context = as_run_context(run_context)
        step = run_context.global_step
        if step is None:
            raise RuntimeError(
                f"{_NAME}: the session knows no global step; create it with "
                "monsession.get_or_create_global_step() and advance it in the step, so "
                "the callbacks get batch indices."
            )
        if self._epoch is None and self._resumed is not None:
            self._resume_epoch()  # Restarted in mid-epoch: it goes on.
        elif self._epoch is None:
            self._begin_epoch(self._next_epoch)  # A loop without (this) epoch's begin.
        if self._first_step is None:
            self._first_step = step
        self._batch = step - self._first_step
        for callback in self._batch_begin:
            callback.on_train_batch_begin(self._batch, {})
        return None if self._fetches is None else SessionRunArgs(self._fetches)

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        if run_values.results is not None:
            self._step_logs = host_logs(run_values.results)
        if self._batch_end:
            logs = dict(self._step_logs)  # One mapping for all, as in `fit`.
            for callback in self._batch_end:
                callback.on_train_batch_end(self._batch, logs)
        if self._model.stop_training:
            run_context.request_stop()

    def epoch_begin(self, epoch: int) -> None:
        """Runs the callbacks' `on_epoch_begin(epoch)`; batches count from 0 again.

        Call it inside the session, before the epoch's first step. The
        model's metrics are reset first, as `fit` does.

        Args:
          epoch: The epoch index (0-based, as in `fit`).

        Raises:
          RuntimeError: If called outside the session (before it is created).
        """
        self._check_started("epoch_begin")
        self._begin_epoch(epoch)

    def epoch_end(self, epoch: int, logs: Mapping[str, Any] | None = None) -> bool:
        """Runs the callbacks' `on_epoch_end(epoch, logs)`.

        Args:
          epoch: The epoch index given to `epoch_begin()`.
          logs: The epoch's metrics (tensors or numbers), e.g.
            ``{"loss": mean_loss, "val_loss": val_loss}``: what `EarlyStopping`,
            `ReduceLROnPlateau`, `ModelCheckpoint(save_best_only=True)` and
            `CSVLogger` read. Converted to host floats here. `None`: the logs
            of the epoch's last step.

        Returns:
          Whether a callback asked to stop training (`model.stop_training`).

        Raises:
          RuntimeError: If called outside the session.
        """
        self._check_started("epoch_end")
        self._end_epoch(epoch, self._step_logs if logs is None else host_logs(logs))
        self._next_epoch = epoch + 1
        return bool(self._model.stop_training)

    def end(self, session: Any) -> None:
        if self._epoch is not None:  # The one epoch of a loop without epochs, or a stop.
            self._end_epoch(self._epoch, self._step_logs)
        for callback in self._callbacks:
            callback.on_train_end(self._epoch_logs)

    def _resume_epoch(self) -> None:
        """Opens again the epoch the checkpoint left open: no `on_epoch_begin`, as in one run."""
        resumed, self._resumed = self._resumed, None
        assert resumed is not None
        self._epoch = int(resumed["epoch"])
        self._first_step = resumed["first_step"]
        self._step_logs = dict(resumed["logs"])

    def _begin_epoch(self, epoch: int) -> None:
        self._resumed = None
        self._epoch = epoch
        self._first_step = None
        self._step_logs = {}
        self._model.reset_metrics()
        for callback in self._callbacks:
            callback.on_epoch_begin(epoch, {})

    def _end_epoch(self, epoch: int, logs: dict[str, Any]) -> None:
        self._epoch = None
        # One mapping for all, kept for `on_train_end`: as in `fit`, what a
        # callback adds (`LearningRateScheduler`'s "learning_rate") is seen by the next.
        self._epoch_logs = dict(logs)
        for callback in self._callbacks:
            callback.on_epoch_end(epoch, self._epoch_logs)

    def _check_started(self, method: str) -> None:
        if not self._started:
            raise RuntimeError(
                f"{_NAME}.{method}() runs the callbacks' epoch methods during training: call it "
                "inside the `with` block of the session that holds the hook."
            )
