"""The columns of the matrix: one small training program per driver.

Every driver trains the same thing: a weight `w` updated as
`w = 0.9 * w + sum(batch) / 100` (order-dependent, so the final weight shows
which batches were trained) on 40 ids in batches of 4 (10 steps per epoch),
shuffled with a seed and reshuffled every epoch. `Epochs` loops pull the
batches from that dataset; the other loops take batch `s` (from 0) from
`order()`, the same dataset iterated on the host, so a restart resumes the
data too and every driver trains the same batches at the same steps. Each
step writes its batch into row `s` of the `trained` table (saved with the
model): at the end it shows the batch each step trained. The step returns
`loss` (w squared), `w`, `step` (after the step) and `probe` (the loss, NaN
from step `table.NAN_AT` on, for `NanTensorHook`).
"""

from __future__ import annotations

import functools
import glob
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import tensorflow as tf

import monsession
import monsession.testing
from driver_matrix import records, rows, table

NO_DEFAULT_HOOKS = {
    "save_checkpoint_secs": None,
    "save_checkpoint_steps": None,
    "save_summaries_steps": None,
    "save_summaries_secs": None,
    "log_step_count_steps": None,
}


TABLE_ROWS = 4 * 10  # Rows of the `trained` table (and of `order()`): four epochs.


def _dataset() -> Any:
    """One epoch of batches, reshuffled every epoch (the same way after a restart)."""
    ids = tf.data.Dataset.range(4 * 10)
    return ids.shuffle(4 * 10, seed=table.SHUFFLE_SEED, reshuffle_each_iteration=True).batch(4)


@functools.cache
def order() -> np.ndarray:
    """The batch of each step, from the dataset iterated on the host as `Epochs` does."""
    batches = iter(_dataset().enumerate().repeat())
    return np.stack([next(batches)[1].numpy() for _ in range(TABLE_ROWS)])


def _outputs(w: Any, step: Any) -> dict[str, Any]:
    loss = tf.square(w)
    probe = tf.where(step >= table.NAN_AT, tf.constant(float("nan")), loss)
    return {"loss": loss, "w": w, "step": step, "probe": probe}


class _RemoteOutputs(Mapping):
    """A scheduled closure's outputs by name (`ClusterCoordinator.schedule` gives one
    `RemoteValue` for the whole mapping): fetched, waiting for the closure, when a hook
    asks for one."""

    def __init__(self, remote: Any) -> None:
        self._remote = remote

    def __getitem__(self, name: str) -> Any:
        return self._remote.fetch()[name]

    def __iter__(self) -> Any:
        return iter(("loss", "w", "step", "probe"))

    def __len__(self) -> int:
        return 4


def _new_table() -> Any:
    return tf.fill([TABLE_ROWS, 4], tf.constant(-1, tf.int64))


def _write_row(trained: Any, row: Any, ids: Any) -> Any:
    """`trained` with row `row` set to the batch `ids`."""
    row = tf.reshape(tf.cast(row, tf.int64), [1, 1])
    return trained.assign(tf.tensor_scatter_nd_update(trained, row, [tf.cast(ids, tf.int64)]))


def _update(model: Any, global_step: Any, ids: Any) -> dict[str, Any]:
    """One training step, eager mode and fit."""
    w = model.w
    _write_row(model.trained, global_step, ids)
    w.assign(0.9 * w + tf.reduce_sum(tf.cast(ids, tf.float32)) / 100.0)
    model.count.assign_add(1)
    global_step.assign_add(1)
    step = tf.identity(tf.convert_to_tensor(global_step))
    value = tf.identity(tf.convert_to_tensor(w))
    tf.summary.scalar("w", value, step=step)
    return _outputs(value, step)


def _ids_of(global_step: Any) -> Any:
    """The batch of the step that starts at `global_step`, for loops without `Epochs`."""
    return tf.gather(tf.constant(order()), tf.cast(global_step, tf.int64))


def _interrupt(plan: dict[str, Any]) -> tuple[int, str, int | None] | None:
    for how in ("kill", "sigterm", "abort"):
        if plan.get(f"{how}_at"):
            return plan[f"{how}_at"], how, plan.get("kill_pid")
    return None


