"""The graph backend: one `Session.run` per step, prepared once per fetch structure.

The caller's fetches and the hooks' are merged into one structure (keyed
per hook) and run in one call. Each distinct structure without feeds
becomes a prepared step that is reused (see `_CallableStep`).

The step service: when hooks are called per step, the global step is read
once when the session is created (or re-created), the first run fetches
TensorFlow's global-step read tensor (what TensorFlow's own hooks fetch) to
check that runs add one, and from then on each run adds one on the host.
Once a hook asks for the step, every run fetches that read tensor too.
TensorFlow runs that read and the step's increment in no fixed
order, so the value fetched is either the step before the run or after it;
for steps that add one, the expected step after the run is exact either
way (see `_step_after_run`). A hook that first asks after runs that were
counted but not fetched gets the variable read once, and compared. A value
that fits no count (a run that added
nothing, or several) is logged once, and from then on the variable is read
whenever a hook needs the step after a run. While no hook asks (idle hooks),
a run fetches nothing more than TensorFlow would. `global_step_after(reaching)`
reads the variable itself only when the expected value passes `reaching`,
once per run at most, as TensorFlow's hooks do before they act; a session
connected to a server (`master=`), whose step other workers advance too,
reads it after every run in which a hook asks, as TensorFlow's hooks do, so
a between-graph chief acts on TensorFlow's steps. A run that is
not a training step (`forget_step`) fetches no step and is not counted: a hook that
needs the step after it reads the variable, and the next run starts from a
fresh read, so an evaluation that does not add one shifts nothing.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Hashable, Mapping
from typing import Any

import tensorflow as tf

from monsession import _tf_compat
from monsession._backends._step_counter import StepCounter

_CALLER = "caller"
_MAX_CACHED_CALLABLES = 64


class GenericStepRunner:
    """Runs the merged fetches with one `sess.run` call (any session-like)."""

    def __init__(self, sess: tf.compat.v1.Session) -> None:
        self._sess = sess

    def run(
        self,
        fetches: object,
        hook_fetches: dict[Any, Any],
        feed_dict: Mapping[Any, Any] | None,
        options: tf.compat.v1.RunOptions | None,
        run_metadata: tf.compat.v1.RunMetadata | None,
        feed_owners: Mapping[Any, str],
    ) -> tuple[Any, dict[Any, Any]]:
        merged = {_CALLER: fetches, **hook_fetches}
        outputs = self._sess.run(
            merged, feed_dict=feed_dict, options=options, run_metadata=run_metadata
        )
        return outputs[_CALLER], outputs


_leaf_types: set[type] = set()  # Types seen to be plain leaves (not containers, not names).


def _signature(fetches: Any) -> Hashable:
    """A hashable key for a fetch structure; raises TypeError if there is none.

    Containers are keyed by type and content, names by value, and every other
    leaf (tensor, op, variable) by identity: hashing a graph `Tensor` runs
    Python code, `id` does not. The cache entry keeps the structure alive, so
    no other object can take the id of one of its leaves.
    """
    kind = type(fetches)
    if kind in _leaf_types:
        return id(fetches)
    if kind is dict:
        return (dict, *[(key, _signature(value)) for key, value in fetches.items()])
    if kind is list or kind is tuple or (isinstance(fetches, tuple) and hasattr(kind, "_fields")):
        return (kind, *[_signature(item) for item in fetches])
    if isinstance(fetches, (str, bytes)) and kind in (str, bytes):
        return fetches
    if isinstance(fetches, (list, tuple, Mapping)):
        raise TypeError(f"No cache key for a {kind.__name__}.")
    _leaf_types.add(kind)
    return id(fetches)


def _none(values: object) -> None:
    return None


class _NotPlainError(Exception):
    """A fetch structure that `_result_builder` leaves to TensorFlow."""


_HANDLE_OPS = ("GetSessionHandle", "GetSessionHandleV2")


def _result_builder(fetches: Any, index_of: Mapping[Any, int]) -> Callable[[list[Any]], Any]:
    """A function from the fetched values to the structure of `fetches`.

    Handles dicts, lists and tuples of graph tensors and ops, which is what
    hooks fetch; raises `_NotPlainError` for anything else (variables, names,
    sparse tensors, namedtuples...), which TensorFlow's fetch handler builds.
    """
    kind = type(fetches)
    if kind is dict:
        items = [(key, _result_builder(value, index_of)) for key, value in fetches.items()]
        return lambda values: {key: build(values) for key, build in items}
    if kind is list:
        parts = [_result_builder(item, index_of) for item in fetches]
        return lambda values: [build(values) for build in parts]
    if kind is tuple:
        parts = [_result_builder(item, index_of) for item in fetches]
        return lambda values: tuple([build(values) for build in parts])
    if isinstance(fetches, tf.Operation):
        return _none
    if isinstance(fetches, tf.Tensor) and fetches.op.type not in _HANDLE_OPS:
        index = index_of.get(fetches.ref())
        if index is not None:
            return operator.itemgetter(index)
    raise _NotPlainError


class _CallableStep:
    """Runs one merged fetch structure through a `Session` callable.

    `Session._make_callable_from_options` prepares the step once in the C++
    runtime; each call then skips the name lookups that `Session.run` (and
    the callables of `Session.make_callable`) repeat on every step.
    TensorFlow's own fetch handler resolves the structure, so fetches mean
    exactly what they mean to `Session.run`; errors are re-raised through
    `Session._do_call`, which names the failing op as `Session.run` does.
    """

    def __init__(self, sess: tf.compat.v1.Session, fetches: dict[Any, Any]) -> None:
        handler = _tf_compat.fetch_handler(sess.graph, fetches)
        tensors = handler.fetches()
        options = _tf_compat.callable_options()
        options.fetch.extend(tensor.name for tensor in tensors)
        options.target.extend(op.name for op in handler.targets())
        self._callable = _tf_compat.make_callable_from_options(sess, options)
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


def _supports_callables(sess: object) -> bool:
    """Whether `sess` is a TensorFlow session with C++ callables (not a wrapper)."""
    return isinstance(sess, _tf_compat.session_base_class()) and hasattr(
        sess, "_make_callable_from_options"
    )


class GraphStepRunner(GenericStepRunner):
    """Graph mode: prepares each distinct merged fetch structure once.

    Without feeds, the merged fetches of a `tf.compat.v1.Session` become a
    C++ callable (`_CallableStep`), built on the first step with that
    structure and reused; steps with run options and other session-like
    objects use `Session.make_callable`. Steps with feeds use `Session.run`,
    which is what a callable with feeds would do anyway.
    """

    def __init__(self, sess: tf.compat.v1.Session) -> None:
        super().__init__(sess)
        # Signature -> (step, merged fetches). The fetches are kept so that
        # the ids in the signature stay theirs.
        self._callables: dict[Any, tuple[Any, Any]] = {}
        self._use_callables = _supports_callables(sess)

    def run(
        self,
        fetches: object,
        hook_fetches: dict[Any, Any],
        feed_dict: Mapping[Any, Any] | None,
        options: tf.compat.v1.RunOptions | None,
        run_metadata: tf.compat.v1.RunMetadata | None,
        feed_owners: Mapping[Any, str],
    ) -> tuple[Any, dict[Any, Any]]:
        if feed_dict:
            return super().run(fetches, hook_fetches, feed_dict, options, run_metadata, feed_owners)
        with_options = options is not None or run_metadata is not None
        try:
            # The signature of {_CALLER: fetches, **hook_fetches}, without building it.
            key = (
                with_options,
                _signature(fetches),
                *[(hook, _signature(requested)) for hook, requested in hook_fetches.items()],
            )
            entry = self._callables.get(key)
        except TypeError:  # An unhashable fetch: nothing to cache by.
            return super().run(fetches, hook_fetches, feed_dict, options, run_metadata, feed_owners)
        if entry is None:
            if len(self._callables) >= _MAX_CACHED_CALLABLES:
                self._callables.clear()
            merged = {_CALLER: fetches, **hook_fetches}
            entry = (self._prepare(merged, with_options), merged)
            self._callables[key] = entry
        if with_options:
            outputs = entry[0](options=options, run_metadata=run_metadata)
        else:
            outputs = entry[0]()
        return outputs[_CALLER], outputs

    def _prepare(self, merged: dict[Any, Any], with_options: bool) -> Callable[..., dict[Any, Any]]:
        if self._use_callables and not with_options:
            try:
                return _CallableStep(self._sess, merged)
            except tf.errors.OpError:
                pass  # Session.run reports it better, with the op that failed.
        return self._sess.make_callable(merged, accept_options=with_options)


_STEP = object()  # The key of the global-step read among the merged fetches.


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
      follow_step: Whether hooks are called per step: then the global step is
        read now, fetched with the first run, and with every run once a hook
        asks for it.
    """

    def __init__(self, sess: tf.compat.v1.Session, follow_step: bool = False) -> None:
        self._runner = (
            GraphStepRunner(sess)
            if callable(getattr(sess, "make_callable", None))
            else GenericStepRunner(sess)
        )
        self._protos: tuple[tf.compat.v1.RunOptions, tf.compat.v1.RunMetadata] | None = None
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
                "The global step is %d where the runs of this session counted %d: they do "
                "not each add one to the global step (a run that adds nothing, such as an "
                "evaluation, or a step that adds several). Hooks now read it after every run "
                "in which they need it.",
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

    def counts_steps(self) -> bool:
        return self._counter.after is not None and not self._counter.drifted

    def schedules_steps(self) -> bool:
        return False

    def fusable_step(self, fetches: object, feed_dict: object) -> tuple[None, None, None]:
        return None, None, None  # Each Session.run is one step.

    def run_silent(
        self,
        step: object,
        keep: tuple[str, ...],
        max_steps: int,
        at_time: float | None,
        timed: bool = True,
    ) -> tuple[int, Mapping[str, Any]]:
        raise RuntimeError("Graph mode fuses no steps (fusable_step is always None).")

    def empty_run_protos(self) -> tuple[tf.compat.v1.RunOptions, tf.compat.v1.RunMetadata]:
        if self._protos is None:
            self._protos = (tf.compat.v1.RunOptions(), tf.compat.v1.RunMetadata())
        return self._protos

    def new_run_metadata(self) -> tf.compat.v1.RunMetadata:
        return tf.compat.v1.RunMetadata()

    def run(
        self,
        fetches: object,
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
            fetches, hook_fetches, feed_dict, options, run_metadata, feed_owners
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
                "this session do not each add one to the global step (a run that adds "
                "nothing, such as an evaluation, or a step that adds several). Hooks now "
                "read it after every run in which they need it.",
                seen,
                self._counter.before,
            )
        return expected


def _step_after_run(before: int | None, seen: int) -> int | None:
    """The global step after a run that adds one, from the value read during it.

    `before` is the step expected before the run; `seen` what the read
    tensor fetched with the step returned, taken before or after the step's
    increment (TensorFlow does not order them): `before` or `before + 1`,
    and either way the step is now `before + 1`. Anything else means the
    run did not add one: `None`. With nothing expected, TensorFlow's rule:
    `seen + 1`.
    """
    if before is None:
        return seen + 1
    return before + 1 if before <= seen <= before + 1 else None


def global_step_fetch(graph: tf.Graph | None) -> tf.Tensor | tf.Variable | None:
    """What the graph backend fetches to follow the global step, or `None`.

    TensorFlow's shared read tensor when the graph has one or can still get
    one (the monitored session creates it before finalizing the graph);
    otherwise the global step variable itself.
    """
    if graph is None:
        return None
    variable = tf.compat.v1.train.get_global_step(graph)
    if variable is None:
        return None
    if graph.finalized:
        read = _tf_compat.existing_global_step_read_tensor(graph)
        return variable if read is None else read
    return _tf_compat.global_step_read_tensor(graph)
