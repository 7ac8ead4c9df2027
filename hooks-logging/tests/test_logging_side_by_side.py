"""Our LoggingTensorHook next to `tf.compat.v1.train.LoggingTensorHook`, same graph program.

Each scenario builds the same program twice, runs it once under TensorFlow's
MonitoredSession with TensorFlow's hook and once under ours with our hook,
and compares what was logged: the values handed to a recording formatter
(the same triggering logic) and the default lines (TensorFlow's from the
"tensorflow" logger, where ours log too).
"""

from __future__ import annotations

import logging
import re
import time
from unittest import mock

import numpy as np
import pytest
import tensorflow as tf
from logging_hooks_testing import LOGGER, graph_program, messages

import monsession
from monsession_hooks_logging import LoggingTensorHook

IMPLEMENTATIONS = {
    "tensorflow": (tf.compat.v1.train.MonitoredSession, tf.compat.v1.train.LoggingTensorHook),
    "monsession": (monsession.MonitoredSession, LoggingTensorHook),
}
TF_LOGGER = "tensorflow"
START = 1484695987.209386


def _run(which, caplog, tensors, steps, seconds=None, **hook_kwargs):
    """Runs the program; returns (formatter records, default-format lines)."""
    session_class, hook_class = IMPLEMENTATIONS[which]
    recorded = []

    def recording_formatter(values):
        recorded.append({str(tag): np.asarray(value).tolist() for tag, value in values.items()})
        return "recorded"

    caplog.clear()
    with tf.Graph().as_default(), mock.patch.object(time, "time") as clock:
        clock.return_value = START
        program = graph_program()
        resolved = tensors(program)
        hooks = [
            hook_class(resolved, formatter=recording_formatter, **hook_kwargs),
            hook_class(resolved, **hook_kwargs),
        ]
        with session_class(hooks=hooks) as session:
            for i in range(steps):
                if seconds is not None:
                    clock.return_value = START + seconds[i]
                session.run(program.step)
    logger = TF_LOGGER if which == "tensorflow" else LOGGER
    lines = [line for line in messages(caplog, logger) if line != "recorded"]
    lines = [line for line in lines if not line.startswith(("Graph was", "Running local", "Done"))]
    return recorded, lines


def _loss():
    return tf.compat.v1.get_default_graph().get_tensor_by_name("loss:0")


# name -> (tensors(program), steps, clock per step or None, hook arguments)
SCENARIOS = {
    "every_n_iter": (lambda p: {"loss": _loss()}, 10, None, {"every_n_iter": 3}),
    "names_in_a_list": (
        lambda p: ["loss", tf.multiply(_loss(), 2.0, name="double").name],
        7,
        None,
        {"every_n_iter": 2},
    ),
    "tensor_objects_as_tags": (lambda p: [_loss(), "loss:0"], 4, None, {"every_n_iter": 2}),
    "every_n_iter_and_at_end": (lambda p: ["loss"], 8, None, {"every_n_iter": 5, "at_end": True}),
    "at_end_only": (lambda p: {"w": p.weight}, 5, None, {"at_end": True}),
    "every_n_secs": (
        lambda p: ["loss"],
        8,
        [0, 0.4, 1.0, 1.2, 2.5, 2.6, 3.4, 3.6],
        {"every_n_secs": 1.0, "at_end": True},
    ),
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_same_steps_same_values_same_lines(caplog, scenario):
    caplog.set_level(logging.INFO, logger=LOGGER)
    caplog.set_level(logging.INFO, logger=TF_LOGGER)
    tensors, steps, seconds, kwargs = SCENARIOS[scenario]
    theirs = _run("tensorflow", caplog, tensors, steps, seconds, **kwargs)
    ours = _run("monsession", caplog, tensors, steps, seconds, **kwargs)
    assert theirs[0], "TensorFlow's hook logged nothing: the scenario tests nothing"
    assert ours[0] == theirs[0]
    assert ours[1] == theirs[1]


def test_elapsed_seconds_follow_the_same_clock(caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    caplog.set_level(logging.INFO, logger=TF_LOGGER)
    seconds = [0, 0.5, 1.25, 1.5, 3.0]
    theirs = _run("tensorflow", caplog, lambda p: ["loss"], 5, seconds, every_n_secs=1.0)[1]
    ours = _run("monsession", caplog, lambda p: ["loss"], 5, seconds, every_n_secs=1.0)[1]
    assert [re.sub(r"^loss = [\d.]+ ?", "", line) for line in ours] == [
        "",
        "(1.250 sec)",
        "(1.750 sec)",
    ]
    assert ours == theirs