def _hooks(program: rows.Program, plan: dict[str, Any], last_step: int, **how: Any) -> Any:
    return rows.build_hooks(
        program,
        last_step,
        interrupt=_interrupt(plan),
        earlystop_only=plan.get("earlystop", False),
        periods=plan.get("periods"),
        **how,
    )


def _checkpoint_dir(plan: dict[str, Any], program: rows.Program) -> str:
    """Where the session restores from: the run's own `ckpt`, or the chief's in a cluster."""
    return plan.get("checkpoint_dir") or program.path("ckpt")


def run_graph(
    spec: table.Driver, plan: dict[str, Any], last_step: int, cluster: Any = None
) -> None:
    """Graph mode; in a TF1 cluster `cluster` gives the variables' device function and the
    session's `master`, `is_chief` and `config`, and keeps the writers on the chief."""
    session_args = {} if cluster is None else cluster.session_args
    with tf.Graph().as_default(), tf.compat.v1.device(cluster and cluster.device):
        global_step = tf.compat.v1.train.get_or_create_global_step()
        w = tf.compat.v1.get_variable("weight", initializer=1.0)  # "w": the summary
        count = tf.compat.v1.get_variable("count", initializer=tf.constant(0, tf.int64))
        trained = tf.compat.v1.get_variable("trained", initializer=_new_table())
        before = tf.identity(global_step.read_value())
        ids = _ids_of(before)
        new_w = w.assign(0.9 * w + tf.reduce_sum(tf.cast(ids, tf.float32)) / 100)
        written = _write_row(trained, before, ids)
        # After TensorFlow's shared read of the global step, so that TensorFlow's hooks read
        # the step before the increment on every run (otherwise the order is undefined).
        read = monsession.testing.global_step_read_tensor()
        with tf.control_dependencies([new_w, read, written]):
            step = global_step.assign_add(1)
            counted = count.assign_add(1)
        fetch = _outputs(tf.identity(new_w, name="w_out"), tf.identity(step, name="step_out"))
        summary_op = tf.compat.v1.summary.scalar("w", fetch["w"])
        train_op = tf.group(step, counted)
        state = {"step": global_step, "w": w, "count": count, "trained": trained}
        program = rows.Program(plan["dir"], fetch, state, summary_op)
        hooks, _ = _hooks(
            program, plan, last_step, tf_hooks=plan.get("tf_hooks", False), mode="graph"
        )
        factory = (
            tf.compat.v1.train.MonitoredTrainingSession
            if spec.tf_session
            else monsession.MonitoredTrainingSession
        )
        chief_only = []
        if cluster is not None:
            chief_only, hooks = cluster.place(hooks)
        with factory(
            checkpoint_dir=_checkpoint_dir(plan, program),
            hooks=hooks,
            chief_only_hooks=chief_only,
            **NO_DEFAULT_HOOKS,
            **session_args,
        ) as sess:
            while not sess.should_stop():
                sess.run(train_op)
        # TensorFlow's StepCounterHook never flushes its writer, and the child ends
        # with os._exit: flush the cached writers the hooks wrote through, or the
        # last rate is lost by chance. (Not clear(): a new writer in the next
        # session of the process would start a second event file.)
        for name in ("summary", "steps"):
            if glob.glob(os.path.join(program.path(name), "events.*")):
                tf.compat.v1.summary.FileWriterCache.get(program.path(name)).flush()


def _line_model(fit: bool) -> Any:
    import keras

    class Line(keras.Model):
        def __init__(self) -> None:
            super().__init__()
            self.w = self.add_weight(
                shape=(), initializer="ones", name="w", aggregation="only_first_replica"
            )
            self.count = tf.Variable(
                0,
                dtype=tf.int64,
                trainable=False,
                aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
            )
            self.trained = tf.Variable(
                _new_table(),
                trainable=False,
                aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
            )
            self.built = True

        def call(self, x):
            return x * self.w

        if fit:

            def train_step(self, data):
                # fit's batches are positions only: the batch comes from the step.
                iterations = self.optimizer.iterations
                return _update(self, iterations, _ids_of(iterations))

    return Line()


