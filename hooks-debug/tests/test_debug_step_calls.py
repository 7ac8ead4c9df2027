"""What one eager step costs `NanTensorHook` in Python, counted instead of timed.

A check of every step is dear in Python: a small step's hook costs tens of
µs on top of the step (`benchmarks/bench_debug.py`). Two counts per step,
both the same on every step and within the budgets below:

* ``own``: calls of this family's functions;
* ``added``: every Python call of the step (TensorFlow's too) beyond the same
  step in a session without the hook. This counts what the hook makes
  others run: the session's planning for it, its reads, and the outputs of
  the `tf.function` it calls (a watched step checked every step calls the
  step with the flag's update, returning the step's outputs alone: an
  ``(outputs, flag)`` pair costs more calls to unpack).

A change that adds Python to the hook's per-step path fails here; one that
removes some lowers the budget.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

import pytest
import tensorflow as tf
from debug_testing import STABLE_LR, eager_program

import monsession
import monsession_hooks_debug
from monsession_hooks_debug import NanTensorHook

_OWN = os.path.dirname(monsession_hooks_debug.__file__)

# (own, added) per step. The hook of 327e865, before the per-step cuts (on the core of
# 734859f): fetched (7, 25), watched every step (14, 40), every 100 quiet (0, 0), every
# 100 check (13, 39).
BUDGET = {
    "fetched every step": (5, 20),
    "watched every step": (11, 28),
    "watched every 100, quiet step": (0, 0),
    "watched every 100, check step": (13, 35),
}


def _calls(step: Callable[[], object]) -> tuple[int, int]:
    """The calls of this family's functions, and of all Python functions, in `step()`."""
    own = total = 0

    def profile(frame, event, arg):
        nonlocal own, total
        if event == "call":
            total += 1
            own += frame.f_code.co_filename.startswith(_OWN)

    sys.setprofile(profile)
    try:
        step()
    finally:
        sys.setprofile(None)
    return own, total


def _counts(case: str, hooked: bool) -> list[tuple[int, int]]:
    """The counts of three steps of `case` (with the hook, or the same session without)."""
    program = eager_program(lr=STABLE_LR)
    every = 100 if "100" in case else 1
    hook = NanTensorHook("loss", check_every_n_steps=every)
    step = hook.watch(program.step) if case.startswith("watched") and hooked else program.step
    # The check steps counted end at global steps 200, 300, 400 (the first traces).
    warmup, between = (199, 99) if case.endswith("check step") else (10, 0)
    with monsession.MonitoredSession(hooks=[hook] if hooked else []) as sess:
        counts = []
        for _ in range(3):
            for _ in range(warmup if not counts else between):
                sess.run(step)
            counts.append(_calls(lambda: sess.run(step)))
    return counts


@pytest.mark.parametrize("case", list(BUDGET))
def test_one_step_of_the_nan_hook_runs_no_more_python_than_its_budget(case):
    tf.config.experimental.set_synchronous_execution(True)
    counts = _counts(case, hooked=True)
    without = _counts(case, hooked=False)
    assert len(set(counts)) == 1, f"the calls differ from step to step: {counts}"
    assert len(set(without)) == 1, f"the calls differ from step to step: {without}"
    own, added = counts[0][0], counts[0][1] - without[0][1]
    assert own <= BUDGET[case][0] and added <= BUDGET[case][1], (
        f"{case}: one step calls {own} of the family's functions and {added} Python "
        f"functions more than without the hook, over the budget of {BUDGET[case]}"
    )
