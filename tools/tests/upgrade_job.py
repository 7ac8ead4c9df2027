"""A training job for the upgrade tests, started by one release and resumed by the next.

    python upgrade_job.py DIR LAST_STEP

An eager loop over `monsession.Epochs` (a dataset reshuffled each epoch, 5
batches an epoch, 3 epochs) under `MonitoredTrainingSession`, writing into
DIR: a checkpoint every 3 steps (the global step the session owns, the
epoch and the position in the data, the hooks' state beside it), summaries
every 2 steps, the step rate every 4. It stops after global step LAST_STEP
and prints JSON: monsession's version, ``[global step, batch]`` of each
step it ran, the epochs it completed, then what DIR holds, read back with
TensorFlow's own readers: every ``[tag, step]`` of a summary value in its
event files (duplicates kept), the steps of the checkpoints kept, the
latest checkpoint's step and variables
(`tf.train.load_checkpoint`; the iterator's state, a variant, is left
out: the next batch shows it; so is the object graph), and the hooks' state saved beside it.
"""

import json
import pathlib
import sys

import tensorflow as tf

import monsession as ms

directory, last_step = sys.argv[1], int(sys.argv[2])
dataset = (
    tf.data.Dataset.range(20)
    .map(lambda i: tf.cast(i, tf.float32))
    .shuffle(20, seed=3, reshuffle_each_iteration=True)
    .batch(4)
)
data = ms.Epochs(dataset, num_epochs=3)
w = tf.Variable(1.0)


@tf.function
def train_step(x):
    w.assign(0.9 * w + tf.reduce_sum(x) / 100.0)  # Depends on the order of the batches.
    tf.summary.scalar("w", w)
    return {"batch": x}


class Record(ms.SessionRunHook):
    """Records the global step after each step and the batch it trained on."""

    def __init__(self):
        self.steps = []

    def before_run(self, run_context):
        return ms.SessionRunArgs({"step": ms.get_global_step(), "batch": "batch"})

    def after_run(self, run_context, run_values):
        results = run_values.results
        self.steps.append([int(results["step"]), results["batch"].tolist()])


record = Record()
checkpoint = tf.train.Checkpoint(w=w, data=data)
with ms.MonitoredTrainingSession(
    checkpoint_dir=directory,
    scaffold=ms.Scaffold(saver=checkpoint),
    hooks=[record, ms.StopAtStepHook(last_step=last_step)],
    save_checkpoint_steps=3,
    save_summaries_steps=2,
    log_step_count_steps=4,
) as sess:
    epochs = list(data.run(sess, train_step))

summaries = sorted(
    [value.tag, event.step]
    for path in pathlib.Path(directory).glob("events.out.tfevents.*")
    for event in tf.compat.v1.train.summary_iterator(str(path))
    for value in event.summary.value
)
latest = tf.train.latest_checkpoint(directory)
reader = tf.train.load_checkpoint(latest)
variables = {
    name: reader.get_tensor(name).tolist()
    for name, dtype in sorted(reader.get_variable_to_dtype_map().items())
    if dtype not in (tf.variant, tf.string)  # The iterator's state; the object graph.
}
print(
    json.dumps(
        {
            "version": ms.__version__,
            "steps": record.steps,
            "epochs": epochs,
            "summaries": summaries,
            "checkpoint": int(latest.rsplit("-", 1)[1]),
            "checkpoints": [
                int(path.rsplit("-", 1)[1])
                for path in tf.train.get_checkpoint_state(directory).all_model_checkpoint_paths
            ],
            "variables": variables,
            "hook_state": json.loads(pathlib.Path(latest + ".hooks.json").read_text("utf-8")),
        }
    )
)
