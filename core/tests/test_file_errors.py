"""A step that fails writing a file is an error, never the end of the data.

TensorFlow reports EFBIG ("File too large") as `OutOfRangeError`, the error
that ends a dataset. Real child processes under a real `RLIMIT_FSIZE`: a step
writing past the limit must fail with the file's path (exit status non-zero),
and a step whose dataset runs out must still end the session cleanly.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

_CHILD = textwrap.dedent(
    """
    import os, resource, signal, sys
    import tensorflow as tf
    import monsession

    mode, path, case = sys.argv[1:4]
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))
    if mode == "graph":
        tf.compat.v1.disable_eager_execution()
        item = tf.compat.v1.data.make_one_shot_iterator(tf.data.Dataset.range(3)).get_next()
        if case == "write":
            with tf.control_dependencies([item]):
                step = tf.io.write_file(path, "x" * 4096)
        else:
            step = item
    else:
        data = iter(tf.data.Dataset.range(3))

        @tf.function
        def step():
            item = data.get_next()  # OutOfRangeError at the end of the data.
            if case == "write":
                tf.io.write_file(path, "x" * 4096)
            return item

    steps = 0
    with monsession.MonitoredSession() as session:
        while not session.should_stop():
            session.run(step)
            steps += 1
    print("ENDED CLEANLY AFTER", steps)
    """
)


def _run(tmp_path, mode, case):
    return subprocess.run(
        [sys.executable, "-c", _CHILD, mode, str(tmp_path / "big.bin"), case],
        capture_output=True,
        text=True,
        # Under RLIMIT_FSIZE a bytecode file written by the child would be cut
        # short in the shared cache (later imports: "marshal data too short").
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONDONTWRITEBYTECODE": "1"},
        timeout=120,
    )


@pytest.mark.parametrize("mode", ["graph", "eager"])
def test_file_too_large_in_a_step_fails_naming_the_file(tmp_path, mode):
    child = _run(tmp_path, mode, "write")
    assert child.returncode != 0
    assert "ENDED CLEANLY" not in child.stdout
    last_line = child.stderr.strip().splitlines()[-1]
    assert last_line.startswith("OSError: [Errno 27] The step failed on a file: "), last_line
    assert str(tmp_path / "big.bin") in last_line
    assert "File too large" in last_line
    assert "not the end of the input data" in last_line


@pytest.mark.parametrize("mode", ["graph", "eager"])
def test_the_end_of_a_dataset_still_ends_cleanly(tmp_path, mode):
    child = _run(tmp_path, mode, "read")
    assert child.returncode == 0, child.stderr
    assert "ENDED CLEANLY AFTER 3" in child.stdout


@pytest.mark.parametrize("mode", ["graph", "eager"])
def test_error_cause_is_the_ops_own_message_in_both_modes(tmp_path, mode):
    """Before, messages built from a graph-mode error's first line said only
    "Graph execution error:"; the cause is the failing op's message."""
    import tensorflow as tf

    import monsession

    missing = str(tmp_path / "missing.txt")
    if mode == "graph":
        with tf.Graph().as_default():
            read = tf.io.read_file(missing)
            with tf.compat.v1.Session() as session, pytest.raises(tf.errors.NotFoundError) as info:
                session.run(read)
        assert str(info.value).splitlines()[0].startswith("Graph execution error")
    else:
        with pytest.raises(tf.errors.NotFoundError) as info:
            tf.io.read_file(missing)
    cause = monsession.plugins.error_cause(info.value)
    assert missing in cause and "No such file or directory" in cause
    assert "\n" not in cause
    assert monsession.plugins.error_cause(ValueError("first\nsecond")) == "first"
    assert monsession.plugins.error_cause(ValueError()) == "ValueError"
