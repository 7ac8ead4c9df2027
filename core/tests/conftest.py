"""Shared fixtures: a fresh graph, or a fresh eager state, for every test."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


@pytest.fixture
def graph():
    """A fresh default graph for graph-mode tests."""
    import tensorflow as tf

    with tf.Graph().as_default() as g:
        yield g


@pytest.fixture(params=["graph", "eager"])
def program(request):
    """The same small training program, once per mode."""
    import tensorflow as tf
    from programs import make_program

    if request.param == "graph":
        with tf.Graph().as_default():
            yield make_program("graph")
    else:
        tf.compat.v1.reset_default_graph()  # A fresh global step for eager mode.
        yield make_program("eager")
        tf.compat.v1.reset_default_graph()
