"""Eager mode: how a session calls the steps a run is given, at the least cost per step.

* `Traces` calls a `tf.function` straight through the trace it already has:
  a public call binds and casts its arguments twice, a third of a small step.
  A call with tensors (`sess.call(step, x, y)`) goes through the trace of
  their dtypes and shapes once one served them; a first call (which traces),
  a new signature, or `tf.config.run_functions_eagerly` go through the
  `tf.function`.
* `returning_global_step`: on runs whose hooks read the device anyway, a
  traced step also returns the global step read in the same call, so the
  step service's check copies one more output instead of running an op.
* `advancing`: each step advances a global step the session owns by one on
  the device, in the same call, unless the step did.
* What a run's fetches are (`map_structure`, `is_step_callable`), and the
  errors for what is no step (`graph_fetch_error`, `not_a_step_error`).
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable
from typing import Any, ParamSpec, TypeGuard, TypeVar

import tensorflow as tf

from monsession._api._types import FeedValue, Fetches, Results
from monsession._tf_compat import eager_tensor_base_class, flat_call

_P = ParamSpec("_P")
_R = TypeVar("_R")
_Caller = Callable[..., Any]


_MAX_SIGNATURES = 32  # Traces kept per function for calls with tensors.

_Signature = tuple[tuple[tf.DType, tuple[int, ...]], ...]


class Traces:
    """Calls `tf.function`s straight through the traces they already have.

    A session keeps one; a hook package calling a step of its own on every run (as
    `NanTensorHook.watch` does) keeps one per step. A first call, a new argument signature and
    anything that is not a `tf.function` go through the usual call.
    """

    def __init__(self) -> None:
        # Each function's tracing count when looked up, and its trace (`None`:
        # it takes parameters the call leaves to their defaults).
        self._traces: weakref.WeakKeyDictionary[Any, tuple[int, Any]] = weakref.WeakKeyDictionary()
        # Each function's tracing count, and its traces by the signature of tensor arguments.
        self._by_signature: weakref.WeakKeyDictionary[
            Any, tuple[int, dict[_Signature, Callable[..., Any]]]
        ] = weakref.WeakKeyDictionary()
        # Per function: a count of positional tensors, and whether they fill its parameters.
        self._binds: weakref.WeakKeyDictionary[Any, tuple[int, bool]] = weakref.WeakKeyDictionary()

    def call(self, fn: Callable[..., _R], *tensors: tf.Tensor) -> _R:
        """`fn(*tensors)`; for a `tf.function` called before, through its trace.

        Args:
          fn: Any callable.
          tensors: Nothing, or tensors matching the `input_signature` of a
            `tf.function` exactly.
        """
        if not isinstance(fn, _FUNCTION) or tf.config.functions_run_eagerly():  # Not `_traced`.
            return fn(*tensors)
        traces = fn.experimental_get_tracing_count()
        cached = self._traces.get(fn)
        if cached is None or cached[0] != traces:
            if traces == 0:
                return fn(*tensors)  # The first call traces (and creates variables).
            direct = (
                None
                if not tensors and _has_parameters(fn)
                else flat_call(fn.get_concrete_function(*tensors))
            )
            cached = self._traces[fn] = (traces, direct)
        return fn(*tensors) if cached[1] is None else cached[1](*tensors)

    def call_with(self, fn: Callable[..., _R], args: tuple[FeedValue, ...]) -> _R:
        """`fn(*args)`; for a `tf.function` given eager tensors, through the trace of their
        dtypes and shapes once a call with them ran (see the module docstring)."""
        if not _traced(fn) or not all(isinstance(arg, _EAGER_TENSOR) for arg in args):
            return fn(*args)
        traces = fn.experimental_get_tracing_count()
        by_signature = self._signatures(fn, traces, len(args))
        if by_signature is None:
            return fn(*args)
        signature = tuple((arg.dtype, tuple(arg.shape)) for arg in args)  # type: ignore[attr-defined]
        direct = by_signature.get(signature)
        if direct is not None:
            result: _R = direct(*args)
            return result
        result = fn(*args)  # Traces it for these arguments if it must.
        if fn.experimental_get_tracing_count() == traces and len(by_signature) < _MAX_SIGNATURES:
            by_signature[signature] = flat_call(fn.get_concrete_function(*args))
        return result

    def _signatures(
        self, fn: tf.types.experimental.PolymorphicFunction, traces: int, count: int
    ) -> dict[_Signature, Callable[..., Any]] | None:
        """`fn`'s traces by signature, forgotten when it was traced again since (`traces`).

        `None` when `count` positional tensors do not fill its parameters.
        """
        cached = self._by_signature.get(fn)
        if cached is not None and cached[0] == traces:
            return cached[1]
        known = self._binds.get(fn)
        if known is None or known[0] != count:
            known = self._binds[fn] = (count, _binds_positionally(fn, count))
        if not known[1]:
            return None
        cached = self._by_signature[fn] = (traces, {})
        return cached[1]


_FUNCTION = tf.types.experimental.PolymorphicFunction


def _traced(fn: Callable[..., _R]) -> TypeGuard[tf.types.experimental.PolymorphicFunction]:
    """Whether `fn` is a `tf.function` that runs as one (not eagerly)."""
    return isinstance(fn, _FUNCTION) and not tf.config.functions_run_eagerly()


_EAGER_TENSOR = eager_tensor_base_class()  # Not `type(tf.constant(0))`: may run in a graph.


def _binds_positionally(fn: tf.types.experimental.PolymorphicFunction, count: int) -> bool:
    """Whether `count` positional arguments fill every parameter of `fn`'s Python function
    (a default may be a tensor: an input of the trace the arguments alone cannot bind)."""
    try:
        parameters = list(inspect.signature(fn.python_function).parameters.values())
    except (AttributeError, TypeError, ValueError):
        return False
    named = [p for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if any(p.kind is p.KEYWORD_ONLY or p.default is not p.empty for p in named):
        return False
    varargs = any(p.kind is p.VAR_POSITIONAL for p in parameters)
    return len(named) == count or (varargs and len(named) <= count)


def _has_parameters(fn: tf.types.experimental.PolymorphicFunction) -> bool:
    """Whether the Python function of `fn` names parameters (besides `*args`, `**kwargs`),
    whose defaults, tensors perhaps, `get_concrete_function()` cannot bind."""
    try:
        parameters = inspect.signature(fn.python_function).parameters.values()
    except (AttributeError, TypeError, ValueError):
        return True
    return any(p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters)


_Wrappers = weakref.WeakKeyDictionary[Any, tuple[tf.Variable, Callable[..., Any]]]
_RETURNING: _Wrappers = weakref.WeakKeyDictionary()
_ADVANCING: _Wrappers = weakref.WeakKeyDictionary()


def returning_global_step(step: Any, variable: tf.Variable) -> Callable[..., Any] | None:
    """A `tf.function` returning `(step(*args), variable)` read after the step (cached per
    step); `None` unless `step` is a `tf.function` traced before."""
    if not isinstance(step, _FUNCTION) or step.experimental_get_tracing_count() == 0:
        return None
    cached = _RETURNING.get(step)
    if cached is None or cached[0] is not variable:
        wrapper = tf.function(
            _WithGlobalStep(step, variable), autograph=False, reduce_retracing=True
        )
        cached = _RETURNING[step] = (variable, wrapper)
    return cached[1]


class _WithGlobalStep:
    """What `returning_global_step` traces: the step's call, then a read of the variable.

    An object, not a closure: TensorFlow counts the traces of all the
    `tf.function`s of one code object together (and warns of retracing).
    """

    def __init__(self, step: Any, variable: tf.Variable) -> None:
        self._step = weakref.ref(step)  # Called only while tracing: the cache's key stays weak.
        self._variable = variable
        self.__name__ = getattr(step, "__name__", "step")

    def __call__(self, *args: Any) -> Any:
        # The call uses the variable, so the read is ordered after it.
        return self._step()(*args), self._variable.read_value()  # type: ignore[misc]


def advancing(step: Callable[_P, _R], variable: tf.Variable) -> Callable[_P, _R]:
    """`step` wrapped (once per step) to advance `variable` by one per call unless the step
    did: on the device in the same call for a `tf.function`, with eager ops otherwise."""
    cached = _ADVANCING.get(step)
    if cached is None or cached[0] is not variable:
        cached = _ADVANCING[step] = (variable, _advancing(step, variable))
    return cached[1]


def _advancing(step: Callable[_P, _R], variable: tf.Variable) -> Callable[_P, _R]:
    if isinstance(step, tf.types.experimental.PolymorphicFunction):
        traced = weakref.ref(step)  # Called only while tracing: the cache's key stays weak.

        @tf.function
        def advanced(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            before = variable.read_value()
            outputs = traced()(*args, **kwargs)  # type: ignore[misc]
            _advance_unless_moved(variable, before, outputs)
            return outputs

        wrapper: Callable[_P, _R] = advanced
    else:

        def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            before = variable.read_value()
            outputs = step(*args, **kwargs)
            _advance_eagerly(variable, before)
            return outputs

    return wrapper


def _advance_unless_moved(variable: tf.Variable, before: tf.Tensor, outputs: Results) -> None:
    """Adds one to `variable` after `outputs` are computed, unless it moved from `before`."""
    after_step = [t for t in tf.nest.flatten(outputs) if isinstance(t, tf.Tensor)]
    with tf.control_dependencies(after_step):
        unchanged = tf.equal(variable.read_value(), before)
        variable.assign_add(tf.cast(unchanged, variable.dtype))


@tf.function
def _advance_eagerly(variable: tf.Variable, before: tf.Tensor) -> None:
    _advance_unless_moved(variable, before, ())


def is_step_callable(leaf: Fetches) -> TypeGuard[Callable[..., Results]]:
    return callable(leaf) and not isinstance(leaf, (tf.Variable, tf.Tensor))


def accepted_keywords(fn: _Caller) -> frozenset[str] | None:
    """The keyword names `fn` accepts, or `None` when it takes `**kwargs`."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    usable = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return frozenset(p.name for p in parameters if p.kind in usable)


