"""monsession.tf_logging: hook output through TensorFlow's logging functions."""

from __future__ import annotations

import logging
import subprocess
import sys
from unittest import mock

import pytest
from tensorflow.python.platform import tf_logging as tensorflow_logging

import monsession
from monsession import tf_logging


def test_importing_it_does_not_import_tensorflow():
    code = (
        "import sys\n"
        "from monsession import tf_logging\n"
        "assert tf_logging.WARN == 30 and 'info' in dir(tf_logging)\n"
        "assert 'tensorflow' not in sys.modules, 'imported TensorFlow'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_it_is_reachable_from_monsession():
    assert monsession.tf_logging is tf_logging


@pytest.mark.parametrize("name", ["debug", "info", "warning", "error"])
def test_a_patch_applied_after_import_is_seen(name):
    with mock.patch.object(tensorflow_logging, name) as patched:
        getattr(tf_logging, name)("%s: %g", "global_step/sec", 2.5)
    patched.assert_called_once_with("%s: %g", "global_step/sec", 2.5)


def test_records_go_to_the_tensorflow_logger_with_the_callers_line(caplog):
    caplog.set_level(logging.INFO, logger="tensorflow")
    tf_logging.info("from %s", "here")
    (record,) = [r for r in caplog.records if r.getMessage() == "from here"]
    assert record.name == "tensorflow"
    assert (record.pathname, record.funcName) == (
        __file__,
        "test_records_go_to_the_tensorflow_logger_with_the_callers_line",
    )


def test_log_first_n_logs_the_first_n_times(caplog):
    caplog.set_level(logging.WARNING, logger="tensorflow")
    for i in range(4):
        tf_logging.log_first_n(tf_logging.WARN, "call %d", 2, i)
    lines = [r.getMessage() for r in caplog.records if r.name == "tensorflow"]
    assert lines == ["call 0", "call 1"]


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="has no attribute 'set_verbosity'"):
        tf_logging.set_verbosity  # noqa: B018


_SETUP_ORDER_SCRIPT = """
import logging
import sys

order = sys.argv[1]
if order == "before":
    logging.basicConfig(format="root: %(name)s: %(message)s")
import tensorflow as tf

import monsession
from monsession import tf_logging

tf.get_logger()  # TensorFlow decides here whether its logger gets a handler of its own.
if order == "after":
    logging.basicConfig(format="root: %(name)s: %(message)s")
if order == "late":  # Only after a first session (e.g. a library adds a root handler).
    with monsession.MonitoredSession(hooks=[monsession.StopAtStepHook(num_steps=1)]):
        pass
    logging.basicConfig(format="root: %(name)s: %(message)s")
tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)
with monsession.MonitoredSession(hooks=[monsession.StopAtStepHook(num_steps=1)]) as session:
    tf.compat.v1.logging.info("a line of TensorFlow's own")
    tf_logging.info("a line of a %s", "hook")
"""


@pytest.mark.parametrize("order", ["before", "after", "late", "never"])
def test_a_log_line_is_printed_once_whenever_logging_is_configured(tmp_path, order):
    """`logging.basicConfig()` before or after importing TensorFlow, or after a first session:
    one line per record."""
    script = tmp_path / "program.py"
    script.write_text(_SETUP_ORDER_SCRIPT, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, str(script), order],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    for message in ("a line of TensorFlow's own", "a line of a hook"):
        lines = [line for line in result.stderr.splitlines() if line.endswith(message)]
        prefix = "INFO:tensorflow:" if order == "never" else "root: tensorflow: "
        assert lines == [prefix + message], result.stderr


def test_handlers_a_program_added_to_tensorflows_logger_stay(caplog):
    import tensorflow as tf

    mine = logging.StreamHandler(sys.stderr)
    mine.setFormatter(logging.Formatter(logging.BASIC_FORMAT))  # Like TensorFlow's, but a subclass.
    mine.__class__ = type("MyHandler", (logging.StreamHandler,), {})
    tf.get_logger().addHandler(mine)
    try:
        caplog.set_level(logging.INFO)  # The root logger has a handler.
        tf_logging.info("kept")
        assert mine in tf.get_logger().handlers
    finally:
        tf.get_logger().removeHandler(mine)


_LATER_HANDLER_SCRIPT = """
import logging

import tensorflow as tf

import monsession
from monsession import tf_logging

logger = tf.get_logger()  # No root handler yet: TensorFlow adds its own.
logging.basicConfig(format="root: %(name)s: %(message)s")
hooks = [monsession.StopAtStepHook(num_steps=1)]
with monsession.MonitoredSession(hooks=hooks) as session:
    pass
assert logger.handlers == [], logger.handlers  # The first session removed TensorFlow's.
mine = logging.StreamHandler()  # Set up afterwards, exactly like TensorFlow's handler.
mine.setFormatter(logging.Formatter(logging.BASIC_FORMAT))
logger.addHandler(mine)
with monsession.MonitoredSession(hooks=[monsession.StopAtStepHook(num_steps=1)]) as session:
    tf_logging.warning("a line of a %s", "hook")
assert logger.handlers == [mine], logger.handlers
print("kept")
"""


def test_logging_is_configured_once_per_process(tmp_path):
    """A handler the program adds after the first session survives later sessions and lines."""
    script = tmp_path / "program.py"
    script.write_text(_LATER_HANDLER_SCRIPT, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["kept"]
    lines = [line for line in result.stderr.splitlines() if line.endswith("a line of a hook")]
    # The logger's own handler first, then the root's.
    assert lines == ["WARNING:tensorflow:a line of a hook", "root: tensorflow: a line of a hook"]
