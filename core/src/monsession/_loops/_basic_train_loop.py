"""`basic_train_loop`: `tf.compat.v1.train.basic_train_loop`, for any supervisor-like object."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import tensorflow as tf

_logger = logging.getLogger("monsession")


def _check(supervisor: Any, train_step_fn: Any) -> None:
    for method in ("managed_session", "should_stop"):
        if not callable(getattr(supervisor, method, None)):
            raise TypeError(
                f"basic_train_loop: supervisor must have a {method}() method (as "
                "tf.compat.v1.train.Supervisor has); got "
                f"{type(supervisor).__name__}, which has none."
            )
    if not callable(train_step_fn):
        raise TypeError(
            "basic_train_loop: train_step_fn must be callable as "
            f"train_step_fn(session, *args, **kwargs); got {type(train_step_fn).__name__}."
        )


def basic_train_loop(
    supervisor: Any,
    train_step_fn: Callable[..., Any],
    args: Sequence[Any] | None = None,
    kwargs: Mapping[str, Any] | None = None,
    master: str = "",
) -> None:
    """Calls ``train_step_fn(session, *args, **kwargs)`` until the supervisor says stop.

    As `tf.compat.v1.train.basic_train_loop`: the session comes from
    ``supervisor.managed_session(master)``, the loop ends when
    ``supervisor.should_stop()`` is true, and an `AbortedError` (a
    preemption) leaves the managed session and opens a new one, as often as
    it happens; each such retry is logged at WARNING on the `monsession`
    logger.

    Args:
      supervisor: A `tf.compat.v1.train.Supervisor`, or in eager mode any
        object with the same two methods: ``managed_session(master)``, a
        context manager giving the session, and ``should_stop()``.
      train_step_fn: Runs one step; called as
        ``train_step_fn(session, *args, **kwargs)``.
      args: Positional arguments for `train_step_fn`.
      kwargs: Keyword arguments for `train_step_fn`.
      master: The master the session connects to (``""``: in process).

    Raises:
      TypeError: If `supervisor` lacks one of the two methods, or
        `train_step_fn` is not callable.
    """
    _check(supervisor, train_step_fn)
    positional, keywords = list(args or ()), dict(kwargs or {})
    while True:
        try:
            with supervisor.managed_session(master) as session:
                while not supervisor.should_stop():
                    train_step_fn(session, *positional, **keywords)
            return
        except tf.errors.AbortedError as error:
            _logger.warning("basic_train_loop: %s; opening a new session.", error.message)