CONTAINERS = (list, tuple, dict)


def map_structure(fn: _Caller, structure: Fetches | Results) -> Results:
    """`tf.nest.map_structure` over lists, tuples and dicts; other values are leaves.

    Plain ones (what hooks fetch) are mapped here, in `tf.nest`'s key order;
    subclasses (namedtuples, `OrderedDict`...) go to `tf.nest`.
    """
    if type(structure) is dict:
        return {key: map_structure(fn, value) for key, value in structure.items()}
    if type(structure) is list:
        return [map_structure(fn, item) for item in structure]
    if type(structure) is tuple:
        return tuple([map_structure(fn, item) for item in structure])
    if isinstance(structure, CONTAINERS):
        return tf.nest.map_structure(fn, structure)
    return fn(structure)


def describe(fn: _Caller) -> str:
    return getattr(fn, "__name__", None) or type(fn).__name__


def read_fetched(variable: tf.Variable) -> tf.Tensor:
    """Reads `variable`; one of a graph gets the error naming where to create the session."""
    try:
        return variable.read_value()
    except TypeError:
        graph_error = graph_fetch_error(variable)
        if graph_error is not None:
            raise graph_error from None
        raise


def not_a_step_error(leaf: Fetches) -> TypeError:
    """The error for a fetch that is no step, no variable and no tensor."""
    graph_error = graph_fetch_error(leaf)
    if graph_error is not None:
        return graph_error
    return TypeError(
        f"MonitoredSession.run() in eager mode takes a step: a callable (usually a "
        f"tf.function), a tf.Variable, a tensor, or a structure of them. Got "
        f"{leaf!r} of type {type(leaf).__name__}. If it is what a step returned, "
        "pass the step itself: sess.run(train_step), not sess.run(train_step())."
    )


def graph_fetch_error(fetches: Fetches) -> TypeError | None:
    """The error for fetches holding a graph's `tf.Operation` or tensor (an eager session
    cannot run them: the fix is where it is created), else `None`."""
    for leaf in tf.nest.flatten(fetches):
        if isinstance(leaf, tf.Operation):
            kind = "tf.Operation"
        elif isinstance(leaf, tf.Variable) and tf.is_symbolic_tensor(leaf.handle):
            kind = "variable"
        elif isinstance(leaf, tf.Tensor) and tf.is_symbolic_tensor(leaf):
            kind = "tensor"
        else:
            continue
        return TypeError(
            f"MonitoredSession.run() was given the {kind} {leaf.name!r} of a tf.Graph, but "
            "the session was created in eager mode, outside `with graph.as_default():`, so "
            "it runs eager steps and cannot run graph ops. Create the session inside the "
            "graph's block: `with graph.as_default(): with MonitoredSession(...) as sess: "
            "sess.run(train_op)`."
        )
    return None
