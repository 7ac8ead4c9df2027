"""Event files on a real disk: unique names per process, and failing writes named.

Each test runs real child processes: two writing into one directory at the
same moment (a barrier file), or one under a real `RLIMIT_FSIZE`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from summary_testing import event_files, file_events

_STEPS = 5

_WRITER = textwrap.dedent(
    """
    import os, sys, time
    import tensorflow as tf
    import monsession
    from monsession_hooks_summary import SummarySaverHook

    mode, logdir, barrier, name = sys.argv[1:5]
    steps = int(sys.argv[5])
    open(os.path.join(barrier, name), "w").close()
    while len(os.listdir(barrier)) < 2:
        time.sleep(0.005)
    if mode == "graph":
        tf.compat.v1.disable_eager_execution()
        step = tf.compat.v1.train.get_or_create_global_step()
        tf.compat.v1.summary.scalar(name, tf.constant(1.0))
        hook = SummarySaverHook(
            save_steps=1, output_dir=logdir, summary_op=tf.compat.v1.summary.merge_all()
        )
        with tf.control_dependencies([step.read_value()]):
            train_op = step.assign_add(1)
        with monsession.MonitoredSession(hooks=[hook]) as session:
            for _ in range(steps):
                session.run(train_op)
    else:
        step = tf.compat.v1.train.get_or_create_global_step()

        def train_step():
            tf.summary.scalar(name, 1.0, step=step + 1)
            step.assign_add(1)

        hook = SummarySaverHook(save_steps=1, output_dir=logdir)
        with monsession.MonitoredSession(hooks=[hook]) as session:
            for _ in range(steps):
                session.run(train_step)
    print(os.getpid())
    """
)


def _env() -> dict[str, str]:
    return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}


@pytest.mark.parametrize("mode", ["graph", "eager"])
def test_two_processes_in_one_directory_write_separate_readable_files(tmp_path, mode):
    logdir, barrier = tmp_path / "logs", tmp_path / "barrier"
    barrier.mkdir()
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, mode, str(logdir), str(barrier), name, str(_STEPS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
        )
        for name in ("first", "second")
    ]
    outputs = [child.communicate(timeout=120) for child in children]
    for child, (_out, err) in zip(children, outputs, strict=True):
        assert child.returncode == 0, err
    pids = [out.strip() for out, _ in outputs]

    files = event_files(logdir)
    assert len(files) == 2
    for name, pid in zip(("first", "second"), pids, strict=True):
        (own,) = [path for path in files if f".{pid}" in os.path.basename(path)]
        steps = [
            int(event.step)
            for event in file_events(own)
            if event.HasField("summary")
            for value in event.summary.value
            if value.tag == name
        ]
        assert steps == list(range(1, _STEPS + 1)), (name, own)


_FILE_TOO_LARGE = textwrap.dedent(
    """
    import glob, os, resource, signal, sys
    import tensorflow as tf
    import monsession
    from monsession_hooks_summary import SummarySaverHook

    logdir = sys.argv[1]
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    tf.compat.v1.disable_eager_execution()
    step = tf.compat.v1.train.get_or_create_global_step()
    tf.compat.v1.summary.scalar("a_rather_long_tag_name_" * 4, tf.constant(1.0))
    hooks = [
        SummarySaverHook(
            save_steps=1, output_dir=logdir, summary_op=tf.compat.v1.summary.merge_all()
        ),
        monsession.StopAtStepHook(last_step=300),
    ]
    with tf.control_dependencies([step.read_value()]):
        train_op = step.assign_add(1)
    with monsession.MonitoredSession(hooks=hooks) as session:
        (event_file,) = glob.glob(os.path.join(logdir, "events.*"))
        limit = os.path.getsize(event_file) + 1000
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        while not session.should_stop():
            session.run(train_op)
    print("ended as if the data ran out")
    """
)


def test_a_file_size_limit_fails_with_an_error_naming_the_directory(tmp_path):
    logdir = tmp_path / "logs"
    child = subprocess.run(
        [sys.executable, "-c", _FILE_TOO_LARGE, str(logdir)],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert child.returncode != 0
    assert "ended as if the data ran out" not in child.stdout
    last_line = child.stderr.strip().splitlines()[-1]
    assert last_line.startswith("monsession_hooks_summary._sinks.SummaryWriteError: "), last_line
    assert f"SummarySaverHook: writing summaries to {logdir} failed" in last_line
    assert "File too large" in last_line


_IN_STEP_FILE_TOO_LARGE = textwrap.dedent(
    """
    import glob, os, resource, signal, sys
    import tensorflow as tf
    import monsession
    from monsession_hooks_summary import SummarySaverHook

    logdir = sys.argv[1]
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    step = tf.compat.v1.train.get_or_create_global_step()

    @tf.function
    def train_step():
        tf.summary.scalar("a_rather_long_tag_name_" * 4, 1.0, step=step + 1)
        step.assign_add(1)

    hooks = [
        SummarySaverHook(save_steps=1, output_dir=logdir),
        monsession.StopAtStepHook(last_step=300),
    ]
    with monsession.MonitoredSession(hooks=hooks) as session:
        (event_file,) = glob.glob(os.path.join(logdir, "events.*"))
        limit = os.path.getsize(event_file) + 1000
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        while not session.should_stop():
            session.run(train_step)
    print("ended as if the data ran out at step", int(step.numpy()))
    """
)


def test_eager_in_step_summary_write_past_a_file_size_limit_is_an_error(tmp_path):
    """The step's own tf.summary write fails with EFBIG (OutOfRangeError in TensorFlow).

    Before, the session took it for the end of the data: exit status 0 after 11 steps.
    """
    logdir = tmp_path / "logs"
    child = subprocess.run(
        [sys.executable, "-c", _IN_STEP_FILE_TOO_LARGE, str(logdir)],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert child.returncode != 0
    assert "ended as if the data ran out" not in child.stdout
    last_line = child.stderr.strip().splitlines()[-1]
    assert last_line.startswith("OSError: [Errno 27] The step failed on a file: "), last_line
    (event_file,) = event_files(logdir)
    assert f"{event_file}; File too large" in last_line