def run_eager(
    spec: table.Driver,
    plan: dict[str, Any],
    last_step: int,
    strategy: Any = None,
    coordinator: Any = None,
) -> None:
    """Eager mode; under `strategy` if given (the cluster matrix's), else a one-replica
    `MirroredStrategy` for the `mirrored` column. With a `ClusterCoordinator` each step
    schedules its closure and returns its `RemoteValue`s."""
    tf.compat.v1.reset_default_graph()
    if strategy is None and spec.mirrored:
        strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    scope = strategy.scope() if strategy else _Nothing()
    with scope:
        global_step = monsession.get_or_create_global_step()
        model = _line_model(fit=False)
        state: dict[str, Any] = {
            "model": model,
            "step": global_step,
            "count": model.count,
            "trained": model.trained,
        }
        epochs = None
        if spec.epochs:
            epochs = monsession.Epochs(
                _dataset(), num_epochs=last_step // 10 + (last_step % 10 > 0)
            )
            state["data"] = epochs

        def replica_step(ids: Any = None) -> Any:
            ids = _ids_of(global_step) if ids is None else ids
            return _update(model, global_step, ids)

        if coordinator is not None:
            closure = tf.function(replica_step)

            def step() -> Any:
                return _RemoteOutputs(coordinator.schedule(closure))

            step.monsession_fused_step = closure  # type: ignore[attr-defined]

        elif strategy is not None:
            step = tf.function(lambda: strategy.run(replica_step))
        elif spec.epochs:
            step = tf.function(lambda ids: replica_step(ids))
        else:
            step = tf.function(lambda: replica_step())
        scaffold = monsession.Scaffold(saver=tf.train.Checkpoint(**state))
        program = rows.Program(
            plan["dir"],
            {"step": "step", "w": "w", "loss": "loss", "probe": "probe"},
            {
                "step": global_step,
                "w": model.w.value,
                "count": model.count,
                "trained": model.trained,
            },
            scaffold=scaffold,
            model=model,
            fused=spec.fused,
        )
        hooks, wrap = _hooks(program, plan, last_step, keras_callbacks=spec.keras_callbacks)
        if wrap is not None:
            step = wrap(step)
        with monsession.MonitoredTrainingSession(
            checkpoint_dir=_checkpoint_dir(plan, program),
            scaffold=scaffold,
            hooks=hooks,
            steps_per_execution="auto" if spec.fused else 1,
            **NO_DEFAULT_HOOKS,
        ) as sess:
            if epochs is not None:
                for epoch in epochs.run(sess, step):
                    records.record("epoch", epoch=epoch, step=int(global_step.numpy()))
            else:
                while not sess.should_stop():
                    sess.run(step)


def run_fit(spec: table.Driver, plan: dict[str, Any], last_step: int) -> None:
    import keras

    from monsession_hooks_keras import HooksCallback

    tf.compat.v1.reset_default_graph()
    model = _line_model(fit=True)
    model.compile(optimizer=keras.optimizers.SGD())
    checkpoint = tf.train.Checkpoint(
        model=model, optimizer=model.optimizer, count=model.count, trained=model.trained
    )
    latest = tf.train.latest_checkpoint(os.path.join(plan["dir"], "ckpt"))
    if latest:  # HooksCallback restores nothing: the user restores before fit.
        checkpoint.restore(latest)
    program = rows.Program(
        plan["dir"],
        {"step": "step", "w": "w", "loss": "loss", "probe": "probe"},
        {
            "step": model.optimizer.iterations.value,
            "w": model.w.value,
            "count": model.count,
            "trained": model.trained,
        },
        saver=checkpoint,
        model=model,
    )
    hooks, _ = _hooks(program, plan, last_step, mode="fit")
    model.fit(
        tf.data.Dataset.range(4 * 10).batch(4),
        epochs=table.LAST_STEP // 10,
        initial_epoch=int(model.optimizer.iterations.numpy()) // 10,
        callbacks=[HooksCallback(hooks)],
        verbose=0,
    )


class _Nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


RUNNERS = {"graph": run_graph, "eager": run_eager, "fit": run_fit}
