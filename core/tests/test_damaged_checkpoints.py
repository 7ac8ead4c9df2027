"""A damaged latest checkpoint: the newest readable one is restored, in both modes.

Real checkpoint files are written, damaged on disk (deleted, truncated,
garbage, flipped bytes) and restored by the chief's session creator, which
reads each tensor once.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import monsession

_v1 = tf.compat.v1


def _truncate(path: Path) -> None:
    with open(path, "r+b") as handle:
        handle.truncate(path.stat().st_size // 2)


def _data_file(prefix: Path) -> Path:
    return next(prefix.parent.glob(prefix.name + ".data-*"))


def _flip_bytes(data: Path, value: float, count: int) -> None:
    """Flips a byte inside the saved tensor of `count` float32 `value`s in `data`."""
    content = bytearray(data.read_bytes())
    start = content.find(np.full(count, value, np.float32).tobytes())
    assert start >= 0, f"no tensor of {count} x {value} in {data}"
    content[start + 2 * count] ^= 0xFF
    data.write_bytes(bytes(content))


DAMAGES = {
    "index deleted": lambda latest: (latest.with_name(latest.name + ".index").unlink(), 5)[1],
    "data truncated": lambda latest: (_truncate(_data_file(latest)), 5)[1],
    "data bytes flipped": lambda latest: (_flip_bytes(_data_file(latest), 10.0, 4096), 5)[1],
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


# Every variable after a fallback: values of step 5, none of step 10, whose
# data file is damaged in one variable's bytes. "late" is created after the
# session (eager mode restores it then, as e.g. an optimizer's slots).
_SHAPES = {"a": [64], "b": [8, 16], "c": [300], "late": [96]}


def _value(name: str, step: int) -> float:
    """The value of every element of `name` in the checkpoint of `step`."""
    return float(step) if name == "global_step" else step * 100.0 + sorted(_SHAPES).index(name)


def _eager_state(step: tf.Variable, late: tf.Module) -> tf.train.Checkpoint:
    variables = {n: tf.Variable(tf.zeros(s), name=n) for n, s in _SHAPES.items() if n != "late"}
    return tf.train.Checkpoint(step=step, late=late, **variables)


def _write_valued_checkpoints(mode: str, directory: Path) -> None:
    if mode == "graph":
        with tf.Graph().as_default():
            step = monsession.get_or_create_global_step()
            variables = {
                n: _v1.get_variable(n, initializer=tf.zeros(s)) for n, s in _SHAPES.items()
            }
            saver = _v1.train.Saver()
            with _v1.Session() as sess:
                sess.run(_v1.global_variables_initializer())
                for value in (5, 10):
                    sess.run(step.assign(value))
                    sess.run(
                        [
                            v.assign(tf.fill(_SHAPES[n], _value(n, value)))
                            for n, v in variables.items()
                        ]
                    )
                    saver.save(sess, str(directory / "model.ckpt"), global_step=value)
        return
    tf.compat.v1.reset_default_graph()
    late = tf.Module()
    late.v = tf.Variable(tf.zeros(_SHAPES["late"]))
    step = monsession.get_or_create_global_step()
    state = _eager_state(step, late)
    manager = tf.train.CheckpointManager(state, str(directory), 5, checkpoint_name="model.ckpt")
    for value in (5, 10):
        step.assign(value)
        for name in _SHAPES:
            variable = late.v if name == "late" else getattr(state, name)
            variable.assign(tf.fill(_SHAPES[name], _value(name, value)))
        manager.save(checkpoint_number=value)
    tf.compat.v1.reset_default_graph()


def _restored_values(mode: str, directory: Path) -> dict[str, np.ndarray]:
    """Every variable's value once a chief session has restored `directory`."""
    if mode == "graph":
        with tf.Graph().as_default():
            monsession.get_or_create_global_step()
            for name, shape in _SHAPES.items():
                _v1.get_variable(name, initializer=tf.zeros(shape))
            with monsession.SingularMonitoredSession(checkpoint_dir=str(directory)) as sess:
                variables = _v1.global_variables()
                return dict(zip([v.op.name for v in variables], sess.run(variables), strict=True))
    tf.compat.v1.reset_default_graph()
    late = tf.Module()
    step = monsession.get_or_create_global_step()
    state = _eager_state(step, late)
    scaffold = monsession.Scaffold(saver=state)
    with monsession.SingularMonitoredSession(scaffold=scaffold, checkpoint_dir=str(directory)):
        late.v = tf.Variable(tf.zeros(_SHAPES["late"]))  # Restored now, from the checkpoint.
        values = {n: getattr(state, n).numpy() for n in _SHAPES if n != "late"}
        values.update(global_step=step.numpy(), late=late.v.numpy())
    tf.compat.v1.reset_default_graph()
    return values


def _checkpoint_values(mode: str, prefix: Path) -> dict[str, np.ndarray]:
    reader = tf.train.load_checkpoint(str(prefix))
    if mode == "graph":
        return {n: reader.get_tensor(n) for n in [*_SHAPES, "global_step"]}
    key = "{}/.ATTRIBUTES/VARIABLE_VALUE".format
    values = {n: reader.get_tensor(key(n)) for n in _SHAPES if n != "late"}
    values.update(global_step=reader.get_tensor(key("step")), late=reader.get_tensor(key("late/v")))
    return values


