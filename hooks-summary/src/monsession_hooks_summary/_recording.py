"""Eager mode: the step's own `tf.summary` calls, recorded only on trigger steps.

While a `Recording` is open, the thread's default summary writer is the
hook's writer (with the global step as the default `step`), and
`tf.summary.record_if` is driven by a boolean `tf.Variable` that the hook
switches before each step. A `tf.function` reads that variable when it runs,
so switching never retraces it.

A `tf.function` captures the default writer and the recording condition when
it is *traced*, and TensorFlow does not retrace it when they change. So the
switch is one variable per thread, shared by every `SummarySaverHook`: a step
function traced during one session still obeys the hook of the next. Its
writer stays the one it was traced with: the hook warns at a session's first
step when that writer writes to another directory.

A session that exits with an error does not call the hooks' `end()` (as in
TensorFlow), which would leave its recording open. The next recording opened
in the thread closes such stale ones first: those whose session is closed.
Recordings open once the session exists (`after_create_session`), so a
session that fails to be created leaves nothing open.

Other code switches the default writer too, with contexts that nest:
Keras's `TensorBoard` callback (run by `KerasCallbacksHook`) enters its
writer's when training begins, over ours, and leaves it when training ends,
in a hook that ends after ours (hooks end in list order). A recording that
closes under such a context leaves its own entered (TensorFlow's exit would
restore, under the open context, the writer from before ours, and that
context's exit would then flush `None`); the open context restores ours when
it exits, and the next recording opened in the thread exits it then.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from typing import Any

import tensorflow as tf

import monsession.plugins
from monsession import tf_logging
from monsession_hooks_summary import _tf_compat

_thread_state = threading.local()


def _thread_switch() -> Any:
    """The recording switch of this thread, created on first use.

    A plain local variable even inside a `tf.distribute` strategy's scope:
    only the chief records, and a variable created through
    `MultiWorkerMirroredStrategy` would wait for the other workers to create
    theirs. Its two values are made with it, as tensors, so that setting it
    is one eager op.
    """
    switch = getattr(_thread_state, "switch", None)
    if switch is None:
        with tf.init_scope(), tf.device("CPU:0"):
            switch = _tf_compat.local_variable(False, name="monsession_record_summaries")
            _thread_state.values = (tf.constant(False), tf.constant(True))
        _thread_state.switch = switch
    return switch


def _set_switch(on: bool, force: bool = False) -> None:
    """Sets this thread's recording switch (no op when unchanged, unless `force`)."""
    if force or getattr(_thread_state, "on", None) != on:
        _thread_switch().assign(_thread_state.values[on], read_value=False)
        _thread_state.on = on


# Where the writer each step function was traced with writes, when traced
# at the first step of a session: its summaries go there for good.
_traced_under: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def _left_open() -> list[tuple[Any, contextlib.ExitStack]]:
    """The entered writer contexts that closed recordings left to exit (with their writers)."""
    if not hasattr(_thread_state, "left_open"):
        _thread_state.left_open = []
    left: list[tuple[Any, contextlib.ExitStack]] = _thread_state.left_open
    return left


def _exit_left_open() -> None:
    """Exits the contexts left open, newest first, while each one's writer is the default again."""
    left = _left_open()
    while left and _tf_compat.default_writer() is left[-1][0]:
        left.pop()[1].close()


def _open_recordings() -> list[Recording]:
    """This thread's open recordings, oldest first; the newest is the active one."""
    if not hasattr(_thread_state, "open"):
        _thread_state.open = []
    recordings: list[Recording] = _thread_state.open
    return recordings


