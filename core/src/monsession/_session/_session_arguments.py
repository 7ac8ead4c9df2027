"""Checks of what a monitored session is given, with errors that name the argument."""

from __future__ import annotations

import inspect
from collections.abc import Callable

from monsession._api._step_context import StepContext
from monsession._api._types import Results, Unchecked, check_interval


def check_step_fn(step_fn: Callable[[StepContext], Results]) -> None:
    """Checks that `run_step_fn` can call `step_fn(step_context)`."""
    try:
        names = tuple(inspect.signature(step_fn).parameters)
    except (TypeError, ValueError) as error:
        raise ValueError(f"`step_fn` must be a function; got {step_fn!r}.") from error
    if names not in (("step_context",), ("self", "step_context")):
        raise ValueError(
            "`step_fn` may either have one `step_context` argument, or `self` and "
            f"`step_context` arguments if it's an instance method. Got {names} instead."
        )


def check_session_arguments(
    owner: str, session_creator: Unchecked, stop_grace_period_secs: Unchecked
) -> None:
    """Checks the session creator and grace period a monitored session is given.

    Raises:
      TypeError: If `session_creator` has no `create_session` method (a class
        instead of an instance included), or `stop_grace_period_secs` is not
        a number.
      ValueError: If `stop_grace_period_secs` is negative or NaN.
    """
    if session_creator is not None and (
        isinstance(session_creator, type)
        or not callable(getattr(session_creator, "create_session", None))
    ):
        what = (
            f"the class {session_creator.__name__}, not an instance"
            if isinstance(session_creator, type)
            else f"{session_creator!r} of type {type(session_creator).__name__}"
        )
        raise TypeError(
            f"{owner}: session_creator must be a SessionCreator instance (e.g. "
            f"ChiefSessionCreator(...)) or None, got {what}."
        )
    check_interval(owner, "stop_grace_period_secs", stop_grace_period_secs, "secs", allow_zero=True)
