"""The values that cross core's seams, the session a hook is given, checks, the global step.

Open values (a user's nested fetches, a hook's saved state) are `object`
aliases named for what they hold. The checks' errors name the owner and the
argument. TensorFlow is imported only when a function that needs it is called.
"""

from __future__ import annotations

import math
import numbers
import os
import tempfile
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias

if TYPE_CHECKING:
    import tensorflow as tf

Fetches: TypeAlias = object
"""What a run fetches: a nested structure (lists, tuples, namedtuples, dicts) of tensors,
operations or their names (graph mode), or of the step, callables, variables or tensors (eager)."""

Results: TypeAlias = object
"""What a run gives back for its `Fetches`, in their structure."""

StepFunction: TypeAlias = Callable[..., Results]
"""A step (eager mode): a `tf.function` or another callable, given a run's arguments and feeds."""

FeedKey: TypeAlias = object
"""A key of a run's feeds: a tensor or its name (graph), a keyword (eager)."""

FeedValue: TypeAlias = object
"""A value fed to a run: under a `FeedKey`, or as an argument of the step."""

FeedDict: TypeAlias = Mapping[FeedKey, FeedValue]
"""A run's feeds: tensors (or their names) to values in graph mode, the step's keywords in eager."""

HookState: TypeAlias = object
"""A hook's `state_dict()`: a value that `json.dumps` writes and `json.loads` gives back."""


class HookStateWriter(Protocol):
    """Saves the state of a session's stateful hooks beside a checkpoint.

    After `begin()`, sessions (and `monsession.plugins.HookLifecycle`) hand it
    to each hook that overrides `SessionRunHook.use_hook_state`. A hook that
    writes checkpoints calls ``hook_state.save(prefix)`` just before writing
    checkpoint `prefix`, as `CheckpointSaverHook` does.
    """

    def save(self, checkpoint_prefix: str) -> str | None:
        """Writes ``<checkpoint_prefix>.hooks.json`` (one rename); returns its path.

        `None` when no hook of the session has state; `TypeError` (naming the
        hook) if a hook's `state_dict()` is not plain JSON data.
        """


Unchecked: TypeAlias = object
"""A value as a user or a plugin gave it, before the function that takes it checks it."""


class SessionLike(Protocol):
    """The session a hook is given: a `tf.compat.v1.Session` (or a wrapper), or an eager one.

    Either has `run(fetches, feed_dict=None)` (see `MonitoredSession.run`).
    """

    def run(self, fetches: Any, feed_dict: Any = None) -> Any:
        """Runs `fetches` (feeding `feed_dict`) and returns their values."""


def in_eager_mode(session: SessionLike | None = None) -> bool:
    """Whether a hook works for an eager session: monsession's `tf.executing_eagerly()`.

    Given the session a hook is handed: that session's mode, also where TensorFlow's differs (a
    graph session run outside its ``with graph.as_default():``). Without one (a constructor,
    `begin()`): the mode a session created there gets, also while a `tf.function` of an eager
    program is being traced.
    """
    import tensorflow as tf

    if session is not None:  # Graph sessions hold their graph.
        return getattr(session, "graph", None) is None
    if tf.executing_eagerly():
        return True
    if not tf.inside_function():
        return False
    with tf.init_scope():  # Out of every function being traced: the program's own mode.
        return bool(tf.executing_eagerly())


_UNITS = {"steps": "int number of steps", "secs": "number of seconds"}


def _expected(unit: Literal["steps", "secs"], allow_zero: bool) -> str:
    return f"a {'non-negative' if allow_zero else 'positive'} {_UNITS[unit]}"


def check_interval(
    owner: str,
    name: str,
    value: Unchecked,
    unit: Literal["steps", "secs"],
    *,
    allow_zero: bool = False,
    expected: str | None = None,
) -> None:
    """Checks one interval of a schedule: steps an int (NumPy's too), seconds a real number.

    ``monsession.plugins.check_interval("MyHook", "every_n_steps", n, "steps")``.

    Args:
      owner: Who checks, first in the message (e.g. ``"CheckpointSaverHook"``).
      name: The argument's name.
      value: Its value (not `None`: leave optional ones out).
      unit: ``"steps"`` or ``"secs"``.
      allow_zero: Whether 0 is accepted.
      expected: The message's expectation, instead of e.g. ``"a positive int number of steps"``.

    Raises:
      TypeError: If `value` is not a number of the unit's type.
      ValueError: If `value` is negative, NaN, or 0 without `allow_zero`.
    """
    wanted = expected or _expected(unit, allow_zero)
    kind = numbers.Integral if unit == "steps" else numbers.Real
    if isinstance(value, bool) or not isinstance(value, kind):
        raise TypeError(
            f"{owner}: invalid {name}={value!r} of type {type(value).__name__}; expected {wanted}."
        )
    if math.isnan(value) or value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{owner}: invalid {name}={value!r}; expected {wanted}.")


