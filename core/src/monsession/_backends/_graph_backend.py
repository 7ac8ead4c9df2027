"""The graph backend: one prepared `Session.run` per step, and the step service.

The caller's fetches and the hooks' run in one call, prepared once per distinct structure
(`StepRunner`). The step service: the global step is read as the session starts and counted on
the host per training run; the first run, and every run once a hook asks for the step, also
fetch TensorFlow's global-step read tensor to check the count (`_step_after_run`). A value that
fits no count is logged once, and from then on the variable is read whenever a hook needs the
step; so is a shared step (`master=`), as TensorFlow's hooks do. A run that is not a training
step (`forget_step`) is not counted.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Hashable, Mapping
from typing import Any

import tensorflow as tf

from monsession import _tf_compat
from monsession._api._types import Fetches
from monsession._backends._backend import StepCounter

CALLER = "caller"  # The key of the caller's fetches among the merged fetches.
_MAX_CACHED_CALLABLES = 64
_leaf_types: set[type] = set()  # Types seen to be plain leaves (not containers, not names).


def _sequence_key(fetches: list[Any] | tuple[Any, ...]) -> Hashable:
    return (type(fetches), *[_signature(item) for item in fetches])


_KEYS: dict[type, Callable[[Any], Hashable]] = {
    dict: lambda fetches: (dict, *[(key, _signature(value)) for key, value in fetches.items()]),
    list: _sequence_key,
    tuple: _sequence_key,
    str: lambda name: name,
    bytes: lambda name: name,
}


def _signature(fetches: Any) -> Hashable:
    """A hashable key for a fetch structure (else TypeError): containers by content,
    names by value, other leaves by `id` (hashing a graph `Tensor` runs Python code;
    the cache entry keeps the structure, and so its ids, alive)."""
    kind = type(fetches)
    if kind in _leaf_types:
        return id(fetches)
    key = _KEYS.get(kind)
    if key is not None:
        return key(fetches)
    if isinstance(fetches, tuple) and hasattr(kind, "_fields"):  # A namedtuple.
        return _sequence_key(fetches)
    if isinstance(fetches, (list, tuple, Mapping)):
        raise TypeError(f"No cache key for a {kind.__name__}.")
    _leaf_types.add(kind)
    return id(fetches)


class _NotPlainError(Exception):
    """A fetch structure that `_result_builder` leaves to TensorFlow."""


_HANDLE_OPS = ("GetSessionHandle", "GetSessionHandleV2")


def _result_builder(fetches: Any, index_of: Mapping[Any, int]) -> Callable[[list[Any]], Any]:
    """A function from the fetched values to the structure of `fetches`: dicts, lists
    and tuples of tensors and ops (what hooks fetch); `_NotPlainError` for the rest."""
    kind = type(fetches)
    if kind is dict:
        return _dict_builder(fetches, index_of)
    if kind is list or kind is tuple:
        parts = [_result_builder(item, index_of) for item in fetches]
        if kind is list:
            return lambda values: [build(values) for build in parts]
        return lambda values: tuple([build(values) for build in parts])
    if isinstance(fetches, tf.Operation):
        return lambda values: None
    return operator.itemgetter(_index(fetches, index_of))


def _dict_builder(fetches: dict[Any, Any], index_of: Mapping[Any, int]) -> Callable[..., Any]:
    """`_result_builder` of a dict; one call per step for ops and tensors (most steps)."""
    if not all(isinstance(value, (tf.Operation, tf.Tensor)) for value in fetches.values()):
        items = [(key, _result_builder(value, index_of)) for key, value in fetches.items()]
        return lambda values: {key: build(values) for key, build in items}
    template = dict.fromkeys(fetches)  # An op's value: None.
    keys = [key for key, fetch in fetches.items() if isinstance(fetch, tf.Tensor)]
    if not keys:
        return lambda values: template.copy()
    take = operator.itemgetter(*[_index(fetches[key], index_of) for key in keys])
    if len(keys) == 1:
        return lambda values: {**template, keys[0]: take(values)}
    return lambda values: {**template, **dict(zip(keys, take(values), strict=True))}


def _index(fetch: Any, index_of: Mapping[Any, int]) -> int:
    """Where a fetched tensor's value is among the values (`_NotPlainError`: no plain tensor)."""
    if isinstance(fetch, tf.Tensor) and fetch.op.type not in _HANDLE_OPS:
        index = index_of.get(fetch.ref())
        if index is not None:
            return index
    raise _NotPlainError


