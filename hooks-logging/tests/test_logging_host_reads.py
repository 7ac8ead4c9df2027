"""Eager mode: how many device-to-host reads each step costs with a logging hook.

Every read makes Python wait for the device (on a GPU, for the whole step),
so a hook must read nothing on the steps where it has nothing to do. Each
step of a real `monsession.MonitoredSession` is counted with
`monsession.testing.count_host_reads()`.

On some steps where a hook fetches values, the session itself also reads the
global step once, with the hooks' values (its check that the global step it
counts on the host is right): the 1st, 3rd, 7th ... such step, then every
100th (`SESSION_CHECKS`). So the k-th step where a hook fetches `n` values
costs `n` reads, plus one when k is a check; the baseline tests pin both parts.
"""

from __future__ import annotations

import io
import time
from unittest import mock

import pytest
from logging_hooks_testing import (
    capture_info,
    expected_losses,
    host_reads_per_step,
    messages,
    program_in,
)

import monsession
from monsession_hooks_logging import LoggingTensorHook, ProgressBarHook

SESSION_CHECKS = (1, 3, 7)  # The fetching steps, of the first ten, that check the step.
START = 1484695987.209386


class _FetchLoss(monsession.SessionRunHook):
    """Fetches the step's loss entry on every step."""

    def before_run(self, run_context):
        return monsession.SessionRunArgs("loss")


def _expected(acting_steps, steps, values):
    """`values` fetched values on acting steps (plus the session's check on those that
    check), 0 elsewhere."""
    reads = [0] * steps
    for count, step in enumerate(acting_steps, 1):
        reads[step] = values + (count in SESSION_CHECKS)
    return reads


# --- Baselines ---------------------------------------------------------------------------------


def test_the_session_alone_reads_nothing():
    with program_in("eager") as program:
        assert host_reads_per_step(program, [], 5) == [0] * 5


def test_a_hook_fetching_one_value_costs_that_value_and_the_session_check():
    with program_in("eager") as program:
        assert host_reads_per_step(program, [_FetchLoss()], 4) == _expected(range(4), 4, 1)


# --- LoggingTensorHook ---------------------------------------------------------------------------


@pytest.mark.parametrize("with_variable", [False, True])
def test_logging_tensor_hook_reads_only_on_the_steps_it_logs(caplog, with_variable):
    capture_info(caplog)
    with program_in("eager") as program:
        tensors = {"loss": "loss", "w": program.weight} if with_variable else ["loss"]
        hook = LoggingTensorHook(tensors, every_n_iter=3)
        counts = host_reads_per_step(program, [hook], 8)
    logged = [0, 3, 6]
    assert counts == _expected(logged, 8, values=2 if with_variable else 1)
    losses = expected_losses(8)
    shown = [
        float(line.split(",")[0].split(" (")[0].removeprefix("loss = "))
        for line in messages(caplog)
    ]
    assert shown == pytest.approx([losses[i] for i in logged])


def test_logging_tensor_hook_every_n_secs_reads_nothing_between_lines(caplog):
    capture_info(caplog)
    seconds = [0, 0.4, 1.0, 1.2, 1.9, 2.5]
    with program_in("eager") as program, mock.patch.object(time, "time") as clock:
        clock.return_value = START
        hook = LoggingTensorHook(["loss"], every_n_secs=1.0)
        counts = []
        with monsession.MonitoredSession(hooks=[hook]) as session:
            for second in seconds:
                clock.return_value = START + second
                with monsession.testing.count_host_reads() as reads:
                    session.run(program.step)
                counts.append(reads.count)
    assert counts == _expected([0, 2, 5], len(seconds), values=1)
    assert len(messages(caplog)) == 3


# --- ProgressBarHook ------------------------------------------------------------------------------


def test_progress_bar_reads_only_the_values_it_shows_and_only_when_it_refreshes(caplog):
    capture_info(caplog)
    with program_in("eager") as program:
        bar = ProgressBarHook(
            ["loss"], every_n_iter=4, last_step=10, file=io.StringIO(), log_every_n_secs=0
        )
        counts = host_reads_per_step(program, [bar], 10)
    # Refreshes at 0, 4, 8, and reads the values once more for the last step's line.
    assert counts == _expected([0, 4, 8, 9], 10, values=1)
    # It did refresh on those steps, with the global step after each.
    assert [line.split(",")[0] for line in messages(caplog)] == [
        "step 1/10 (10%)",
        "step 5/10 (50%)",
        "step 9/10 (90%)",
        "step 10/10 (100%)",
    ]


def test_progress_bar_without_values_never_reads_the_device(caplog):
    capture_info(caplog)
    with program_in("eager") as program:
        bar = ProgressBarHook(every_n_iter=2, last_step=6, file=io.StringIO(), log_every_n_secs=0)
        counts = host_reads_per_step(program, [bar], 6)
    # The global step it shows comes from the session's host count.
    assert counts == [0] * 6
    assert [line.split(",")[0] for line in messages(caplog)] == [
        "step 1/6 (17%)",
        "step 3/6 (50%)",
        "step 5/6 (83%)",
        "step 6/6 (100%)",
    ]


def test_progress_bar_default_schedule_reads_nothing_between_refreshes(caplog):
    capture_info(caplog)
    seconds = [0, 0.3, 0.6, 1.1, 1.5, 1.8, 2.2]
    with program_in("eager") as program, mock.patch.object(time, "time") as clock:
        clock.return_value = START
        bar = ProgressBarHook({"loss": "loss"}, file=io.StringIO(), log_every_n_secs=0)
        counts = []
        with monsession.MonitoredSession(hooks=[bar]) as session:
            for second in seconds:
                clock.return_value = START + second
                with monsession.testing.count_host_reads() as reads:
                    session.run(program.step)
                counts.append(reads.count)
    # Every second by default: refreshes at 0, 1.1 and 2.2 seconds.
    assert counts == _expected([0, 3, 6], len(seconds), values=1)
    assert [line.split(",")[0] for line in messages(caplog)][:3] == [
        "step 1",
        "step 4",
        "step 7",
    ]