def check_schedule(
    owner: str,
    steps_name: str,
    steps: Unchecked,
    secs_name: str,
    secs: Unchecked,
    *,
    allow_neither: bool = False,
    allow_zero: bool = False,
) -> None:
    """Checks a "every N steps or every N seconds" pair of arguments.

    Exactly one of the two (at most one with `allow_neither`), passing `check_interval`. A hook
    calls it before building its timer, so that the error names the hook's own arguments:

    ```python
    monsession.plugins.check_schedule("MyHook", "save_steps", save_steps, "save_secs", save_secs)
    self._timer = monsession.SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)
    ```

    Args:
      owner: Who checks, first in the message.
      steps_name: The steps argument's name.
      steps: Its value, or `None`.
      secs_name: The seconds argument's name.
      secs: Its value, or `None`.
      allow_neither: Whether both may be `None`.
      allow_zero: Whether 0 is accepted (as `SecondOrStepTimer` does).

    Raises:
      ValueError: If both are given, or neither without `allow_neither`, or
        the given one is out of range.
      TypeError: If the given one has the wrong type.
    """
    got = f"got {steps_name}={steps!r} and {secs_name}={secs!r}"
    if steps is not None and secs is not None:
        rule = (
            "at most one of {} and {} may be given"
            if allow_neither
            else ("exactly one of {} and {} must be given, not both")
        )
        raise ValueError(f"{owner}: {rule.format(steps_name, secs_name)}; {got}.")
    if steps is None and secs is None:
        if allow_neither:
            return
        raise ValueError(
            f"{owner}: exactly one of {steps_name} and {secs_name} must be given; {got}."
        )
    if steps is not None:
        check_interval(owner, steps_name, steps, "steps", allow_zero=allow_zero)
    else:
        check_interval(owner, secs_name, secs, "secs", allow_zero=allow_zero)


def check_flag(owner: str, name: str, value: Unchecked) -> None:
    """Checks a yes/no argument: a `bool`, NumPy bool, 0 or 1, else `TypeError`.

    A string is refused: ``"False"`` is true.
    ``monsession.plugins.check_flag("MyHook", "at_end", at_end)``.
    """
    kind = type(value)
    if isinstance(value, bool) or (
        kind.__module__ == "numpy" and kind.__name__ in ("bool", "bool_")
    ):
        return
    if isinstance(value, numbers.Integral) and value in (0, 1):
        return
    raise TypeError(
        f"{owner}: {name} must be a bool, got {value!r} of type {type(value).__name__}."
    )


class UnwritableDirectoryError(PermissionError, ValueError):
    """A directory argument this process cannot create or write to.

    Also a `ValueError` (a bad argument value): raised by a family's default
    hook, it reaches the user of `MonitoredTrainingSession` as it is.
    """


def check_directory(owner: str, name: str, path: Unchecked, *, writable: bool = True) -> None:
    """Checks a directory argument before anything is written to it (or read from it).

    Call it in the constructor. Nothing is created: a missing directory passes when its nearest
    existing parent is a writable directory (probed with a temporary file, which also works for
    root). Remote paths (``gs://``, ``s3://``, ...) are not checked.

    Args:
      owner: Who checks, first in the message (e.g. ``"SummarySaverHook"``).
      name: The argument's name (e.g. ``"output_dir"``).
      path: The directory, a `str` or `os.PathLike`.
      writable: Whether this process must be able to write there.

    Raises:
      TypeError: If `path` is not a `str` or `os.PathLike`.
      ValueError: If `path` is empty, is a file or lies under a file.
      PermissionError: With `writable`, if the directory cannot be created or
        written to (an `UnwritableDirectoryError`, also a `ValueError`).
    """
    directory = _directory_path(owner, name, path)
    if "://" in directory:  # Remote (gs://, s3://, ...): not checked.
        return
    existing = os.path.abspath(directory)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    is_target = existing == os.path.abspath(directory)
    if not os.path.isdir(existing):
        where = "is a file" if is_target else f"lies under the file {existing!r}"
        raise ValueError(f"{owner}: {name} {directory!r} {where}; expected a directory.")
    if writable:
        _check_writable(owner, name, directory, existing, is_target)


