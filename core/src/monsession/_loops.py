"""Loops that drive a session: `Epochs` (a `tf.data` dataset looped over in epochs,
resumable at the exact batch) and `basic_train_loop`."""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

import tensorflow as tf

from monsession._api._dispatcher import HookDispatcher
from monsession._api._types import FeedValue, Results, SessionLike, Unchecked, in_eager_mode
from monsession._fusion._loop import FUSED_STEP_ATTRIBUTE, BoundStep, StepSource, fused_target

_OWNER = "Epochs"
_logger = logging.getLogger("monsession")


class LoopSession(SessionLike, Protocol):
    """The part of a monitored session that `Epochs.run` drives (eager mode)."""

    @property
    def dispatcher(self) -> HookDispatcher:
        """Calls the session's hooks: a loop calls their epoch methods through it."""

    @property
    def steps_per_execution(self) -> int | str:
        """1 (single steps), N or `"auto"`: whether the loop builds a fused step."""

    @property
    def recoveries(self) -> int:
        """How many times a preemption error re-created the session."""

    def should_stop(self) -> bool:
        """Whether a hook, a signal or the coordinator asked to stop, or it is closed."""


def _epoch_length(dataset: Unchecked) -> int:
    if not isinstance(dataset, tf.data.Dataset):
        raise TypeError(f"{_OWNER}: dataset must be a tf.data.Dataset, got {dataset!r}.")
    length = int(dataset.cardinality())
    if length < 1:
        kind = "infinite" if length == tf.data.INFINITE_CARDINALITY else "unknown or empty"
        raise ValueError(
            f"{_OWNER}: dataset has an {kind} length ({length}); an epoch needs a finite, "
            "known number of batches. Give one epoch of data (no .repeat()), and if its length "
            "cannot be inferred, state it with dataset.apply("
            "tf.data.experimental.assert_cardinality(n))."
        )
    return length