class _CallableStep:
    """Runs one merged fetch structure through a C++ step prepared once
    (`_tf_compat.prepared_step`), skipping the name lookups of `Session.run`.

    TensorFlow's fetch handler reads the structure, so fetches mean what they
    mean to `Session.run`, and errors are raised as it raises them.
    """

    def __init__(self, sess: tf.compat.v1.Session, fetches: dict[Any, Any]) -> None:
        handler = _tf_compat.fetch_handler(sess.graph, fetches)
        tensors = handler.fetches()
        self._callable = _tf_compat.prepared_step(
            sess, [tensor.name for tensor in tensors], [op.name for op in handler.targets()]
        )
        self._sess = sess
        try:
            index_of = {tensor.ref(): index for index, tensor in enumerate(tensors)}
            self._build = _result_builder(fetches, index_of)
        except _NotPlainError:
            self._build = functools.partial(handler.build_results, sess)

    def __call__(self) -> dict[Any, Any]:
        try:
            values = self._callable()
        except tf.errors.OpError as error:
            _tf_compat.reraise_as_session_run(self._sess, error)
            raise
        return self._build(values)


class StepRunner:
    """Runs the merged fetches of a step with one call of the session.

    Without feeds each distinct structure is prepared once: a C++ step
    (`_CallableStep`) for a `tf.compat.v1.Session`, else (or with run options)
    `Session.make_callable`. Steps with feeds use `Session.run`.
    """

    def __init__(self, sess: tf.compat.v1.Session) -> None:
        self._sess = sess
        # Signature -> (step, merged fetches). The fetches are kept so that
        # the ids in the signature stay theirs.
        self._callables: dict[Any, tuple[Any, Any]] = {}
        self._prepares = callable(getattr(sess, "make_callable", None))
        self._use_callables = _tf_compat.supports_prepared_steps(sess)

    def run(
        self,
        fetches: Fetches,
        hook_fetches: dict[Any, Any],
        feed_dict: Mapping[Any, Any] | None,
        options: tf.compat.v1.RunOptions | None,
        run_metadata: tf.compat.v1.RunMetadata | None,
    ) -> tuple[Any, dict[Any, Any]]:
        """The caller's results and all results (keyed as `hook_fetches`, and `CALLER`)."""
        with_options = options is not None or run_metadata is not None
        step = None
        if self._prepares and not feed_dict:
            # The prepared step of {CALLER: fetches, **hook_fetches}, keyed without building it.
            try:
                parts: list[Hashable] = [with_options, _signature(fetches)]
                for hook, part in hook_fetches.items():  # A loop, not a comprehension's call.
                    parts += (hook, _signature(part))
                key = tuple(parts)
                step = self._callables.get(key)
            except TypeError:  # An unhashable fetch: nothing to cache by.
                key = ()
            if step is None and key:
                if len(self._callables) >= _MAX_CACHED_CALLABLES:
                    self._callables.clear()
                merged = {CALLER: fetches, **hook_fetches}
                step = self._callables[key] = (self._prepare(merged, with_options), merged)
        if step is None:
            merged = {CALLER: fetches, **hook_fetches}
            outputs = self._sess.run(
                merged, feed_dict=feed_dict, options=options, run_metadata=run_metadata
            )
        elif with_options:
            outputs = step[0](options=options, run_metadata=run_metadata)
        else:
            outputs = step[0]()
        return outputs[CALLER], outputs

    def _prepare(self, merged: dict[Any, Any], with_options: bool) -> Callable[..., dict[Any, Any]]:
        if self._use_callables and not with_options:
            try:
                return _CallableStep(self._sess, merged)
            except tf.errors.OpError:
                pass  # Session.run reports it better, with the op that failed.
        return self._sess.make_callable(merged, accept_options=with_options)


_STEP = object()  # The key of the global-step read among the merged fetches.
_NOT_ONE_EACH = (
    "do not each add one to the global step (a run that adds nothing, such as an evaluation, "
    "or a step that adds several). Hooks now read it after every run in which they need it."
)


def _step_reader(sess: tf.compat.v1.Session, tensor: tf.Tensor | tf.Variable) -> Callable[[], Any]:
    """A function that reads `tensor` in `sess`, prepared once when possible."""
    make_callable = getattr(sess, "make_callable", None)
    if callable(make_callable):
        try:
            reader: Callable[[], Any] = make_callable(tensor)
            return reader
        except (TypeError, ValueError):
            pass
    return functools.partial(sess.run, tensor)


