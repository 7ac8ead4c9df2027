"""monsession demo: a real training run with hooks, in eager or graph mode.

A small Keras 3 regression model learns a noisy linear function of generated
data, in a TF2 `tf.function` loop under `monsession.MonitoredTrainingSession`
with: a progress bar, a periodic loss log, TensorBoard summaries and the step
rate, checkpoints, a NaN guard and a stop at a step. Run it again and it
resumes from the last checkpoint. `--graph` runs the same training the
`tf.compat.v1` way, where monsession is a drop-in for `tf.compat.v1.train`.

    python examples/demo.py [--dir monsession-demo] [--steps 600] [--graph]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import pathlib
import re
import shlex
import shutil
import sys
import sysconfig
import tempfile
from collections.abc import Iterator

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# The prefix of a line logged by TensorFlow's native code, up to the thread id:
# "I0000 00:00:1795600011.751468   18177 ".
NATIVE_LOG_PREFIX = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+\d+ ")


@contextlib.contextmanager
def native_lines_once() -> Iterator[None]:
    """Writes each distinct line printed to stderr inside the block only once.

    TensorFlow 2.21 loads two native libraries on import, and each prints the
    same startup lines straight to file descriptor 2 (`TF_CPP_MIN_LOG_LEVEL`
    does not reach them). The block's stderr goes to a file; on exit each line
    is written once, lines that differ only in time and thread counting as one.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            seen: set[str] = set()
            for line in captured.read().decode(errors="replace").splitlines(keepends=True):
                key = NATIVE_LOG_PREFIX.sub("", line)
                if key not in seen:
                    seen.add(key)
                    sys.stderr.write(line)
            sys.stderr.flush()


with native_lines_once():
    import numpy as np
    import tensorflow as tf

    import monsession as ms
    from monsession.hooks import LoggingTensorHook, NanTensorHook, ProgressBarHook

FEATURES = 8
BATCH = 64


def make_data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Generated data: y = x . w + 0.5 + noise (nothing is downloaded)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(4096, FEATURES)).astype("float32")
    w = rng.normal(size=(FEATURES, 1)).astype("float32")
    y = x @ w + 0.5 + 0.05 * rng.normal(size=(4096, 1)).astype("float32")
    return x, y


def batches(x: np.ndarray, y: np.ndarray) -> tf.data.Dataset:
    return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(4096, seed=1).repeat().batch(BATCH)


def training_session(
    directory: pathlib.Path, loss: object, last_step: int, scaffold: ms.Scaffold | None = None
) -> ms.MonitoredSession:
    """`MonitoredTrainingSession` with the demo's hooks and schedule, in either mode."""
    stop = ms.StopAtStepHook(last_step=last_step)
    hooks = [
        stop,
        NanTensorHook(loss),
        LoggingTensorHook({"loss": loss}, every_n_iter=100),
        ProgressBarHook(tensors={"loss": loss}, every_n_iter=50, stop_hook=stop),
    ]
    return ms.MonitoredTrainingSession(
        checkpoint_dir=str(directory),
        scaffold=scaffold,
        hooks=hooks,
        save_checkpoint_steps=200,
        save_summaries_steps=25,
        log_step_count_steps=50,
    )


def train_eager(directory: pathlib.Path, last_step: int) -> float:
    import keras

    global_step = ms.get_or_create_global_step()
    model = keras.Sequential(
        [keras.Input((FEATURES,)), keras.layers.Dense(32, "relu"), keras.layers.Dense(1)]
    )
    optimizer = keras.optimizers.Adam(0.01)
    optimizer.build(model.trainable_variables)
    loss_fn = keras.losses.MeanSquaredError()
    iterator = iter(batches(*make_data()))

    @tf.function
    def train_step():
        x, y = next(iterator)
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        global_step.assign_add(1)
        tf.summary.scalar("loss", loss, step=global_step)
        return {"loss": loss}

    state = tf.train.Checkpoint(model=model, optimizer=optimizer, step=global_step)
    with training_session(directory, "loss", last_step, ms.Scaffold(saver=state)) as sess:
        loss = float("nan")
        while not sess.should_stop():
            loss = float(sess.run(train_step)["loss"])
    return loss


def train_graph(directory: pathlib.Path, last_step: int) -> float:
    with tf.Graph().as_default():
        global_step = ms.get_or_create_global_step()
        x, y = tf.compat.v1.data.make_one_shot_iterator(batches(*make_data())).get_next()
        hidden = tf.nn.relu(x @ _weight("hidden", [FEATURES, 32]) + _weight("hidden_bias", [32]))
        prediction = hidden @ _weight("out", [32, 1]) + _weight("out_bias", [1])
        loss = tf.compat.v1.losses.mean_squared_error(y, prediction)
        tf.compat.v1.summary.scalar("loss", loss)
        optimizer = tf.compat.v1.train.AdamOptimizer(0.01)
        train_op = optimizer.minimize(loss, global_step=global_step)
        with training_session(directory, loss, last_step) as sess:
            value = float("nan")
            while not sess.should_stop():
                _, value = sess.run([train_op, loss])
        return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Train a small model under monsession.")
    parser.add_argument(
        "--dir", default="monsession-demo", help="where to write (default: %(default)s)"
    )
    parser.add_argument(
        "--steps", type=int, default=600, help="steps per run (default: %(default)s)"
    )
    parser.add_argument("--graph", action="store_true", help="the tf.compat.v1 graph-mode variant")
    args = parser.parse_args(argv)
    if isinstance(sys.stdout, io.TextIOWrapper):
        # One line at a time, so printed lines and log lines (stderr) stay in order.
        sys.stdout.reconfigure(line_buffering=True)
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    logging.getLogger("monsession").setLevel(logging.INFO)
    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)  # The hooks' lines.
    directory = pathlib.Path(args.dir).resolve() / ("graph" if args.graph else "eager")
    directory.mkdir(parents=True, exist_ok=True)
    latest = tf.train.latest_checkpoint(str(directory))
    start = int(tf.train.load_checkpoint(latest).get_tensor(_step_key(latest))) if latest else 0
    print(f"Training {'graph' if args.graph else 'eager'} mode in {directory}")
    print(f"Starting at step {start}" + (" (resumed from the checkpoint)" if start else ""))
    train = train_graph if args.graph else train_eager
    loss = train(directory, start + args.steps)
    # The loss of the last step, as the progress bar shows it (4 significant digits).
    print(f"\nDone at step {start + args.steps}, last loss {loss:.4g}.")
    print(f"Checkpoints: {tf.train.latest_checkpoint(str(directory))}")
    print(f"TensorBoard:  {tensorboard_command(directory.parent)}")
    print("Run the same command again to resume from the checkpoint.")
    return 0


def tensorboard_command(logdir: pathlib.Path) -> str:
    """The command that opens TensorBoard on `logdir`, with this environment's TensorBoard."""
    script = shutil.which("tensorboard", path=sysconfig.get_path("scripts"))
    if script:
        return shlex.join([script, "--logdir", str(logdir)])
    return shlex.join([sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir)])


def _weight(name: str, shape: list[int]) -> tf.Variable:
    initializer = tf.compat.v1.glorot_uniform_initializer(seed=len(name))
    return tf.compat.v1.get_variable(name, shape, initializer=initializer)


def _step_key(checkpoint: str) -> str:
    """The global step's key in a checkpoint (graph: a variable; eager: an object)."""
    names = {name for name, _ in tf.train.list_variables(checkpoint)}
    return "global_step" if "global_step" in names else "step/.ATTRIBUTES/VARIABLE_VALUE"


if __name__ == "__main__":
    sys.exit(main())
