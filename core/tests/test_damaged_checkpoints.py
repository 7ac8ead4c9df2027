"""A damaged latest checkpoint: the newest readable one is restored, in both modes.

Real checkpoint files are written, damaged on disk (deleted, truncated,
garbage) and restored by the chief's session creator.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
import tensorflow as tf

import monsession

_v1 = tf.compat.v1


def _truncate(path: Path) -> None:
    with open(path, "r+b") as handle:
        handle.truncate(path.stat().st_size // 2)


def _data_file(prefix: Path) -> Path:
    return next(prefix.parent.glob(prefix.name + ".data-*"))


DAMAGES = {
    "index deleted": lambda latest: (latest.with_name(latest.name + ".index").unlink(), 5)[1],
    "data truncated": lambda latest: (_truncate(_data_file(latest)), 5)[1],
    "index truncated": lambda latest: (_truncate(latest.with_name(latest.name + ".index")), 5)[1],
    "state file garbage text": lambda latest: (
        (latest.parent / "checkpoint").write_text("garbage text {{{"),
        10,
    )[1],
    "state file binary": lambda latest: (
        (latest.parent / "checkpoint").write_bytes(b"\xff\xfe\x00\x81garbage"),
        10,
    )[1],
}


def _write_checkpoints(mode: str, directory: Path) -> None:
    """Checkpoints of steps 5 and 10 (a big variable holds the step too)."""
    if mode == "graph":
        with tf.Graph().as_default():
            step = monsession.get_or_create_global_step()
            weights = _v1.get_variable("w", initializer=tf.zeros([4096]))
            saver = _v1.train.Saver()
            with _v1.Session() as sess:
                sess.run(_v1.global_variables_initializer())
                for value in (5, 10):
                    sess.run([step.assign(value), weights.assign(tf.fill([4096], float(value)))])
                    saver.save(sess, str(directory / "model.ckpt"), global_step=value)
        return
    tf.compat.v1.reset_default_graph()
    step = monsession.get_or_create_global_step()
    weights = tf.Variable(tf.zeros([4096]))
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(step=step, w=weights), str(directory), 5, checkpoint_name="model.ckpt"
    )
    for value in (5, 10):
        step.assign(value)
        weights.assign(tf.fill([4096], float(value)))
        manager.save(checkpoint_number=value)
    tf.compat.v1.reset_default_graph()


def _restore(mode: str, directory: Path) -> tuple[int, float]:
    """The global step and a weight restored by a chief session."""
    if mode == "graph":
        with tf.Graph().as_default():
            step = monsession.get_or_create_global_step()
            weights = _v1.get_variable("w", initializer=tf.zeros([4096]))
            with monsession.SingularMonitoredSession(checkpoint_dir=str(directory)) as sess:
                value, weight = sess.run([step, weights])
            return int(value), float(weight[0])
    tf.compat.v1.reset_default_graph()
    step = monsession.get_or_create_global_step()
    weights = tf.Variable(tf.zeros([4096]))
    scaffold = monsession.Scaffold(saver=tf.train.Checkpoint(step=step, w=weights))
    with monsession.SingularMonitoredSession(scaffold=scaffold, checkpoint_dir=str(directory)):
        result = int(step.numpy()), float(weights.numpy()[0])
    tf.compat.v1.reset_default_graph()
    return result


@pytest.mark.parametrize("mode", ["graph", "eager"])
@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_damaged_latest_falls_back_to_the_newest_readable(tmp_path, caplog, mode, damage):
    _write_checkpoints(mode, tmp_path)
    expected = DAMAGES[damage](tmp_path / "model.ckpt-10")
    with caplog.at_level(logging.WARNING, logger="monsession"):
        assert _restore(mode, tmp_path) == (expected, float(expected))
    warnings = "\n".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert "Damaged checkpoint files" in warnings
    bad_file = "checkpoint" if "state file" in damage else "model.ckpt-10"
    assert str(tmp_path / bad_file) in warnings
    # The state file now names the restored checkpoint; nothing was deleted.
    assert tf.train.latest_checkpoint(str(tmp_path)) == str(tmp_path / f"model.ckpt-{expected}")
    assert (
        tf.train.load_checkpoint(str(tmp_path / "model.ckpt-5")).get_tensor(
            "w" if mode == "graph" else "w/.ATTRIBUTES/VARIABLE_VALUE"
        )[0]
        == 5.0
    )


@pytest.mark.parametrize("mode", ["graph", "eager"])
def test_no_readable_checkpoint_is_an_error_naming_the_files(tmp_path, mode):
    _write_checkpoints(mode, tmp_path)
    _truncate(_data_file(tmp_path / "model.ckpt-10"))
    (tmp_path / "model.ckpt-5.index").unlink()
    with pytest.raises(monsession.DamagedCheckpointError) as raised:
        _restore(mode, tmp_path)
    message = str(raised.value)
    assert repr(str(tmp_path)) in message
    assert str(tmp_path / "model.ckpt-5.index") in message
    assert str(_data_file(tmp_path / "model.ckpt-10")) in message
    assert "Read less bytes than requested" in message


@pytest.mark.parametrize("mode", ["graph", "eager"])
def test_lone_data_file_is_not_a_fresh_start(tmp_path, mode):
    _write_checkpoints(mode, tmp_path)
    for name in ("checkpoint", "model.ckpt-5.index", "model.ckpt-10.index"):
        (tmp_path / name).unlink()
    for data in tmp_path.glob("model.ckpt-5.data-*"):
        data.unlink()
    with pytest.raises(
        monsession.DamagedCheckpointError, match=r"model\.ckpt-10\.index is missing"
    ):
        _restore(mode, tmp_path)


@pytest.mark.parametrize("mode", ["graph", "eager"])
def test_empty_directory_starts_fresh(tmp_path, mode):
    assert _restore(mode, tmp_path) == (0, 0.0)
    assert os.listdir(tmp_path) == []