class Epochs(tf.Module):
    """A dataset looped over in epochs; its position is saved with the checkpoint.

    In the session's checkpoint, the epoch counter and the iterator's state
    (shuffle buffers included) make a restarted run resume mid-epoch at
    exactly the next batch. `epoch` counts an epoch once its last batch is
    pulled, so a loop that finished its epochs trains nothing when run again.

    ```python
    data = ms.Epochs(dataset, num_epochs=3)
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, data=data)
    with ms.MonitoredTrainingSession(
        checkpoint_dir=..., scaffold=ms.Scaffold(saver=checkpoint)
    ) as sess:
        for epoch in data.run(sess, train_step):
            print(f"epoch {epoch} done")  # Only after an epoch that completed.
    ```

    Args:
      dataset: One epoch of batches, a `tf.data.Dataset` of known, finite
        length (else `TypeError`/`ValueError`). A shuffle with
        `reshuffle_each_iteration` reshuffles each epoch, also after a restart.
      num_epochs: How many epochs in all (a resumed run's count), an int
        >= 1, or `None` for no limit.
      name: The module's name.
    """

    def __init__(
        self, dataset: tf.data.Dataset, num_epochs: int | None = None, name: str | None = None
    ) -> None:
        super().__init__(name=name)
        if num_epochs is not None:
            expected = f"{_OWNER}: num_epochs must be an int >= 1 or None, got {num_epochs!r}."
            if not isinstance(num_epochs, int) or isinstance(num_epochs, bool):
                raise TypeError(expected)
            if num_epochs < 1:
                raise ValueError(expected)
        self._length = _epoch_length(dataset)
        self._num_epochs = num_epochs
        with tf.init_scope():
            self.epoch = tf.Variable(0, dtype=tf.int64, trainable=False, name="epoch")
            # One iterator over every epoch; a batch's index restarts at 0 each epoch.
            self.iterator = iter(dataset.enumerate().repeat())

    @property
    def batches_per_epoch(self) -> int:
        """The number of batches in one epoch."""
        return self._length

    def run(self, session: LoopSession, step: Callable[..., Any]) -> Iterator[int]:
        """Runs `step` on each batch with the session's hooks; yields each completed epoch.

        A tuple batch passes as the step's positional arguments, any other as
        its one argument. Hooks' `epoch_begin`/`epoch_end` are called at the
        boundaries; an `epoch_end` that returns True ends the loop after that
        epoch. The loop also ends when the session should stop (an incomplete
        epoch is not yielded) or after `num_epochs`.

        With `steps_per_execution` other than 1 and a `tf.function` step (or
        a wrapper naming one in `monsession_fused_step`), the steps before the
        next one at which a hook acts run in one `tf.function` that pulls
        their batches itself; boundaries, hooks' steps and batches are those
        of single steps. Any other step runs once per batch.

        After a preemption error the session restores the latest checkpoint,
        this position included, and the loop goes on there; each epoch
        begins, ends and is yielded once per `run`.

        Yields:
          The number of each completed epoch (0 for the first).

        Raises:
          RuntimeError: In graph mode (TF1 loops feed their batches to `run()`).
        """
        if not in_eager_mode(session):
            raise RuntimeError(
                f"{_OWNER}.run() runs a TF2 step function (eager mode); in graph mode feed "
                "the batches to MonitoredSession.run(fetches, feed_dict)."
            )
        hooks = session.dispatcher
        progress = _Progress(self.epoch, session)
        while self._num_epochs is None or progress.epoch < self._num_epochs:
            if session.should_stop():
                return
            if not progress.recovered():
                self._step(session, step, hooks, progress)
            for epoch in progress.completed():
                stop = hooks.epoch_end(epoch)
                yield epoch
                if stop:
                    return

    def _step(
        self,
        session: LoopSession,
        step: Callable[..., Any],
        hooks: HookDispatcher,
        progress: _Progress,
    ) -> None:
        """Runs `step` on the next batch with the hooks (after silent steps, when fused)."""
        if progress.next_index == 0:
            progress.begin(hooks)  # Before the epoch's first step, a silent one too.
        pulled = _EpochStep(self, step, hooks, progress, session.steps_per_execution != 1)
        session.run(pulled)
        if not progress.recovered() and pulled.ended is not None:
            progress.epoch = pulled.ended + 1

    def _pull(self, hooks: HookDispatcher, progress: _Progress) -> tuple[FeedValue, int | None]:
        """Takes the next batch on the host: the batch, and the epoch it ends (or `None`)."""
        position, batch = next(self.iterator)
        index = int(position)  # One host read: where the epochs end.
        if index == 0 and progress.next_index != 0:
            progress.begin(hooks)
        return batch, self._count(index, progress)

    def _count(self, index: int, progress: _Progress) -> int | None:
        """Moves `progress` past the batch at `index`; counts and returns the epoch it ends."""
        last = index == self._length - 1
        progress.next_index = 0 if last else index + 1
        if not last:
            return None
        self.epoch.assign_add(1)
        return progress.epoch

    def _fused(
        self, step: Callable[..., Results]
    ) -> tf.types.experimental.PolymorphicFunction | None:
        """`step` (or the `tf.function` its wrapper names) on the next batch pulled inside."""
        target = fused_target(step)
        if not isinstance(target, tf.types.experimental.PolymorphicFunction):
            return None
        fused = _FUSED.setdefault(self, weakref.WeakKeyDictionary())
        if target not in fused:
            iterator = self.iterator

            @tf.function(autograph=False)
            def pulled_step() -> Results:
                _, batch = next(iterator)
                return target(*_arguments(batch))

            fused[target] = pulled_step
        return fused[target]


# Each Epochs' fused steps, by step function: traced once per step.
_FUSED: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()

_NO_KEYWORDS: dict[str, Any] = {}  # Never changed.


def _arguments(batch: FeedValue) -> tuple[FeedValue, ...]:
    """A tuple batch passes as the step's positional arguments, any other as its one."""
    return batch if isinstance(batch, tuple) else (batch,)


