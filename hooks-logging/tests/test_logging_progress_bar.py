"""ProgressBarHook: a tqdm bar in a terminal, plain log lines elsewhere, in both modes."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import textwrap
import time
from unittest import mock

import pytest
import tensorflow as tf
from logging_hooks_testing import (
    MODES,
    PYTHON,
    FetchRecorder,
    StepReadCounter,
    capture_info,
    expected_losses,
    messages,
    program_in,
    subprocess_env,
    train,
)

import monsession
import monsession.testing
from monsession_hooks_logging import ProgressBarHook
from monsession_hooks_logging._tensors import short_format


def _stop_and_bar(steps, **bar_kwargs):
    stop = monsession.StopAtStepHook(num_steps=steps)
    bar = ProgressBarHook(stop_hook=stop, file=io.StringIO(), log_every_n_secs=0, **bar_kwargs)
    return stop, bar


def _run_until_stop(program, hooks):
    with monsession.MonitoredSession(hooks=hooks) as session:
        while not session.should_stop():
            session.run(program.step)


# --- Plain lines (the output is not a terminal) ----------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_plain_lines_show_step_total_rate_eta_and_values(caplog, mode):
    capture_info(caplog)
    with program_in(mode) as program:
        # The bar comes before the stop hook: last_step is read lazily.
        stop, bar = _stop_and_bar(12, tensors={"loss": program.loss}, every_n_iter=5)
        _run_until_stop(program, [bar, stop])
    losses = expected_losses(12)
    lines = messages(caplog)
    assert len(lines) == 4, lines
    # The rate is measured from the end of the first step: the first line has none.
    assert lines[0] == "step 1/12 (8%), loss = 16"
    for line, step in zip(lines[1:3], [6, 11], strict=True):
        pattern = rf"step {step}/12 \({100 * step / 12:.0f}%\), [\d.e+]+ steps/sec, ETA \d\d:\d\d, "
        assert re.fullmatch(pattern + r"loss = (.*)", line), line
        assert line.endswith("loss = " + short_format({"l": losses[step - 1]})["l"])
    assert re.fullmatch(r"step 12/12 \(100%\), [\d.e+]+ steps/sec, loss = .*", lines[3])


@pytest.mark.parametrize("steps_per_execution", [1, "auto"])
def test_the_last_steps_line_shows_its_own_values_when_steps_run_silently(
    caplog, steps_per_execution
):
    # Eager steps on which no hook acts run without the hooks (fused, or one
    # per call): the bar still acts on the last step, with that step's loss.
    # No stop hook acts on it: the loop ends once the global step is 12.
    capture_info(caplog)
    with program_in("eager") as program:
        bar = ProgressBarHook(
            {"loss": program.loss}, every_n_iter=5, last_step=12, file=io.StringIO(),
            log_every_n_secs=0,
        )  # fmt: skip
        with monsession.MonitoredSession(
            hooks=[bar], steps_per_execution=steps_per_execution
        ) as session:
            while int(program.global_step.numpy()) < 12:
                session.run(program.step)
    last = messages(caplog)[-1]
    assert last.startswith("step 12/12 (100%)"), last
    assert last.endswith("loss = " + short_format({"l": expected_losses(12)[11]})["l"]), last


@pytest.mark.parametrize("mode", MODES)
def test_values_are_fetched_only_on_trigger_steps(mode):
    with program_in(mode) as program:
        stop, bar = _stop_and_bar(11, tensors=[program.loss], every_n_iter=4)
        recorder = FetchRecorder(bar)
        _run_until_stop(program, [stop, recorder])
    # Every 4th run, and the run that reaches the last step: the bar ends on its values.
    assert recorder.asked == [i % 4 == 0 or i == 10 for i in range(11)]
    # The global step comes from the step service: the hook never runs the session.
    assert recorder.session_runs == [0] * 11


@pytest.mark.parametrize("mode", MODES)
def test_without_tensors_nothing_is_fetched_with_the_step(mode):
    with program_in(mode) as program:
        stop, bar = _stop_and_bar(6, every_n_iter=3)
        recorder = FetchRecorder(bar)
        _run_until_stop(program, [stop, recorder])
    assert recorder.asked == [False] * 6
    assert recorder.session_runs == [0] * 6


@pytest.mark.parametrize("with_tensors", [True, False])
def test_graph_reads_the_global_step_once_after_each_trigger_step_only(caplog, with_tensors):
    capture_info(caplog)
    with program_in("graph") as program:
        bar = ProgressBarHook(
            ["loss"] if with_tensors else None,
            every_n_iter=4,
            last_step=11,
            file=io.StringIO(),
            log_every_n_secs=0,
        )
        creator = StepReadCounter()
        recorder = FetchRecorder(bar, reads=creator.reads)
        hooks = [recorder, monsession.StopAtStepHook(last_step=11)]
        with monsession.MonitoredSession(session_creator=creator, hooks=hooks) as session:
            while not session.should_stop():
                session.run(program.step)
    triggers = [i % 4 == 0 or i == 10 for i in range(11)]  # And the last step's run.
    assert recorder.asked == (triggers if with_tensors else [False] * 11)
    assert recorder.step_reads == [int(t) for t in triggers]
    # Each trigger step shows the global step after it (TensorFlow's value).
    assert [line.split(",")[0] for line in messages(caplog)] == [
        "step 1/11 (9%)",
        "step 5/11 (45%)",
        "step 9/11 (82%)",
        "step 11/11 (100%)",
    ]


def test_explicit_last_step_counts_from_the_restored_step(caplog):
    capture_info(caplog)
    with program_in("eager") as program:
        program.global_step.assign(30)
        bar = ProgressBarHook(last_step=40, every_n_iter=100, file=io.StringIO())
        _run_until_stop(program, [monsession.StopAtStepHook(last_step=40), bar])
    lines = messages(caplog)
    assert lines[0] == "step 31/40 (78%)"
    assert lines[-1].startswith("step 40/40 (100%), ")


def test_without_a_last_step_there_is_no_eta(caplog):
    capture_info(caplog)
    with program_in("graph") as program:
        bar = ProgressBarHook(["loss"], every_n_iter=2, file=io.StringIO(), log_every_n_secs=0)
        train(program, [bar], steps=3)
    lines = messages(caplog)
    assert [line.split(",")[0] for line in lines] == ["step 1", "step 3", "step 3"]
    assert not any("ETA" in line for line in lines)
    assert lines[0].endswith("loss = 16")


def test_plain_lines_are_spaced_by_log_every_n_secs(caplog):
    capture_info(caplog)
    with program_in("eager") as program, mock.patch.object(time, "time") as clock:
        clock.return_value = 1000.0
        bar = ProgressBarHook(every_n_iter=1, file=io.StringIO(), log_every_n_secs=10)
        with monsession.MonitoredSession(hooks=[bar]) as session:
            for second in [0, 4, 8, 12, 16, 20, 24]:
                clock.return_value = 1000.0 + second
                session.run(program.step)
    steps = [line.split(",")[0] for line in messages(caplog)]
    # The first fetch, then >= 10 s after the previous line (12, 24), then end().
    assert steps == ["step 1", "step 4", "step 7", "step 7"]


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_bar_in_a_terminal_writes_no_log_lines(caplog):
    capture_info(caplog)
    terminal = _Terminal()
    with program_in("eager") as program:
        stop = monsession.StopAtStepHook(num_steps=5)
        bar = ProgressBarHook(["loss"], every_n_iter=2, stop_hook=stop, file=terminal, desc="fit")
        _run_until_stop(program, [stop, bar])
    assert messages(caplog) == []
    frames = terminal.getvalue().split("\r")
    assert re.search(r"^fit: 100%.*\| 5/5 \[\d\d:\d\d<00:00, .*step/s, loss=", frames[-1], re.M)


# --- A real terminal and a real pipe ---------------------------------------------------------

# stderr is a terminal and stdout a pipe: the first bar draws on stderr, the
# second one is given stdout, finds a pipe, and logs plain lines (to stdout).
_SCRIPT = """
import logging, sys, time
logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(name)s| %(message)s")
import tensorflow as tf
import monsession
from monsession.hooks import ProgressBarHook