@pytest.mark.parametrize(
    ("mode", "damaged"),
    [("graph", "a"), ("graph", "late"), ("eager", "a"), ("eager", "c"), ("eager", "late")],
)
def test_fallback_restores_every_variable_from_the_older_checkpoint(
    tmp_path, caplog, mode, damaged
):
    _write_valued_checkpoints(mode, tmp_path)
    newest = _data_file(tmp_path / "model.ckpt-10")
    _flip_bytes(newest, _value(damaged, 10), int(np.prod(_SHAPES[damaged])))
    with caplog.at_level(logging.WARNING, logger="monsession"):
        restored = _restored_values(mode, tmp_path)
    assert restored.keys() == {*_SHAPES, "global_step"}
    older = _checkpoint_values(mode, tmp_path / "model.ckpt-5")
    for name, value in restored.items():
        np.testing.assert_array_equal(value, older[name], err_msg=name)
        assert not np.any(value == _value(name, 10)), f"{name} kept a value of the damaged one"
    warnings = "\n".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert f"{tmp_path / 'model.ckpt-10'} (" in warnings
    assert "Checksum does not match" in warnings
    assert tf.train.latest_checkpoint(str(tmp_path)) == str(tmp_path / "model.ckpt-5")


def _bytes_read() -> int:
    """Bytes this process (all its threads) has read from files so far (Linux)."""
    with open("/proc/self/io") as io:
        return int(next(line for line in io if line.startswith("rchar:")).split()[1])


def _bytes_read_by_creation(mode: str, directory: Path, shape: list[int]) -> int:
    if mode == "graph":
        with tf.Graph().as_default():
            monsession.get_or_create_global_step()
            _v1.get_variable("w", initializer=tf.zeros(shape))
            creator = monsession.ChiefSessionCreator(checkpoint_dir=str(directory))
            before = _bytes_read()
            creator.create_session().close()
            return _bytes_read() - before
    tf.compat.v1.reset_default_graph()
    step = monsession.get_or_create_global_step()
    state = tf.train.Checkpoint(step=step, w=tf.Variable(tf.zeros(shape)))
    creator = monsession.ChiefSessionCreator(
        scaffold=monsession.Scaffold(saver=state), checkpoint_dir=str(directory)
    )
    before = _bytes_read()
    creator.create_session()
    read = _bytes_read() - before
    tf.compat.v1.reset_default_graph()
    return read


@pytest.mark.parametrize("mode", ["graph", "eager"])
def test_session_creation_reads_each_tensor_once(tmp_path, mode):
    shape = [2**21]  # 8 MB: far more than anything else read meanwhile.
    if mode == "graph":
        with tf.Graph().as_default():
            step = monsession.get_or_create_global_step()
            _v1.get_variable("w", initializer=tf.ones(shape))
            with _v1.Session() as sess:
                sess.run(_v1.global_variables_initializer())
                _v1.train.Saver().save(sess, str(tmp_path / "model.ckpt"), global_step=step)
    else:
        tf.compat.v1.reset_default_graph()
        state = tf.train.Checkpoint(
            step=monsession.get_or_create_global_step(), w=tf.Variable(tf.ones(shape))
        )
        tf.train.CheckpointManager(state, str(tmp_path), 1, checkpoint_name="model.ckpt").save(0)
    size = _data_file(tmp_path / "model.ckpt-0").stat().st_size
    _bytes_read_by_creation(mode, tmp_path, shape)  # First calls: imports, TensorFlow's caches.
    read = _bytes_read_by_creation(mode, tmp_path, shape)
    assert size <= read < 1.5 * size, f"{read} bytes read for a {size}-byte data file"


@pytest.mark.parametrize("mode", ["graph", "eager"])
def test_a_checkpoint_not_fitting_the_model_is_raised_not_skipped(tmp_path, caplog, mode):
    _write_checkpoints(mode, tmp_path)
    state_file = (tmp_path / "checkpoint").read_text()
    if mode == "graph":
        with tf.Graph().as_default():
            monsession.get_or_create_global_step()
            _v1.get_variable("w", initializer=tf.zeros([4096]))
            _v1.get_variable("extra", initializer=tf.zeros([3]))
            with pytest.raises(tf.errors.NotFoundError, match="extra"):
                monsession.ChiefSessionCreator(checkpoint_dir=str(tmp_path)).create_session()
    else:
        tf.compat.v1.reset_default_graph()
        state = tf.train.Checkpoint(
            step=monsession.get_or_create_global_step(),
            w=tf.Variable(tf.zeros([4096])),
            extra=tf.Variable(tf.zeros([3])),
        )
        creator = monsession.ChiefSessionCreator(
            scaffold=monsession.Scaffold(saver=state), checkpoint_dir=str(tmp_path)
        )
        with pytest.raises(AssertionError, match="not bound to checkpointed values"):
            creator.create_session()
        tf.compat.v1.reset_default_graph()
    assert "Damaged" not in caplog.text
    assert (tmp_path / "checkpoint").read_text() == state_file