class _EpochStep(StepSource):
    """One call of an `Epochs` loop: silent steps inside the epoch, then one with the hooks.

    Silent steps take an epoch's last batch only when no hook acts at its end
    (`ends_silently`). When fusing, the hooked step pulls its batch inside
    the `tf.function` if the host knows the batch's index, else on the host.
    """

    def __init__(
        self,
        epochs: Epochs,
        step: Callable[..., Any],
        hooks: HookDispatcher,
        progress: _Progress,
        fuses: bool,
    ) -> None:
        self._epochs = epochs
        self._step = step
        self._hooks = hooks
        self._progress = progress
        self._fused_step = epochs._fused(step) if fuses else None
        self.fused = self._fused_step
        # A hooked step runs the wrapper as written: it pulls its batch on the host.
        self._pulls_inside = self.fused is not None and not hasattr(step, FUSED_STEP_ATTRIBUTE)
        known = progress.next_index
        self.silent_limit = 0 if known is None else epochs.batches_per_epoch - 1 - known
        # The epoch's last batch goes to the hooks only if one acts at its end.
        self.ends_silently = known is not None and not hooks.has_epoch_end_work()
        self.ended: int | None = None  # The epoch whose last batch this step took.

    def bind(self, silent: int) -> BoundStep | None:
        progress = self._progress
        if silent:
            assert progress.next_index is not None
            progress.next_index += silent
            if progress.next_index == self._epochs.batches_per_epoch:
                # The silent steps took the epoch's last batch: no step with the hooks.
                self.ended = self._epochs._count(progress.next_index - 1, progress)
                return None
        if self._pulls_inside and progress.next_index is not None:
            # The host knows which batch comes: the fused step pulls it itself.
            self.ended = self._epochs._count(progress.next_index, progress)
            assert self._fused_step is not None  # `_pulls_inside` says so.
            return BoundStep(self._fused_step, (), _NO_KEYWORDS, retry=False)
        batch, self.ended = self._epochs._pull(self._hooks, progress)
        # Not retried after a preemption error: the batch was taken before
        # the restore, which rewinds the iterator (`progress` goes on there).
        return BoundStep(self._step, _arguments(batch), _NO_KEYWORDS, retry=False)


class _Progress:
    """Where one `Epochs.run` is: the next batch's epoch and index, and what was notified.

    `epoch` is the counter as the host knows it: read at the start and after
    a recovery, counted on the host in between (only the loop advances it).
    """

    def __init__(self, counter: tf.Variable, session: LoopSession) -> None:
        self._counter = counter
        self._session = session
        self.epoch = int(counter.numpy())
        # Epochs of earlier runs are not notified again.
        self._begun = self._ended = self.epoch - 1
        self._recoveries = session.recoveries
        self.next_index: int | None = None  # Of the next batch in its epoch, once known.

    def recovered(self) -> bool:
        """Whether the session was re-created since the last look; if so, reads the counter."""
        recoveries = self._session.recoveries
        if recoveries == self._recoveries:
            return False
        self._recoveries = recoveries
        self.epoch = int(self._counter.numpy())  # As the restore left it.
        self.next_index = None
        return True

    def begin(self, hooks: HookDispatcher) -> None:
        """At an epoch's first batch: calls `epoch_begin` unless this run already did."""
        if self.epoch > self._begun:
            self._begun = self.epoch
            hooks.epoch_begin(self.epoch)

    def completed(self) -> range:
        """The epochs to end now: the completed ones this run has not ended."""
        done = range(self._ended + 1, self.epoch)
        self._ended = max(self._ended, self.epoch - 1)
        return done


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

    As `tf.compat.v1.train.basic_train_loop`; an `AbortedError` opens a new
    managed session, logged at WARNING on the `monsession` logger.
    `supervisor` is a `tf.compat.v1.train.Supervisor`, or any object with
    ``managed_session(master)`` and ``should_stop()`` (else `TypeError`).
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
