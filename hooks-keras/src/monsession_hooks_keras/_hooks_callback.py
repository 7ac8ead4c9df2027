"""`HooksCallback`: monsession hooks inside `model.fit`."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from typing import Any

import keras

from monsession import EagerSession, SessionRunHook
from monsession.plugins import TF_HOOK_METHOD_NAMES, HookLifecycle, check_directory
from monsession_hooks_keras._fit_steps import FitRunContext, FitSteps, evaluate_fetches
from monsession_hooks_keras._global_step import fit_checkpoint, fit_global_step
from monsession_hooks_keras._resume import checkpoint_directory, checkpoint_of_step

_NAME = "HooksCallback"


def _check_hooks(hooks: Iterable[Any]) -> list[Any]:
    if isinstance(hooks, SessionRunHook):
        hooks = [hooks]
    checked = list(hooks)
    for index, hook in enumerate(checked):
        missing = [name for name in TF_HOOK_METHOD_NAMES if not callable(getattr(hook, name, None))]
        if missing:
            raise TypeError(
                f"{_NAME}: hooks[{index}] is {hook!r}, which lacks {', '.join(missing)}; "
                "expected a monsession.SessionRunHook."
            )
    return checked


class HooksCallback(keras.callbacks.Callback):
    """Runs monsession hooks inside `model.fit`, as a monitored session would.

    * Train begin: the optimizer's iteration count becomes the global step
      (`fit_global_step`), and ``tf.train.Checkpoint(model=..., optimizer=...,
      step=...)`` the state a `CheckpointSaverHook` given no saver saves (in
      the ``SAVERS`` collection); then every hook's `begin()`; at the first
      train begin, when the step is above 0 (the user restored a
      checkpoint), the hooks' state saved
      beside the checkpoint of that step in `checkpoint_dir` is loaded; then
      `after_create_session(session, None)` (`monsession.plugins.HookLifecycle`,
      as in a monitored session).
    * Each batch (one `train_function` call): `before_run` before it,
      `after_run` after it, with a `SessionRunContext` whose step service
      gives the iteration count before and after the batch, counted on the
      host (one read at train begin).
    * Train end: every hook's `end(session)`; the global step and the
      ``SAVERS`` collection go back to what they were.

    A hook's fetches are names of `logs` entries (``"loss"``, the metrics),
    variables, tensors or zero-argument callables; their host values reach
    `after_run`. `run_context.request_stop()` sets `model.stop_training`, so
    `fit` stops after the batch. The `session` hooks get is a
    `monsession.EagerSession` (its `run()` reads variables, calls callables).

    What `fit` cannot give hooks: feeds (a hook's `feed_dict` raises a
    `ValueError`), run options and metadata (`options` is ignored,
    `run_metadata` is `None`), restoring at train begin (restore before
    `fit`, or use `keras.callbacks.BackupAndRestore`; the hooks' state is
    loaded, see above), and `on_failure()`:
    Keras has no callback for a failing `fit`, so after an error neither
    `end()` nor `on_failure()` runs, and the next `fit` with this callback
    puts the global step back first.

    ```python
    model.fit(x, y, epochs=2, callbacks=[HooksCallback([
        CheckpointSaverHook(ckpt_dir, save_steps=100),  # Saves model, optimizer, step.
        StopAtStepHook(last_step=1000),
    ])])
    ```

    Args:
      hooks: `monsession.SessionRunHook`s, called in list order.
      checkpoint_dir: Where the checkpoint that `fit` resumes from lies, for
        the hooks' saved state (``<prefix>.hooks.json``, written by
        `CheckpointSaverHook`). Default: the `checkpoint_dir` of the first
        hook that has one (a `CheckpointSaverHook`); `None` and no such
        hook: the hooks always start fresh.

    Raises:
      TypeError: If a hook lacks a method of the hook API, or
        `checkpoint_dir` is not a path.
      ValueError: If `checkpoint_dir` is empty or a file.
    """

    def __init__(
        self, hooks: Iterable[Any], *, checkpoint_dir: str | os.PathLike[str] | None = None
    ) -> None:
        super().__init__()
        self._hooks = _check_hooks(hooks)
        if checkpoint_dir is not None:
            check_directory(_NAME, "checkpoint_dir", checkpoint_dir, writable=False)
            self._checkpoint_dir: str | None = os.fspath(checkpoint_dir)
        else:
            self._checkpoint_dir = checkpoint_directory(self._hooks)
        self._lifecycle = HookLifecycle(self._hooks, _NAME)  # Calls them as a session does.
        self._scope: contextlib.ExitStack | None = None
        self._session: EagerSession | None = None
        self._steps: FitSteps | None = None
        self._context: FitRunContext | None = None
        self._requests: dict[Any, Any] = {}  # Each hook that asked for fetches, to them.
        self._batch_begin = 0  # Index of the first step of the current batch call.
        self._began = False  # Whether a train begin ran (hook state is loaded at the first).

    @property
    def hooks(self) -> list[Any]:
        """The hooks, in the order they are called."""
        return list(self._hooks)

    def on_train_begin(self, logs: Any = None) -> None:
        self._close()  # A previous fit that raised left its state behind.
        scope = contextlib.ExitStack()
        variable = scope.enter_context(fit_global_step(self.model))
        scope.enter_context(fit_checkpoint(self.model, variable))
        self._scope = scope
        self._session = EagerSession()
        step = int(variable.numpy())
        self._steps = FitSteps(step)
        self._lifecycle.begin()
        restored_from = None
        if step > 0 and self._checkpoint_dir is not None and not self._began:
            # As a monitored session created from a checkpoint.
            restored_from = checkpoint_of_step(self._checkpoint_dir, step, _NAME)
        self._began = True  # A later fit goes on with the state the hooks have.
        self._lifecycle.created(self._session, None, restored_from)

    def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
        assert self._steps is not None and self._session is not None, "train begin ran first"
        self._batch_begin = batch
        self._steps.start()
        context = FitRunContext(self._session, self._steps)
        requests, feeds, _, feeders = self._lifecycle.dispatcher.before_run(context, None, None)
        if feeds:
            fed = sorted(map(str, feeds))
            raise ValueError(
                f"{_NAME}: {', '.join(sorted(set(feeders.values())))} feeds {fed}, "
                "but model.fit takes no feeds; feed the data through fit's dataset."
            )
        self._context = context
        self._requests = requests

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        context = self._context
        assert context is not None and self._steps is not None, "batch begin ran first"
        self._steps.finish(batch - self._batch_begin + 1)
        context.batch_ran()
        logs = logs or {}
        results = {
            hook: evaluate_fetches(type(hook).__name__, fetches, logs)
            for hook, fetches in self._requests.items()
        }
        self._lifecycle.after_run(context, results, None, None)
        if context.stop_requested:
            self.model.stop_training = True

    def on_train_end(self, logs: Any = None) -> None:
        session = self._session
        try:
            if session is not None:
                self._lifecycle.end(session)
        finally:
            self._close()

    def _close(self) -> None:
        scope, self._scope = self._scope, None
        session, self._session = self._session, None
        self._context = None
        if session is not None:
            session.close()
        if scope is not None:
            scope.close()
