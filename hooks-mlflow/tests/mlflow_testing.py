"""What the MLflow family's tests share: a real SQLite store, a checkpoint saver, a program.

Only core and this family are installed here, so checkpoints are written by
`Saver`, a small test hook on monsession's public API (hook state first,
then the checkpoint, as `CheckpointSaverHook` does).
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import tensorflow as tf

import monsession

HERE = pathlib.Path(__file__).parent
_TEMPLATE: list[pathlib.Path] = []


def new_store(directory: os.PathLike[str] | str) -> str:
    """The URI of a fresh SQLite tracking store in `directory`.

    MLflow creates its tables with a few dozen migrations (seconds); the
    first store is made once per test process and copied.
    """
    if not _TEMPLATE:
        template = pathlib.Path(tempfile.mkdtemp(prefix="mlflow-template-")) / "mlflow.db"
        client = client_for(f"sqlite:///{template}")
        client.search_experiments()  # Creates and migrates the database.
        _TEMPLATE.append(template)
    path = pathlib.Path(directory) / "mlflow.db"
    shutil.copyfile(_TEMPLATE[0], path)
    return f"sqlite:///{path}"


def client_for(uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def history(uri: str, run_id: str, key: str) -> list[tuple[int, float]]:
    """A metric's (step, value) pairs in the order MLflow returns them, sorted by step."""
    points = client_for(uri).get_metric_history(run_id, key)
    return sorted((point.step, point.value) for point in points)


def runs(uri: str) -> list:
    """Every run of every experiment of the store."""
    client = client_for(uri)
    experiment_ids = [experiment.experiment_id for experiment in client.search_experiments()]
    return client.search_runs(experiment_ids)


class Program:
    """An eager step that returns ``{"loss": w + offset}`` and increments the global step.

    `offset` is a Python number read at each call (`set_offset`), so a test
    can tell which process or session logged a step.
    """

    def __init__(self, reset: bool = True) -> None:
        if reset:
            tf.compat.v1.reset_default_graph()  # A fresh global step.
        self.global_step = monsession.get_or_create_global_step()
        self.w = tf.Variable(0.0)
        self.offset = tf.Variable(0.0, trainable=False)
        self.checkpoint = tf.train.Checkpoint(w=self.w, global_step=self.global_step)

        @tf.function
        def step():
            self.w.assign_add(1.0)
            self.global_step.assign_add(1)
            return {"loss": self.w + self.offset, "w": self.w}

        self.step = step

    def set_offset(self, offset: float) -> None:
        self.offset.assign(offset)


class Saver(monsession.SessionRunHook):
    """Saves the hooks' state and `checkpoint` every `every` global steps (synchronously)."""

    def __init__(self, checkpoint: tf.train.Checkpoint, directory: str, every: int) -> None:
        self._manager = tf.train.CheckpointManager(checkpoint, directory, max_to_keep=None)
        self._every = every
        self.saved: list[int] = []
        self._hook_state: monsession.plugins.HookStateWriter | None = None

    def use_hook_state(self, hook_state: monsession.plugins.HookStateWriter) -> None:
        self._hook_state = hook_state

    def next_action(self, global_step):
        return monsession.NextAction(steps=self._every - global_step % self._every)

    def after_run(self, run_context, run_values):
        run_context = monsession.plugins.as_run_context(run_context)
        step = run_context.global_step_after(lambda step: step % self._every == 0)
        if step is not None:
            prefix = os.path.join(self._manager.directory, f"ckpt-{step}")
            assert self._hook_state is not None
            self._hook_state.save(prefix)
            self._manager.save(checkpoint_number=step)
            self.saved.append(step)


def run_child(*args: str, expect: int = 0, env: dict[str, str] | None = None) -> str:
    """Runs ``python tests/mlflow_child.py ARGS``; checks its exit status; returns its stderr."""
    full_env = {**os.environ, **(env or {})}
    result = subprocess.run(
        [sys.executable, str(HERE / "mlflow_child.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=full_env,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert result.returncode == expect, (result.returncode, result.stdout, result.stderr)
    return result.stderr
