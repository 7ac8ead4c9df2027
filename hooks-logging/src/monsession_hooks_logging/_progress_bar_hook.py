"""`ProgressBarHook`: a tqdm progress bar over the global step."""

from __future__ import annotations

import sys
from typing import IO, Any

import monsession
from monsession import (
    NextAction,
    SessionRunArgs,
    SessionRunContext,
    SessionRunValues,
)
from monsession.plugins import as_run_context
from monsession_hooks_logging import _tensors
from monsession_hooks_logging._progress_display import BarDisplay, LineDisplay, is_terminal
from monsession_hooks_logging._run_timed_hook import RunTimedHook

_HOOK = "ProgressBarHook"
_DEFAULT_EVERY_N_SECS = 1.0


class ProgressBarHook(RunTimedHook):
    """Shows training progress: global step, steps/sec, ETA and chosen values.

    On a terminal it draws a tqdm bar ``"37/100 [00:04<00:07, 8.9step/s,
    loss=0.25]"``. Otherwise (a pipe, a file, a notebook log) it falls back to
    plain lines at most every `log_every_n_secs` seconds, and one at the end:
    on TensorFlow's logger (``"tensorflow"``) when it shows INFO records
    (``tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)``),
    else written to `file`, so that they show at the default verbosity too.

    The bar moves by one on every step without reading anything back. Only
    every `every_n_iter` steps or `every_n_secs` seconds (by default every
    second) the values of `tensors` are fetched with the step, and the bar is
    set to the global step after it, from the session's step service
    (`run_context.global_step_after()`: eager mode knows it on the host,
    graph mode reads the variable once). When the last step is known, the
    run that reaches it fetches them too, so the bar ends on that step's values.

    The ETA needs the last step: pass `last_step=`, or pass the
    `monsession.StopAtStepHook` of the same session as `stop_hook=` (its
    `last_step` is read whenever the bar is refreshed, so a `num_steps` hook
    works once the session exists). Without either the bar shows steps and
    steps/sec only.

    Args:
      tensors: What to show next to the bar, as for `LoggingTensorHook`: a
        dict of tags to tensors/names or a list of them (eager: names of
        entries of the mapping the step returns, variables, tensors or
        zero-argument callables). `None` shows none.
      every_n_iter: Update the bar and fetch `tensors` every this many steps.
      every_n_secs: Do so at most once every this many seconds. Default
        1.0 when neither is given.
      last_step: The global step at which training ends.
      stop_hook: A hook with a `last_step` attribute (a
        `monsession.StopAtStepHook`) to take the last step from.
      file: Where to draw the bar; `sys.stderr` (at session creation) by
        default. Plain lines are used when it is not a terminal.
      log_every_n_secs: Seconds between plain lines when `file` is not a
        terminal (0: a line on every fetch).
      desc: A prefix for the bar and the lines.

    Raises:
      ValueError: If both `every_n_iter` and `every_n_secs`, or both
        `last_step` and `stop_hook` are given, or a number is out of range.
      TypeError: If `stop_hook` has no `last_step` attribute, `tensors` is
        not a dict or list, or a number has the wrong type (`every_n_iter`
        and `last_step`: an int; never a `bool` or a string).
    """

    def __init__(
        self,
        tensors: Any = None,
        every_n_iter: int | None = None,
        every_n_secs: float | None = None,
        last_step: int | None = None,
        stop_hook: Any = None,
        file: IO[str] | None = None,
        log_every_n_secs: float = 30.0,
        desc: str | None = None,
    ) -> None:
        monsession.plugins.check_schedule(
            _HOOK, "every_n_iter", every_n_iter, "every_n_secs", every_n_secs, allow_neither=True
        )
        if every_n_iter is None and every_n_secs is None:
            every_n_secs = _DEFAULT_EVERY_N_SECS
        monsession.plugins.check_interval(
            _HOOK, "log_every_n_secs", log_every_n_secs, "secs", allow_zero=True
        )
        if last_step is not None and stop_hook is not None:
            raise ValueError(f"{_HOOK}: give at most one of last_step and stop_hook.")
        if last_step is not None:
            monsession.plugins.check_interval(
                _HOOK,
                "last_step",
                last_step,
                "steps",
                allow_zero=True,
                expected="a global step >= 0",
            )
        if stop_hook is not None and not hasattr(stop_hook, "last_step"):
            raise TypeError(
                f"{_HOOK}: stop_hook must have a last_step attribute, like "
                f"monsession.StopAtStepHook (TensorFlow's own has none; pass last_step= "
                f"instead); got {stop_hook!r}."
            )
        super().__init__(_HOOK, every_n_secs, every_n_iter)
        self._watched = _tensors.watched(_HOOK, tensors or [])
        self._last_step = last_step
        self._stop_hook = stop_hook
        self._file = file
        self._log_every_n_secs = float(log_every_n_secs)
        self._desc = desc
        self._display: BarDisplay | LineDisplay | None = None
        self._should_trigger = False
        self._timer_due = False
        self._silent_steps = 0
        self._fetches: list[Any] = []

    @property
    def last_step(self) -> int | None:
        """The global step the bar runs to, if known."""
        if self._last_step is not None:
            return self._last_step
        if self._stop_hook is not None:
            return self._stop_hook.last_step
        return None

    def begin(self) -> None:
        monsession.plugins.require_global_step(_HOOK)
        self._fetches = self._watched.resolve(_HOOK)
        self._reset_runs()
        self._display = None

    def after_create_session(self, session: Any, coord: Any) -> None:
        self._start_display(monsession.plugins.read_global_step(session))

    def _start_display(self, global_step: int) -> BarDisplay | LineDisplay:
        """Opens the display (once) and sets it to `global_step`."""
        if self._display is None:
            file = self._file if self._file is not None else sys.stderr
            if is_terminal(file):
                self._display = BarDisplay(file, self._desc)
            else:
                self._display = LineDisplay(self._log_every_n_secs, self._desc, file)
        self._display.start(global_step, self.last_step)
        return self._display

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        run_context = as_run_context(run_context)
        self._silent_steps = run_context.silent_steps
        self._timer_due = self._due(run_context.silent_steps)
        # The last step's line is an extra one: it leaves the schedule as it is.
        self._should_trigger = self._timer_due or self._reaches_last_step(run_context.global_step)
        if not self._should_trigger or not self._fetches:
            return None
        return SessionRunArgs(self._fetches)

    def next_action(self, global_step: int) -> NextAction:
        """The run the schedule is next due at, or the one reaching the last step if sooner."""
        action = super().next_action(global_step)
        last_step = self.last_step
        if last_step is None:
            return action
        to_last = max(1, last_step - global_step)
        steps = to_last if action.steps is None else min(action.steps, to_last)
        return NextAction(steps=steps, at_time=action.at_time, keep=action.keep)

    def _reaches_last_step(self, global_step: int | None) -> bool:
        """Whether the coming run reaches the last step (it adds one to `global_step`)."""
        last_step = self.last_step
        return last_step is not None and global_step is not None and global_step + 1 >= last_step

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        run_context = as_run_context(run_context)
        display = self._display
        if display is None:  # Driven without after_create_session.
            display = self._start_display(_known(run_context.global_step))
        if self._should_trigger:
            if self._timer_due:
                self._trigger()
            values = run_values.results if self._fetches else []
            display.show(
                _known(run_context.global_step_after()),
                self.last_step,
                _tensors.short_format(dict(zip(self._watched.tags, values, strict=True))),
            )
        else:
            display.advance(self._silent_steps + 1)
        self._ran()

    def end(self, session: Any) -> None:
        if self._display is None:
            return
        self._display.finish(monsession.plugins.read_global_step(session), self.last_step)
        self._display = None


def _known(global_step: int | None) -> int:
    """The step service's value; `begin()` made sure there is a global step."""
    if global_step is None:
        raise RuntimeError(
            f"{_HOOK}: the session knows no global step; run the hook in a "
            "monsession.MonitoredSession (or monsession.testing.hooked_session)."
        )
    return global_step