global_step = monsession.get_or_create_global_step()
weight = tf.Variable(4.0)

@tf.function(autograph=False)
def step():
    loss = tf.square(weight)
    weight.assign_sub(0.2 * weight)
    global_step.assign_add(1)
    return {"loss": loss}

stop = monsession.StopAtStepHook(num_steps=40)
bar = ProgressBarHook(["loss"], every_n_iter=4, stop_hook=stop)
lines = ProgressBarHook(
    ["loss"], every_n_iter=4, stop_hook=stop, file=sys.stdout, log_every_n_secs=0.2
)
with monsession.MonitoredSession(hooks=[stop, bar, lines]) as session:
    while not session.should_stop():
        session.run(step)
        time.sleep(0.025)
print("TRAINING DONE", file=sys.stderr)
"""


def _start_with_terminal_stderr(script):
    primary, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
    process = subprocess.Popen(
        [PYTHON, str(script)],
        stdin=secondary,
        stdout=subprocess.PIPE,
        stderr=secondary,
        env=subprocess_env(),
        close_fds=True,
        text=True,
    )
    os.close(secondary)
    return process, primary


def _read_pty(primary):
    chunks = []
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # EIO: the child closed the terminal.
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(primary)
    return b"".join(chunks).decode("utf-8", "replace")


def test_terminal_shows_a_bar_and_a_pipe_shows_plain_lines(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(_SCRIPT))
    process, primary = _start_with_terminal_stderr(script)
    terminal = _read_pty(primary)  # Until the child exits; its stdout is small.
    piped = process.stdout.read()
    assert process.wait(timeout=120) == 0, terminal

    # Terminal: tqdm frames redrawn in place, with steps, rate, ETA and the loss.
    assert "TRAINING DONE" in terminal
    frames = re.findall(
        r"(\d+)/40 \[(\d\d:\d\d)<(\d\d:\d\d), +([\d.]+)step/s, loss=([\d.e+-]+)\]", terminal
    )
    assert frames, terminal
    assert frames[-1][0] == "40"
    assert any(0 < int(n) < 40 for n, *_ in frames), "no intermediate frame"
    assert "\r" in terminal
    assert "tensorflow|" not in terminal

    # Pipe: no bar, plain periodic lines on the logger, and the final one.
    lines = [
        line.split("| ", 1)[1] for line in piped.splitlines() if line.startswith("tensorflow|")
    ]
    assert "\r" not in piped
    assert "step/s" not in piped
    assert len(lines) >= 3, piped
    assert lines[0] == "step 1/40 (2%), loss = 16"
    assert any(re.match(r"step ([2-9]|[1-3]\d)/40 .*ETA \d\d:\d\d, loss = ", x) for x in lines)
    assert re.fullmatch(r"step 40/40 \(100%\), [\d.e+]+ steps/sec, loss = [\d.e+-]+", lines[-1])


@pytest.mark.parametrize("mode", MODES)
def test_driven_by_hooked_session_without_after_create_session(caplog, mode):
    capture_info(caplog)
    with program_in(mode) as program:
        bar = ProgressBarHook(["loss"], every_n_iter=2, last_step=3, file=io.StringIO())
        bar.begin()
        sess = _raw_session(mode)
        hooked = monsession.testing.hooked_session(sess, [bar])
        for _ in range(3):
            hooked.run(program.step)
        bar.end(sess)
        sess.close()
    lines = messages(caplog)
    assert lines[0].startswith("step 1/3 (33%), ")
    assert lines[0].endswith(", loss = 16")
    assert lines[-1].startswith("step 3/3 (100%), ")


def _raw_session(mode):
    if mode == "eager":
        return monsession.EagerSession()
    sess = tf.compat.v1.Session()
    sess.run(tf.compat.v1.global_variables_initializer())
    return sess


# A hook logs every 4 steps (to TensorFlow's logger, on stderr) while the bar
# is drawn on the same terminal.
_LOGGING_SCRIPT = """
import sys, time
import tensorflow as tf
import monsession
from monsession.hooks import LoggingTensorHook, ProgressBarHook

tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)
global_step = monsession.get_or_create_global_step()
weight = tf.Variable(4.0)

@tf.function(autograph=False)
def step():
    loss = tf.square(weight)
    weight.assign_sub(0.2 * weight)
    global_step.assign_add(1)
    return {"loss": loss}

stop = monsession.StopAtStepHook(num_steps=24)
hooks = [stop, ProgressBarHook(["loss"], every_n_iter=1, stop_hook=stop),
         LoggingTensorHook(["loss"], every_n_iter=4)]
with monsession.MonitoredSession(hooks=hooks) as session:
    while not session.should_stop():
        session.run(step)
        time.sleep(0.02)
"""


def test_log_lines_and_the_bar_do_not_share_a_terminal_line(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(_LOGGING_SCRIPT))
    process, primary = _start_with_terminal_stderr(script)
    terminal = _read_pty(primary)
    assert process.wait(timeout=120) == 0, terminal
    # What a terminal shows on each line: the text after its last carriage return.
    shown = [line.rsplit("\r", 1)[-1] for line in terminal.replace("\r\n", "\n").split("\n")]
    logged = [line for line in shown if "loss = " in line]
    assert len(logged) == 6, terminal  # Local steps 0, 4, ..., 20.
    for line in logged:
        assert re.fullmatch(r"INFO:tensorflow:loss = [\d.e+-]+( \(\d+\.\d{3} sec\))?", line), line
    assert re.search(r"24/24 \[", terminal)


# Piped stderr, TensorFlow's default verbosity (WARNING): the plain lines go to stderr.
_DEFAULT_VERBOSITY_SCRIPT = """
import tensorflow as tf
import monsession
from monsession.hooks import ProgressBarHook

global_step = monsession.get_or_create_global_step()

@tf.function
def step():
    global_step.assign_add(1)
    return {"loss": tf.constant(0.5)}

stop = monsession.StopAtStepHook(num_steps=6)
with monsession.MonitoredSession(hooks=[stop, ProgressBarHook(["loss"], stop_hook=stop)]) as s:
    while not s.should_stop():
        s.run(step)
"""


def test_outside_a_terminal_lines_show_at_tensorflows_default_verbosity(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(_DEFAULT_VERBOSITY_SCRIPT)
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=True
    )
    lines = [line for line in result.stderr.splitlines() if line.startswith("step ")]
    assert lines[0] == "step 1/6 (17%), loss = 0.5", result.stderr
    assert re.fullmatch(r"step 6/6 \(100%\), [\d.e+]+ steps/sec, loss = 0.5", lines[-1])
    assert "INFO:tensorflow" not in result.stderr
