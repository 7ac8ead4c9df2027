"""`LoggingTensorHook`: logs the values of tensors every N steps or seconds."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from monsession import (
    SessionRunArgs,
    SessionRunContext,
    SessionRunValues,
    tf_logging,
)
from monsession.plugins import as_run_context, check_flag, check_schedule
from monsession_hooks_logging import _tensors
from monsession_hooks_logging._run_timed_hook import RunTimedHook
from monsession_hooks_logging._tensors import Formatter

_HOOK = "LoggingTensorHook"


class LoggingTensorHook(RunTimedHook):
    """Logs the values of tensors every N local steps, every N seconds, or at the end.

    Lines go to TensorFlow's logger (``"tensorflow"``) at level INFO, as
    ``"tag = value, tag = value (0.123 sec)"``: the seconds since the previous
    line, left out on the first line of a process (also after a restart from a
    checkpoint; after a recovery in the same process the seconds leave out
    nothing but never span two processes). Values are fetched only on the steps
    that log. Steps are counted by the hook itself (the number of `run()`
    calls it saw since `begin()`), not by the global step.

    In graph mode the tensors are tensors, ops, variables or their names
    (``"loss"`` means ``"loss:0"``). In eager mode a name is an entry of the
    mapping the step returns; variables, tensors and zero-argument callables
    may be given as such.

    Args:
      tensors: A dict of tags to tensors/names, or a list of tensors/names
        (each item is its own tag; an eager `tf.Variable` is tagged by its
        `name`). Dict tags are logged in sorted order.
      every_n_iter: Log every this many local steps, starting with the first.
      every_n_secs: Log at most once every this many seconds, starting with
        the first step.
      at_end: Also log once in `end()`.
      formatter: A function from the dict of tags to values to the line to
        log; by default ``"tag = value"`` pairs in tag order.

    Raises:
      ValueError: If neither or both of `every_n_iter` and `every_n_secs` are
        given (unless only `at_end` is set), or one is not positive.
      TypeError: If `tensors` is not a dict or list, `formatter` is not
        callable, `every_n_iter` is not an int or `every_n_secs` not a number
        (a `bool` or a string never is), or `at_end` is not a bool.
    """

    def __init__(
        self,
        tensors: Any,
        every_n_iter: int | None = None,
        every_n_secs: float | None = None,
        at_end: bool = False,
        formatter: Formatter | None = None,
    ) -> None:
        check_flag(_HOOK, "at_end", at_end)
        only_at_end = at_end and every_n_iter is None and every_n_secs is None
        if not only_at_end and (every_n_iter is None) == (every_n_secs is None):
            raise ValueError(
                f"{_HOOK}: either at_end and/or exactly one of every_n_iter and every_n_secs "
                f"must be provided; got every_n_iter={every_n_iter!r}, "
                f"every_n_secs={every_n_secs!r}, at_end={at_end!r}."
            )
        check_schedule(
            _HOOK, "every_n_iter", every_n_iter, "every_n_secs", every_n_secs, allow_neither=True
        )
        if formatter is not None and not callable(formatter):
            raise TypeError(f"{_HOOK}: formatter must be callable, got {formatter!r}.")
        super().__init__(_HOOK, every_n_secs, every_n_iter)
        self._watched = _tensors.watched(_HOOK, tensors)
        self._formatter = formatter
        self._log_at_end = at_end
        self._should_trigger = False
        self._fetches: list[Any] = []
        self._last_values: dict[Hashable, Any] = {}
        self._logged_here = False  # Whether this process logged a line yet.

    def begin(self) -> None:
        self._fetches = self._watched.resolve(_HOOK)
        step_outputs = [f for f in self._fetches if _tensors.is_step_output(f)]
        if self._timer is None and step_outputs:
            raise ValueError(
                f"{_HOOK}: at_end alone cannot log {step_outputs[0]!r}: it names an entry of "
                "the mapping the step returns, which exists only while a step runs. Also give "
                "every_n_iter or every_n_secs (the end line repeats the latest values), or log "
                "a tf.Variable."
            )
        self._reset_runs()
        self._last_values = {}
        self._logged_here = False

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        run_context = as_run_context(run_context)
        self._should_trigger = self._due(run_context.silent_steps)
        if not self._should_trigger:
            return None
        return SessionRunArgs(self._fetches)

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        if self._should_trigger:
            self._log(dict(zip(self._watched.tags, run_values.results, strict=True)))
        self._ran()

    def end(self, session: Any) -> None:
        """Logs once more if `at_end`: the tensors are run again in `session`.

        A step output (eager mode) exists only while a step runs, so for it
        the line repeats the latest value the hook fetched.
        """
        if not self._log_at_end:
            return
        pairs = list(zip(self._watched.tags, self._fetches, strict=True))
        runnable = [(tag, fetch) for tag, fetch in pairs if not _tensors.is_step_output(fetch)]
        if len(runnable) < len(pairs) and not self._last_values:
            tf_logging.info("%s: no step ran, so there are no values to log at the end.", _HOOK)
            return
        values = dict(self._last_values)
        if runnable:
            ran = session.run([fetch for _, fetch in runnable])
            values.update(zip([tag for tag, _ in runnable], ran, strict=True))
        # Off the schedule: the timer keeps its last trigger, so a job
        # restarted from a checkpoint saved after this line logs at the
        # uninterrupted run's iterations.
        self._log({tag: values[tag] for tag in self._watched.tags}, on_schedule=False)

    def _log(self, values: dict[Hashable, Any], on_schedule: bool = True) -> None:
        self._last_values = values
        elapsed_secs = self._trigger() if on_schedule else self._since_trigger()
        if not self._logged_here:  # TensorFlow's first line of a process has no time.
            self._logged_here = True
            elapsed_secs = None
        if self._formatter is not None:
            tf_logging.info(self._formatter(values))
        elif elapsed_secs is None:
            tf_logging.info("%s", _tensors.default_format(self._watched.tags, values))
        else:
            tf_logging.info(
                "%s (%.3f sec)", _tensors.default_format(self._watched.tags, values), elapsed_secs
            )
