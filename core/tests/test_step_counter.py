"""The step service's host counter: each transition is a method of its own.

`StepCounter` is plain Python; the device is a list the tests change, read
through a function that counts its reads.
"""

from __future__ import annotations

import logging

import pytest

from monsession._backends._backend import StepCounter


class Device:
    """A global step "on the device", and how often it was read."""

    def __init__(self, value):
        self.value = value
        self.reads = 0

    def read(self):
        self.reads += 1
        return self.value


@pytest.mark.parametrize("field", ["before", "after", "stale", "uncounted", "drifted"])
def test_fields_are_read_only_from_outside(field):
    counter = StepCounter(None, 3)
    with pytest.raises(AttributeError):
        setattr(counter, field, 7)


def test_read_before_reads_the_device_for_both_sides():
    device = Device(41)
    counter = StepCounter(device.read)
    assert (counter.before, counter.after) == (None, None)
    assert counter.read_before() == 41
    assert (counter.before, counter.after, device.reads) == (41, 41, 1)
    # The next run starts from it without reading again.
    counter.start_run()
    counter.end_run(counted_step=True)
    assert (counter.before, counter.after, device.reads) == (41, 42, 1)


def test_learn_before_sets_only_the_step_before_the_run():
    counter = StepCounter(Device(0).read)
    counter.start_run()
    counter.learn_before(9)
    assert (counter.before, counter.after) == (9, None)


def test_adopt_replaces_the_count_and_makes_it_known():
    device = Device(5)
    counter = StepCounter(device.read, 5)
    counter.start_run()
    counter.forget_step()
    counter.end_run(counted_step=True)
    assert (counter.after, counter.stale) == (None, True)
    counter.adopt(8)  # Read with the hooks' values.
    assert (counter.after, counter.stale) == (8, False)
    counter.start_run()  # Known: no read of the device.
    assert (counter.before, device.reads) == (8, 0)


def test_adopt_none_leaves_the_step_to_a_read():
    counter = StepCounter(Device(3).read, 3)
    counter.adopt(None)
    assert (counter.after, counter.stale) == (None, False)
    counter.start_run()
    counter.end_run(counted_step=True)
    assert counter.after is None  # Nothing to count from.


def test_advance_counts_scheduled_steps_at_once():
    counter = StepCounter(Device(0).read, 10)
    counter.advance(4)
    assert counter.after == 14
    counter.start_run()
    assert counter.before == 14


def test_advance_needs_a_known_step():
    counter = StepCounter(None)
    with pytest.raises(AssertionError, match="known step"):
        counter.advance(1)


def test_stale_step_is_read_when_the_next_run_starts_or_when_asked():
    device = Device(20)
    counter = StepCounter(device.read, 20)
    counter.start_run()
    counter.forget_step()
    counter.end_run(counted_step=True)
    assert counter.uncounted and counter.stale
    device.value = 23
    assert counter.known_after() == 23
    assert (device.reads, counter.stale) == (1, False)
    counter.start_run()
    assert (counter.before, counter.uncounted, device.reads) == (23, False, 1)


def test_drift_logs_once_and_stays(caplog):
    counter = StepCounter(None, 0)
    with caplog.at_level(logging.WARNING, logger="monsession"):
        counter.drift("drifted at %d", 1)
        counter.drift("drifted at %d", 2)
    assert counter.drifted
    assert [record.getMessage() for record in caplog.records] == ["drifted at 1"]
