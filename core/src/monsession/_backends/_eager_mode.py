"""Eager mode (TF2 loops): what a session does around its step functions."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ParamSpec

import tensorflow as tf

from monsession._api._types import Fetches, Results, Unchecked
from monsession._backends._backend import Backend, StepSource
from monsession._backends._eager import BoundStep, EagerSession
from monsession._backends._eager_backend import EagerBackend
from monsession._backends._eager_restore import create_eager_session
from monsession._backends._fetches import resolve_eager_fetch
from monsession._backends._mode import ChiefRestore, CreatedSession, Session, WorkerRestore
from monsession._backends._owned_step import own_global_step_if_missing
from monsession._backends._tensorflow_hooks import refuse_tensorflow_hooks

_P = ParamSpec("_P")


class EagerMode:
    """`Mode` of TF2 code, run eagerly (steps are usually `tf.function`s)."""

    eager = True
    fuses_steps = True

    def build_graph(self, build: Callable[[], None]) -> None:
        """Eager mode has no graph to build."""

    def keep_graph_finalization(self) -> Callable[[], None]:
        return _keep

    def own_global_step(self) -> None:
        own_global_step_if_missing()

    def check_hooks(self, owner: str, hooks: Sequence[Unchecked]) -> None:
        refuse_tensorflow_hooks(owner, hooks)

    def prepare_graph(self) -> None:
        """Eager mode has no graph to prepare."""

    def create_chief_session(self, restore: ChiefRestore) -> CreatedSession:
        return create_eager_session(
            restore.saver,
            restore.init_fn,
            restore.checkpoint_dir,
            restore.checkpoint_path,
            repair_state_file=True,
        )

    def create_worker_session(self, worker: WorkerRestore) -> CreatedSession:
        """No shared session to wait for: each process holds its own copy of the state."""
        if not worker.restores:
            return CreatedSession(EagerSession(), None)
        created = create_eager_session(worker.saver, worker.init_fn, worker.checkpoint_dir)
        if worker.wait_for_peers is not None:
            worker.wait_for_peers()
        return created

    def multi_worker_strategy(self) -> tf.distribute.Strategy | None:
        """The strategy entered with `strategy.scope()` (or set), if it spans several workers."""
        if not tf.distribute.has_strategy():
            return None
        strategy = tf.distribute.get_strategy()
        resolver = getattr(strategy, "cluster_resolver", None)
        if resolver is None or not getattr(resolver, "task_type", None):
            return None
        jobs = resolver.cluster_spec().as_dict()
        workers = sum(len(jobs.get(job, ())) for job in ("chief", "worker"))
        return strategy if workers > 1 else None

    def make_backend(self, sess: Session, follow_step: bool) -> Backend:
        if not isinstance(sess, EagerSession):
            raise TypeError(
                f"In eager mode a monitored session runs an EagerSession; its session creator "
                f"gave {sess!r} of type {type(sess).__name__}."
            )
        return EagerBackend(sess)

    def start_queue_runners(self, sess: Session, coord: tf.train.Coordinator) -> None:
        """Eager mode has no queue runners."""

    def bind_call(
        self, owner: str, step: Callable[_P, Results], /, *args: _P.args, **kwargs: _P.kwargs
    ) -> object:
        return BoundStep(step, args, kwargs)

    def reruns_after_recovery(self, fetches: Fetches) -> bool:
        if isinstance(fetches, StepSource):
            return False
        return not isinstance(fetches, BoundStep) or fetches.retry

    def resolve_fetch(self, owner: str, argument: str, target: Unchecked) -> Fetches:
        return resolve_eager_fetch(owner, argument, target)


def _keep() -> None:
    """Eager mode: no graph to unfinalize."""


EAGER = EagerMode()
