"""`HookTimingHook`: which hook slows training down?

The monitored session calls hooks in a plain loop, so the hook cannot see the
others. Instead it hands out timed proxies: each proxy forwards every call to
the hook it wraps and adds the wall time of the call to a shared table, which
the `HookTimingHook` logs periodically and at the end::

    hooks = HookTimingHook.wrap([logging_hook, nan_hook], every_n_steps=1000)
    with monsession.MonitoredTrainingSession(hooks=hooks) as sess:
        ...

Nothing here imports TensorFlow.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable
from typing import Any

import monsession
from monsession import (
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
    tf_logging,
)

_HOOK = "HookTimingHook"
METHODS = monsession.plugins.TF_HOOK_METHOD_NAMES  # Timed: TensorFlow's five.
# monsession's optional hook methods: forwarded untimed when the hook has them.
_FORWARDED = tuple(name for name in monsession.plugins.HOOK_METHOD_NAMES if name not in METHODS)


@dataclasses.dataclass
class MethodTiming:
    """The wall time one hook spent in one method.

    Args:
      calls: How many times the method was called.
      total_secs: Their summed wall time, in seconds.
      max_secs: The longest call, in seconds.
    """

    calls: int = 0
    total_secs: float = 0.0
    max_secs: float = 0.0

    @property
    def mean_secs(self) -> float:
        """The mean wall time of one call, in seconds (0 if never called)."""
        return self.total_secs / self.calls if self.calls else 0.0

    def add(self, secs: float) -> None:
        self.calls += 1
        self.total_secs += secs
        if secs > self.max_secs:
            self.max_secs = secs


class _TimedHook(SessionRunHook):
    """Forwards each call to `hook` and records its wall time in `timings`.

    `before_run` and `after_run` are timed only if `hook` overrides them:
    the monitored session does not call a hook's per-step no-ops, so a proxy
    must not make it start. The optional methods (`next_action`,
    `on_failure`, `state_dict` ...) the hook overrides are forwarded as they
    are, so the session treats the proxy as it treats the hook.
    """

    def __init__(self, hook: Any, timings: dict[str, MethodTiming], label: str) -> None:
        self._hook = hook
        self._timings = timings
        self._label = label
        # Its saved state keeps the wrapped hook's key (`SessionRunHook.state_key`).
        self.state_key = getattr(hook, "state_key", None)
        if monsession.plugins.hook_overrides(hook, "before_run"):
            setattr(self, "before_run", self._timed_before_run)
        if monsession.plugins.hook_overrides(hook, "after_run"):
            setattr(self, "after_run", self._timed_after_run)
        for name in _FORWARDED:
            if monsession.plugins.hook_overrides(hook, name):
                setattr(self, name, getattr(hook, name))

    @property
    def wrapped_hook(self) -> Any:
        """The hook this proxy times."""
        return self._hook

    def __getattr__(self, name: str) -> Any:
        # Only called for names the proxy lacks: the wrapped hook's own API.
        return getattr(self.__dict__["_hook"], name)

    def __repr__(self) -> str:
        return f"<timed {self._hook!r}>"

    def begin(self) -> None:
        start = time.perf_counter()
        try:
            self._hook.begin()
        finally:
            self._timings["begin"].add(time.perf_counter() - start)

    def after_create_session(self, session: Any, coord: Any) -> None:
        start = time.perf_counter()
        try:
            self._hook.after_create_session(session, coord)
        finally:
            self._timings["after_create_session"].add(time.perf_counter() - start)

    def _timed_before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        start = time.perf_counter()
        try:
            request: SessionRunArgs | None = self._hook.before_run(run_context)
            return request
        finally:
            self._timings["before_run"].add(time.perf_counter() - start)

    def _timed_after_run(
        self, run_context: SessionRunContext, run_values: SessionRunValues
    ) -> None:
        start = time.perf_counter()
        try:
            self._hook.after_run(run_context, run_values)
        finally:
            self._timings["after_run"].add(time.perf_counter() - start)

    def end(self, session: Any) -> None:
        start = time.perf_counter()
        try:
            self._hook.end(session)
        finally:
            self._timings["end"].add(time.perf_counter() - start)


class HookTimingHook(SessionRunHook):
    """Measures the wall time other hooks spend in each method and reports it.

    Wrap the hooks to measure with `time()` (or build everything with
    `wrap()`) and put this hook after them. It logs a table (to TensorFlow's
    logger, at INFO) every `every_n_steps` calls of
    `run()`, and at the end.

    The time a hook's fetches add to the step itself (its share of the merged
    `Session.run` in graph mode, reading its fetches back in eager mode) is
    spent outside the hook's methods and is not counted. A hook that does
    not override `before_run` or `after_run` is not called for it, with or
    without the proxy, so that method shows no calls.

    Args:
      every_n_steps: Also log the table every N `run()` calls; `None` logs
        only at the end.

    Raises:
      ValueError: If `every_n_steps` is not positive.
      TypeError: If `every_n_steps` is not `None` or an int.
    """

    def __init__(self, every_n_steps: int | None = None) -> None:
        if every_n_steps is not None:
            monsession.plugins.check_interval(_HOOK, "every_n_steps", every_n_steps, "steps")
        self._every_n_steps = every_n_steps
        self._timings: dict[str, dict[str, MethodTiming]] = {}
        self._runs = 0

    @classmethod
    def wrap(
        cls, hooks: Iterable[SessionRunHook] | None, every_n_steps: int | None = None
    ) -> list[SessionRunHook]:
        """Returns `hooks` as timed proxies, followed by a new `HookTimingHook`.

        Args:
          hooks: The hooks to measure, in the order the session should call them.
          every_n_steps: Passed to the new `HookTimingHook`.

        Returns:
          A list to pass as `hooks=`: one timed proxy per hook, then the reporter
          (reach it as the last item to read its `timings()`).
        """
        reporter = cls(every_n_steps=every_n_steps)
        return [*(reporter.time(hook) for hook in hooks or ()), reporter]

    def time(self, hook: SessionRunHook) -> SessionRunHook:
        """Returns a proxy of `hook` whose calls are timed into this hook's table.

        The proxy forwards every call and every other attribute to `hook`.

        Raises:
          TypeError: If `hook` lacks a `SessionRunHook` method.
        """
        missing = [name for name in METHODS if not callable(getattr(hook, name, None))]
        if missing:
            raise TypeError(f"{_HOOK}.time() takes a SessionRunHook; {hook!r} lacks {missing}.")
        label = type(hook).__name__
        if label in self._timings:
            count = sum(1 for key in self._timings if key.split("#")[0] == label)
            label = f"{label}#{count + 1}"
        self._timings[label] = {name: MethodTiming() for name in METHODS}
        return _TimedHook(hook, self._timings[label], label)

    def timings(self) -> dict[str, dict[str, MethodTiming]]:
        """The table so far: hook label -> method name -> `MethodTiming`.

        Labels are class names, with ``#2``, ``#3``... for repeated classes.
        """
        return self._timings

    def report(self) -> str:
        """The table as text, slowest hook first."""
        totals = {
            label: sum(t.total_secs for t in methods.values())
            for label, methods in self._timings.items()
        }
        grand_total = sum(totals.values()) or 1.0
        header = (
            f"{'hook':<28} {'method':<21} {'calls':>8} {'total s':>10} "
            f"{'mean ms':>9} {'max ms':>9} {'share':>6}"
        )
        lines = [f"Hook timing after {self._runs} steps:", header]
        for label in sorted(totals, key=totals.__getitem__, reverse=True):
            for method, timing in self._timings[label].items():
                if not timing.calls:
                    continue
                lines.append(
                    f"{label:<28} {method:<21} {timing.calls:>8} {timing.total_secs:>10.4f} "
                    f"{timing.mean_secs * 1e3:>9.4f} {timing.max_secs * 1e3:>9.4f} "
                    f"{timing.total_secs / grand_total:>6.1%}"
                )
        return "\n".join(lines)

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        self._runs += 1
        if self._every_n_steps and self._runs % self._every_n_steps == 0:
            tf_logging.info("%s", self.report())

    def end(self, session: Any) -> None:
        tf_logging.info("%s", self.report())
