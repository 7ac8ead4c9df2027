"""Eager mode (TF2 loops): what a session does around its step functions."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ParamSpec

import tensorflow as tf

from monsession._backends._backend import Backend, StepSource
from monsession._backends._eager import BoundStep, EagerSession
from monsession._backends._eager_backend import EagerBackend
from monsession._backends._eager_restore import create_eager_session
from monsession._backends._fetches import resolve_eager_fetch
from monsession._backends._mode import ChiefRestore, CreatedSession, Session
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

    def check_hooks(self, owner: str, hooks: Sequence[object]) -> None:
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

    def create_worker_session(self, wait: Callable[[], Session]) -> CreatedSession:
        """No shared session to wait for: `MonitoredTrainingSession`'s workers restore."""
        return CreatedSession(EagerSession(), None)

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
        self, owner: str, step: Callable[_P, object], /, *args: _P.args, **kwargs: _P.kwargs
    ) -> object:
        return BoundStep(step, args, kwargs)

    def reruns_after_recovery(self, fetches: object) -> bool:
        if isinstance(fetches, StepSource):
            return False
        return not isinstance(fetches, BoundStep) or fetches.retry

    def resolve_fetch(self, owner: str, argument: str, target: object) -> object:
        return resolve_eager_fetch(owner, argument, target)


def _keep() -> None:
    """Eager mode: no graph to unfinalize."""


EAGER = EagerMode()