class GraphBackend:
    """`Backend` for a `tf.compat.v1.Session` or a session-like object.

    Args:
      sess: The session to run steps in.
      follow_step: Whether hooks are called per step: then the global step is read now, fetched
        with the first run, and with every run once a hook asks for it.
    """

    def __init__(self, sess: tf.compat.v1.Session, follow_step: bool = False) -> None:
        self._runner = StepRunner(sess)
        graph = getattr(sess, "graph", None)
        self._tensor = global_step_fetch(graph)
        self._counter = StepCounter(None if self._tensor is None else self._read)
        self._read_this_run: int | None = None  # The step read after the current run.
        self._ran = False  # Whether the current run is over.
        self._fetch_step = False  # Whether a hook asked for the step: every run fetches it.
        self._check_next = False  # Whether the next counted run fetches it to check the count.
        self._unchecked = False  # Whether runs were counted since the device was last seen.
        self._sess = sess
        # Connected to a server (`master=`): other workers may step too.
        self._shared_step = bool(getattr(sess, "sess_str", ""))
        self._reader: Callable[[], Any] | None = None
        if follow_step and self._tensor is not None:
            self._seed()

    def _seed(self) -> None:
        """Reads the step as the session starts, so that no run needs an extra read."""
        try:
            self._counter.refresh()
        except tf.errors.FailedPreconditionError:
            return  # Not initialized yet (a raw session under test): read when asked.
        self._check_next = True

    def start_run(self) -> None:
        self._counter.start_run(read_if_stale=self._fetch_step)
        self._read_this_run, self._ran = None, False

    def forget_step(self) -> None:
        self._counter.forget_step()

    def _asked(self) -> None:
        """A hook asks for the step: every run fetches it from now on; checks the count first."""
        self._fetch_step = True
        if not self._unchecked:
            return
        self._unchecked = False
        counter = self._counter
        counted = counter.after if self._ran else counter.before
        if counted is None or counter.drifted:
            return  # Unknown: read as asked.
        seen = self._read_after() if self._ran else counter.read_before()
        if seen != counted:
            if self._ran:
                counter.learn_before(seen - 1)
            counter.drift(
                "The global step is %d where the runs of this session counted %d: they "
                + _NOT_ONE_EACH,
                seen,
                counted,
            )

    def global_step_before(self) -> int | None:
        if self._tensor is None:
            return None
        self._asked()
        counter = self._counter
        if counter.before is None:
            if self._ran:  # First asked after the run: one less than now.
                counter.learn_before(self._read_after() - 1)
            else:
                counter.read_before()
        return counter.before

    def global_step_after(self, reaching: Callable[[int], bool] | None = None) -> int | None:
        if self._tensor is None:
            return None
        self._asked()
        if self._read_this_run is None:
            # Other workers step too (`master=`): only a read tells, as
            # TensorFlow's hooks read after every run.
            expected = None if self._shared_step else self._counter.after
            if expected is not None and reaching is not None and not reaching(expected):
                return None
            self._read_after()
        assert self._read_this_run is not None
        if reaching is not None and not reaching(self._read_this_run):
            return None
        return self._read_this_run

    def _read(self) -> int:
        """Reads the global step now (one run of the session)."""
        if self._reader is None:
            self._reader = _step_reader(self._sess, self._tensor)
        return int(self._reader())

    def _read_after(self) -> int:
        if self._read_this_run is None:
            self._read_this_run = self._counter.refresh()
        return self._read_this_run

    def loop_runner(self) -> None:
        return None  # Each Session.run is one step.

    def run(
        self,
        fetches: Fetches,
        hook_fetches: dict[Any, Any],
        feed_dict: Mapping[Any, Any] | None,
        options: tf.compat.v1.RunOptions | None,
        run_metadata: tf.compat.v1.RunMetadata | None,
        feed_owners: Mapping[Any, str],
    ) -> tuple[Any, dict[Any, Any]]:
        counter = self._counter
        counted = not counter.uncounted
        # Once drifted, a fetched value tells nothing: hooks read the variable.
        fetch_step = (self._fetch_step or self._check_next) and counted and not counter.drifted
        if fetch_step:
            hook_fetches[_STEP] = self._tensor
        caller_results, hook_results = self._runner.run(
            fetches, hook_fetches, feed_dict, options, run_metadata
        )
        self._ran = True
        if fetch_step:
            self._check_next = self._unchecked = False
            counter.adopt(self._expected_after(int(hook_results[_STEP])))
        elif counted and counter.drifted:
            counter.adopt(None)
        else:
            counter.end_run(counted_step=True)
            self._unchecked = counted and counter.after is not None
        return caller_results, hook_results

    def _expected_after(self, seen: int) -> int | None:
        """The step expected after this run, or `None` when only a read can tell."""
        if self._counter.drifted:
            return None
        expected = _step_after_run(self._counter.before, seen)
        if expected is None:
            self._counter.drift(
                "The global step was %d during a run expected to start at %d: the runs of "
                "this session " + _NOT_ONE_EACH,
                seen,
                self._counter.before,
            )
        return expected


def _step_after_run(before: int | None, seen: int) -> int | None:
    """The global step after a run that adds one, or `None` if it did not.

    `seen` is read during the run, before or after the increment (TensorFlow
    does not order them), so `before` or `before + 1` both mean `before + 1`.
    With nothing expected (`before` is None), TensorFlow's rule: `seen + 1`.
    """
    if before is None:
        return seen + 1
    return before + 1 if before <= seen <= before + 1 else None


def global_step_fetch(graph: tf.Graph | None) -> tf.Tensor | tf.Variable | None:
    """What the graph backend fetches to follow the global step, or `None`.

    TensorFlow's shared read tensor when the graph has one or can still get one (the monitored
    session creates it before finalizing the graph); otherwise the global step variable itself.
    """
    if graph is None:
        return None
    variable = tf.compat.v1.train.get_global_step(graph)
    if variable is None:
        return None
    if graph.finalized:
        read = _tf_compat.global_step_read_tensor(graph, create=False)
        return variable if read is None else read
    return _tf_compat.global_step_read_tensor(graph)
