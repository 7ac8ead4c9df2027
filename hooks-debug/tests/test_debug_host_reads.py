"""Eager mode: how many device-to-host reads each step costs with a debug hook.

Every read makes Python wait for the device (on a GPU, for the whole step),
so a hook must read nothing on the steps where it has nothing to do. Each
step of a real `monsession.MonitoredSession` is counted with
`monsession.testing.count_host_reads()`.

On some steps where a hook fetches values, the session itself also reads the
global step once, with the hooks' values (its check that the global step it
counts on the host is right): the 1st, 3rd, 7th ... such step, then every
100th (`SESSION_CHECKS`, of the first six). A hook that keeps its values on
the device and reads them itself (NanTensorHook every N steps) fetches
nothing, so the session adds nothing.
"""

from __future__ import annotations

import logging

import pytest
from debug_testing import STABLE_LR, eager_program, first_bad_step, host_reads_per_step

import monsession
from monsession_hooks_debug import NanLossDuringTrainingError, NanTensorHook, ProfilerHook

SESSION_CHECKS = (1, 3)  # The fetching steps, of the first six, that check the step.


def test_the_session_alone_reads_nothing():
    program = eager_program(lr=STABLE_LR)
    assert host_reads_per_step([], program.step, 5) == [0] * 5


# --- NanTensorHook --------------------------------------------------------------------------------


def test_nan_hook_every_step_reads_the_loss_on_every_step():
    # TensorFlow's way: the loss is checked on the host after each step, so
    # each step reads it (1); the session checks its global step on some (1).
    program = eager_program(lr=STABLE_LR)
    counts = host_reads_per_step([NanTensorHook("loss")], program.step, 6)
    assert counts == [1 + (step in SESSION_CHECKS) for step in range(1, 7)]


def test_nan_hook_every_n_steps_reads_once_per_check_and_nothing_between():
    program = eager_program(lr=STABLE_LR)
    hook = NanTensorHook("loss", check_every_n_steps=4)
    step = hook.watch(program.step)
    counts = []
    with monsession.MonitoredSession(hooks=[hook]) as sess:
        for _ in range(10):
            with monsession.testing.count_host_reads() as reads:
                sess.run(step)
            counts.append(reads.count)
        with monsession.testing.count_host_reads() as at_end:
            hook.end(sess)
    # The kept losses of four steps come back in one read on steps 4 and 8.
    assert counts == [0, 0, 0, 1, 0, 0, 0, 1, 0, 0]
    assert at_end.count == 1  # The two losses left, in one read.


def test_nan_hook_every_n_steps_still_finds_the_divergence_at_its_check():
    program = eager_program()  # Diverges: its loss becomes NaN after some steps.
    first_nan = first_bad_step("nan")
    every = first_nan + 3
    hook = NanTensorHook("loss", check_every_n_steps=every)
    step = hook.watch(program.step)
    counts = []
    with monsession.MonitoredSession(hooks=[hook]) as sess:
        with pytest.raises(NanLossDuringTrainingError) as raised:
            for _ in range(every):
                with monsession.testing.count_host_reads() as reads:
                    sess.run(step)
                counts.append(reads.count)
    # Nothing was read before the check; it found the first bad step exactly.
    assert counts == [0] * (every - 1)
    assert raised.value.step == first_nan


# --- ProfilerHook ---------------------------------------------------------------------------------


def test_profiler_hook_reads_nothing_on_steps_it_does_not_trace(tmp_path, caplog):
    program = eager_program(lr=STABLE_LR)
    hook = ProfilerHook(save_steps=3, output_dir=str(tmp_path), trace_steps=2)
    with caplog.at_level(logging.INFO, logger="tensorflow"):
        counts = host_reads_per_step([hook], program.step, 8)
    # The TF2 profiler and the step service's host count need no read either,
    # so the traced steps (3 and 4) cost nothing as well.
    assert counts == [0] * 8
    assert "Saved the profile of steps 3 to 4" in caplog.text
    assert list(tmp_path.glob("plugins/profile/*/*.xplane.pb"))