def _directory_path(owner: str, name: str, path: Unchecked) -> str:
    """`path` as a non-empty `str`, or the `TypeError`/`ValueError` of `check_directory`."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{owner}: {name} must be a directory path, got {path!r}.")
    directory = os.fspath(path)
    if not isinstance(directory, str) or not directory:
        raise ValueError(f"{owner}: {name} must be a directory path, got {path!r}.")
    return directory


def _check_writable(owner: str, name: str, directory: str, existing: str, is_target: bool) -> None:
    """Probes `existing` (the directory or its nearest existing parent) with a temporary file."""
    try:
        with tempfile.TemporaryFile(dir=existing, prefix=".monsession-write-check-"):
            pass
    except OSError as error:
        reason = error.strerror or str(error)
        if is_target:
            problem = f"cannot write to {name} {directory!r}: {reason}"
        else:
            problem = f"cannot create {name} {directory!r}: cannot write to {existing!r}: {reason}"
        raise UnwritableDirectoryError(
            f"{owner}: {problem}. Pass a directory this process can write to."
        ) from error


_NAME = "global_step"  # The variable's name and its collection's key (tf.compat.v1.GraphKeys).


def global_step(sess: SessionLike | None, global_step_tensor: Any) -> int:
    """`tf.compat.v1.train.global_step`; in eager mode read from the variable, not `sess`."""
    if in_eager_mode(sess):
        return int(global_step_tensor.numpy())
    if sess is None:
        raise TypeError(
            "global_step(sess, global_step_tensor): sess is None; in graph mode pass the "
            "session to read the global step through."
        )
    return int(sess.run(global_step_tensor))


def assert_global_step(global_step_tensor: Any) -> None:
    """`tf.compat.v1.train.assert_global_step`: a scalar integer `Variable` or `Tensor`.

    A tensor of unknown shape passes; anything else raises `TypeError`.
    """
    import tensorflow as tf

    if not isinstance(global_step_tensor, (tf.Variable, tf.Tensor)):
        raise TypeError(
            f'Existing "global_step" must be a Variable or Tensor: {global_step_tensor}.'
        )
    dtype = global_step_tensor.dtype.base_dtype
    if not dtype.is_integer:
        raise TypeError(f'Existing "global_step" does not have integer type: {dtype}')
    shape = global_step_tensor.shape
    if shape.ndims != 0 and shape.is_fully_defined():
        raise TypeError(f'Existing "global_step" is not scalar: {shape}')


def get_global_step(graph: tf.Graph | None = None) -> Any:
    """`tf.compat.v1.train.get_global_step`: the global step variable, or `None`.

    The one item of the ``global_step`` collection, else the tensor
    ``global_step:0``; several items log an error and give `None`.
    """
    import tensorflow as tf

    from monsession import _tf_compat

    graph = graph or tf.compat.v1.get_default_graph()
    found = graph.get_collection(_NAME)
    if len(found) > 1:
        _tf_compat.tf_logging().error("Multiple tensors in global_step collection.")
        return None
    if found:
        variable = found[0]
    else:
        try:
            variable = graph.get_tensor_by_name(f"{_NAME}:0")
        except KeyError:
            return None
    assert_global_step(variable)
    return variable


def create_global_step(graph: tf.Graph | None = None) -> tf.Variable:
    """`tf.compat.v1.train.create_global_step`; on the CPU in eager mode.

    Raises:
      ValueError: If `graph` already has a global step.
    """
    import tensorflow as tf

    graph = graph or tf.compat.v1.get_default_graph()
    if get_global_step(graph) is not None:
        raise ValueError('"global_step" already exists.')
    settings = {
        "shape": [],
        "dtype": tf.int64,
        "initializer": tf.compat.v1.zeros_initializer(),
        "trainable": False,
        "aggregation": tf.VariableAggregation.ONLY_FIRST_REPLICA,
        "collections": [tf.compat.v1.GraphKeys.GLOBAL_VARIABLES, _NAME],
    }
    if tf.executing_eagerly():
        with tf.device("cpu:0"):
            return tf.compat.v1.get_variable(_NAME, **settings)
    with graph.as_default(), graph.name_scope(None):
        return tf.compat.v1.get_variable(_NAME, **settings)


def get_or_create_global_step(graph: tf.Graph | None = None) -> tf.Variable:
    """The global step variable, created if needed; the same `int64` variable in both modes."""
    variable = get_global_step(graph)
    return create_global_step(graph) if variable is None else variable


def _missing(user: str) -> RuntimeError:
    return RuntimeError(
        f"Global step should be created to use {user}: call "
        "monsession.get_or_create_global_step() before creating the session."
    )


def require_global_step(user: str) -> tf.Variable:
    """The global step variable, else a `RuntimeError` naming `user`; for `begin()`."""
    variable = get_global_step()
    if variable is None:
        raise _missing(user)
    return variable


def read_global_step(session: SessionLike) -> int:
    """The global step read through a hook's `session`, else `RuntimeError`.

    For `after_create_session()` and `end()`; during a run
    `SessionRunContext.global_step` costs no read.
    """
    from monsession import _tf_compat

    graph = getattr(session, "graph", None)
    fetch = None if graph is None else _tf_compat.global_step_read_tensor(graph, create=False)
    if fetch is None:
        fetch = get_global_step(graph)
    if fetch is None:
        raise _missing("read_global_step")
    return int(session.run(fetch))
