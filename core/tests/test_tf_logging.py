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
