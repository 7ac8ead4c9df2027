"""The graph backend: one `Session.run` per step (see `_graph_steps`), and the step service.

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
from collections.abc import Callable, Mapping
from typing import Any

import tensorflow as tf

from monsession import _tf_compat
from monsession._api._types import Fetches
from monsession._backends._graph_steps import StepRunner
from monsession._backends._step_counter import StepCounter

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
        read = _tf_compat.global_step_read_tensor(graph, create=False)
        return variable if read is None else read
    return _tf_compat.global_step_read_tensor(graph)
