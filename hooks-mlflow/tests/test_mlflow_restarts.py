"""Each step once in the run, with the continuing job's values: SIGKILL, recovery, SIGTERM."""

from __future__ import annotations

import signal

import tensorflow as tf
from mlflow_testing import Program, Saver, history, new_store, run_child, runs

import monsession
from monsession_hooks_mlflow import MlflowHook


def test_sigkill_then_restart_continues_the_run_with_each_step_once(tmp_path):
    uri = new_store(tmp_path)
    # Checkpoints at 5, 10, 15; killed after step 17, once what the hook
    # released reached the store: the steps up to 10, released when the
    # checkpoint of 15 was begun (10 is then complete).
    run_child(
        str(tmp_path),
        uri,
        "--offset",
        "1000",
        "--kill-at",
        "17",
        expect=-signal.SIGKILL,
    )
    (killed,) = runs(uri)
    assert killed.info.status == "RUNNING"
    assert [step for step, _ in history(uri, killed.info.run_id, "loss")] == list(range(1, 11))
    # The restart is stopped by SIGTERM after step 25: the run ends KILLED.
    run_child(str(tmp_path), uri, "--offset", "2000", "--signal-at", "25", expect=-signal.SIGTERM)
    (run,) = runs(uri)  # The same run, continued.
    assert run.info.run_id == killed.info.run_id
    assert run.info.status == "KILLED"
    loss = history(uri, run.info.run_id, "loss")
    # The checkpoint of 15 holds steps 6 to 15 (6-10 went when it was begun):
    # the restart sends 11-15 and leaves out 6-10, which the run holds.
    # Up to the checkpoint restored (15): the killed process's values; after
    # it, the restarted one's. Steps 16 and 17, logged by the killed process
    # but not covered by a checkpoint, are there once, from the restart.
    assert loss == [(s, 1000.0 + s) for s in range(1, 16)] + [
        (s, 2000.0 + s) for s in range(16, 26)
    ]
    assert [s for s, _ in history(uri, run.info.run_id, "w")] == list(range(1, 26))
    # The rate from the second logging point on; the timer's state restored.
    rate = history(uri, run.info.run_id, "global_step/sec")
    assert [s for s, _ in rate] == list(range(2, 26))
    assert all(value > 0 for _, value in rate)


class _AbortOnce(monsession.SessionRunHook):
    """Raises `AbortedError` after the run reaching `step`, once; then offsets the loss."""

    def __init__(self, program, step):
        self.program, self.step, self.done = program, step, False

    def next_action(self, global_step):
        return monsession.NextAction(
            steps=max(1, self.step - global_step) if not self.done else None
        )

    def after_run(self, run_context, run_values):
        run_context = monsession.plugins.as_run_context(run_context)
        if not self.done and run_context.global_step_after(lambda s: s == self.step) is not None:
            self.done = True
            self.program.set_offset(500.0)
            raise tf.errors.AbortedError(None, None, "preempted (test)")


def test_recovery_in_process_continues_the_run_with_each_step_once(tmp_path):
    uri = new_store(tmp_path)
    program = Program()
    checkpoints = str(tmp_path / "checkpoints")
    hook = MlflowHook("loss", every_n_steps=2, tracking_uri=uri)
    hooks = [
        hook,
        Saver(program.checkpoint, checkpoints, 4),
        _AbortOnce(program, 11),
        monsession.StopAtStepHook(last_step=16),
    ]
    with monsession.MonitoredTrainingSession(
        checkpoint_dir=checkpoints,
        scaffold=monsession.Scaffold(saver=program.checkpoint),
        save_checkpoint_secs=None,
        save_summaries_steps=None,
        log_step_count_steps=None,
        hooks=hooks,
    ) as sess:
        while not sess.should_stop():
            sess.run(program.step)
    (run,) = runs(uri)
    assert run.info.status == "FINISHED"
    # Logged at 1, 3, 5 ... (the first run triggers, as TensorFlow's timers
    # do). Aborted after step 11, restored from the checkpoint of step 8:
    # 9 and 11 were logged once, by the recovered session (new offset).
    assert history(uri, run.info.run_id, "loss") == [
        (1, 1.0),
        (3, 3.0),
        (5, 5.0),
        (7, 7.0),
        (9, 509.0),
        (11, 511.0),
        (13, 513.0),
        (15, 515.0),
    ]
