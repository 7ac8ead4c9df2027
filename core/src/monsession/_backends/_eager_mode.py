"""Eager mode (TF2 loops): what a session does around its step functions.

Each process restores its own copy of the state (`create_eager_session`). TensorFlow's own hooks
(`tf.compat.v1.train.StopAtStepHook`...) build graph ops and look tensors up by graph name, and
fail at the first eager step with errors naming neither the hook nor the fix: the session
refuses them when it is created, naming monsession's equivalent (`EagerMode.check_hooks`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import ParamSpec

import tensorflow as tf

from monsession._api._types import Fetches, Results, Unchecked
from monsession._backends._backend import ChiefRestore, CreatedSession, Session, WorkerRestore
from monsession._backends._eager import EagerSession, add_to_checkpoint, own_global_step_if_missing
from monsession._backends._eager_backend import EagerBackend
from monsession._durability._checkpoint_files import read_back, report_and_repair, restore_newest
from monsession._fusion._fusion import fusion_for
from monsession._fusion._loop import BoundStep, StepSource
from monsession._fusion._plan import check_steps_per_execution

logger = logging.getLogger("monsession")
_P = ParamSpec("_P")


class EagerMode:
    """`Mode` of TF2 code, run eagerly (steps are usually `tf.function`s)."""

    eager = True

    def build_graph(self, build: Callable[[], None]) -> None:
        """Eager mode has no graph to build."""

    check_steps_per_execution = staticmethod(check_steps_per_execution)
    fusion = staticmethod(fusion_for)

    def keep_graph_finalization(self) -> Callable[[], None]:
        return lambda: None  # No graph to unfinalize.

    def own_global_step(self) -> None:
        own_global_step_if_missing()

    def check_hooks(self, owner: str, hooks: Sequence[Unchecked]) -> None:
        """TensorFlow's own hooks build graph ops: refused, naming monsession's equivalent."""
        for index, hook in enumerate(hooks):
            cls = _tensorflow_hook_class(hook)
            if cls is not None:
                raise TypeError(
                    f"{owner}: hooks[{index}] is tf.compat.v1.train.{cls.__name__} "
                    f"({type(hook).__name__}), TensorFlow's own hook, which works only in graph "
                    "mode; this session runs in eager mode (it was created outside a tf.Graph). "
                    f"Use {_equivalent(cls.__name__)} instead: the same arguments, in both modes."
                )

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

    def make_backend(self, sess: Session, follow_step: bool) -> EagerBackend:
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
        if isinstance(target, (str, tf.Variable, tf.Tensor)) or callable(target):
            return target
        raise TypeError(
            f"{owner}: in eager mode {argument} must be the name of an entry of the mapping "
            "the step returns, a tf.Variable, a tensor or a zero-argument callable; got "
            f"{target!r}."
        )


EAGER = EagerMode()


def create_eager_session(
    saver: tf.train.Checkpoint | tf.train.CheckpointManager | None,
    init_fn: Callable[[EagerSession], None] | None,
    checkpoint_dir: str | None,
    checkpoint_path: str | None = None,
    repair_state_file: bool = False,
) -> CreatedSession:
    """An `EagerSession` with the newest readable checkpoint restored, or `init_fn` run.

    Every worker of an eager job restores the chief's checkpoint, and with it the hooks' state
    saved beside it. `checkpoint_dir` defaults to a `CheckpointManager`'s; `checkpoint_path` is
    restored instead when given; `repair_state_file`: whether to rewrite the directory's state
    file when its latest checkpoint was damaged (the chief, which owns it).

    Raises:
      ValueError: If there is a checkpoint to restore but no `tf.train.Checkpoint`
        to restore it into.
      DamagedCheckpointError: If `checkpoint_dir` holds checkpoint files but none can be read.
    """
    session = EagerSession()
    checkpoint = saver
    if isinstance(saver, tf.train.CheckpointManager):
        checkpoint = saver.checkpoint
        checkpoint_dir = checkpoint_dir or saver.directory
    add_to_checkpoint(checkpoint)

    def restore(prefix: str, whole: bool = True) -> None:
        if not isinstance(checkpoint, tf.train.Checkpoint):
            raise ValueError(
                f"Found checkpoint {prefix!r} to restore, but in eager mode there is nothing to "
                f"restore it into: Scaffold.saver is {saver!r}. Pass the state as "
                "Scaffold(saver=tf.train.Checkpoint(model=..., optimizer=..., step=global_step))."
            )
        # Every existing object must match: a restore re-run after damaged
        # data was found leaves no value of the damaged checkpoint behind.
        status = checkpoint.restore(prefix)
        status.assert_existing_objects_matched()
        if whole:
            try:
                status.assert_consumed()
            except AssertionError:
                # Values for objects not created yet (e.g. an optimizer's
                # slots) are read when they are, too late to fall back.
                read_back(prefix)

    path = checkpoint_path
    if path:
        restore(path, whole=False)
    elif checkpoint_dir:
        choice, _ = restore_newest(checkpoint_dir, restore)
        report_and_repair(choice, repair=repair_state_file)
        path = choice.path
    if not path:
        if init_fn is not None:
            init_fn(session)
        return CreatedSession(session, None)
    logger.info("Restored checkpoint %s.", path)
    return CreatedSession(session, path)


# The module of TensorFlow's own hooks, named through a public class.
_TF_HOOKS_MODULE = tf.compat.v1.train.StopAtStepHook.__module__
_CORE_HOOKS = frozenset({"StopAtStepHook", "FeedFnHook", "FinalOpsHook", "GlobalStepWaiterHook"})


def _tensorflow_hook_class(hook: Unchecked) -> type | None:
    """The TensorFlow hook class `hook` is (or derives from), or `None`."""
    for cls in type(hook).__mro__:
        if cls.__module__ == _TF_HOOKS_MODULE:
            return cls
    return None


def _equivalent(name: str) -> str:
    if name in _CORE_HOOKS:
        return f"monsession.{name}"
    from monsession._plugins._families import KNOWN_HOOK_FAMILIES

    family = KNOWN_HOOK_FAMILIES.get(name)
    where = f" (pip install {family})" if family else ""
    return f"monsession.hooks.{name}{where}"