class Recording:
    """Routes and gates the step's `tf.summary` calls while open.

    Several recordings may be open in a thread (two `SummarySaverHook`s in
    one session): the newest is the *active* one, whose writer is the
    default and whose `record` decides; the others wait. Only the active
    recording has TensorFlow's summary state entered, so recordings can be
    closed in any order (hooks end in list order, not in reverse): closing
    the active one restores the state from before it and activates the next
    newest; closing a waiting one only forgets it.

    Args:
      writer: The `tf.summary.SummaryWriter` to make the default.
      step: The default `step` of summaries written without one (the global
        step variable).
      location: Where the writer writes, for warnings.
    """

    def __init__(self, writer: Any, step: Any, location: str = "") -> None:
        self._writer = writer
        self._step = step
        self._location = location
        # The session's first step and its tracing count before it ran.
        self._first_step: tuple[Any, int] | None = None
        self._contexts: contextlib.ExitStack | None = None  # Entered while active.
        self._session: Any = None
        self._open = False
        self.first_in_thread = False  # Set by open(): no recording was opened here before.

    @property
    def is_open(self) -> bool:
        return self._open

    def open(self) -> None:
        """Makes the writer the default and starts with recording off."""
        recordings = _open_recordings()
        for stale in [recording for recording in recordings if recording.is_stale()]:
            stale.close()
        _exit_left_open()
        if recordings:
            tf_logging.warning(
                "SummarySaverHook: another SummarySaverHook already records this thread's "
                "tf.summary calls; in eager mode the newest one decides, and the step's "
                "summaries go to its writer only."
            )
            recordings[-1]._deactivate()
        self._session = None
        self._open = True
        self.first_in_thread = not getattr(_thread_state, "opened", False)
        _thread_state.opened = True
        recordings.append(self)
        self._activate()

    def check_traced_inside(self, fetches: Any) -> None:
        """Before the session's first step: warns if its summaries will not come here.

        A `tf.function` keeps the default summary writer it was traced with,
        and TensorFlow does not retrace it for another: traced before any
        recording of this thread existed, it keeps no `tf.summary` call;
        traced during an earlier session that wrote elsewhere, its summaries
        go there.
        """
        # The step of `MonitoredSession.call`; the step a wrapper names, if any.
        step = monsession.plugins.fused_target(getattr(fetches, "step", fetches))
        tracing_count = getattr(step, "experimental_get_tracing_count", None)
        if not callable(tracing_count):
            return
        traces = tracing_count()
        self._first_step = (weakref.ref(step), traces)
        if traces == 0:
            return
        name = getattr(step, "__name__", step)
        traced_under = _traced_under.get(step)
        if traced_under is not None and traced_under != self._location:
            tf_logging.warning(
                "SummarySaverHook: the step %r was traced during an earlier session, which "
                "wrote summaries to %s: TensorFlow keeps that writer in the trace, so its "
                "tf.summary calls, if any, still write there, not to %s. Create the "
                "tf.function inside this session (or write to the same directory).",
                name,
                traced_under,
                self._location,
            )
        elif traced_under is None and self.first_in_thread:
            tf_logging.warning(
                "SummarySaverHook: the step %r was traced before the session existed, "
                "without a summary writer: its tf.summary calls, if any, record nothing, "
                "and TensorFlow does not retrace it. Call the step for the first time "
                "inside the session (or create a new tf.function there).",
                name,
            )

    def note_first_step(self) -> None:
        """After the session's first step: remembers this writer if the step was traced in it."""
        first, self._first_step = self._first_step, None
        if first is None:
            return
        step = first[0]()
        if step is not None and first[1] == 0 and step.experimental_get_tracing_count() > 0:
            _traced_under[step] = self._location

    def _activate(self) -> None:
        _set_switch(False, force=True)
        contexts = contextlib.ExitStack()
        contexts.enter_context(self._writer.as_default(step=self._step))
        contexts.enter_context(tf.summary.record_if(_thread_switch()))
        self._contexts = contexts

    def _deactivate(self) -> None:
        contexts, self._contexts = self._contexts, None
        if contexts is None:
            return
        try:
            _set_switch(False)
        finally:
            if _tf_compat.default_writer() is self._writer:
                contexts.close()
            else:  # Under a context entered after ours and still open: see the module's doc.
                _left_open().append((self._writer, contexts))

    def attach(self, session: Any) -> None:
        """Remembers the session this recording serves (to spot it stale later)."""
        self._session = session

    def is_stale(self) -> bool:
        """Whether the session it served is closed although it is still open."""
        return self._session is not None and bool(getattr(self._session, "closed", False))

    def record(self, on: bool) -> None:
        """Turns recording on or off for the coming step, if this recording is active."""
        if self._contexts is not None:
            _set_switch(on)

    def close(self) -> None:
        """Turns recording off and restores the state from before it was active."""
        if not self._open:
            return
        self._open = False
        recordings = _open_recordings()
        was_active = bool(recordings) and recordings[-1] is self
        if self in recordings:
            recordings.remove(self)
        try:
            self._deactivate()
        finally:
            if was_active and recordings:
                recordings[-1]._activate()
