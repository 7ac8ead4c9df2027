"""A training process for the restart tests: trains, and may end itself at a step.

    python mlflow_child.py DIR URI --offset 1000 --last-step 30 --save-every 5 \
        [--kill-at 17] [--signal-at 12]

Logs ``loss`` and ``w`` every step into the run, checkpoints every
`--save-every` steps into DIR/checkpoints. `--kill-at K` SIGKILLs the
process after step K, once what the hook released reached the store (its
`flush()`: the restart then meets the steps the killed process sent).
`--signal-at K` sends SIGTERM to itself after step K. Prints the run id.
"""

from __future__ import annotations

import argparse
import os
import signal

from mlflow_testing import Program, Saver

import monsession
from monsession_hooks_mlflow import MlflowHook


class _EndAt(monsession.SessionRunHook):
    def __init__(self, step, hook, signum):
        self.step, self.hook, self.signum = step, hook, signum

    def next_action(self, global_step):
        return monsession.NextAction(steps=max(1, self.step - global_step))

    def after_run(self, run_context, run_values):
        run_context = monsession.plugins.as_run_context(run_context)
        if run_context.global_step_after(lambda step: step == self.step) is None:
            return
        if self.signum == signal.SIGKILL:
            assert self.hook.flush(), "the store took too long"
        os.kill(os.getpid(), self.signum)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("directory")
    parser.add_argument("uri")
    parser.add_argument("--offset", type=float, default=0.0)
    parser.add_argument("--last-step", type=int, default=30)
    parser.add_argument("--save-every", type=int, default=5)
    parser.add_argument("--kill-at", type=int, default=0)
    parser.add_argument("--signal-at", type=int, default=0)
    args = parser.parse_args()

    program = Program()
    program.set_offset(args.offset)
    checkpoints = os.path.join(args.directory, "checkpoints")
    hook = MlflowHook(["loss", "w"], every_n_steps=1, tracking_uri=args.uri, run_name="child")
    hooks = [hook, Saver(program.checkpoint, checkpoints, args.save_every)]
    if args.kill_at:
        hooks.append(_EndAt(args.kill_at, hook, signal.SIGKILL))
    if args.signal_at:
        hooks.append(_EndAt(args.signal_at, hook, signal.SIGTERM))
    hooks.append(monsession.StopAtStepHook(last_step=args.last_step))
    with monsession.MonitoredTrainingSession(
        checkpoint_dir=checkpoints,
        scaffold=monsession.Scaffold(saver=program.checkpoint),
        save_checkpoint_secs=None,
        save_summaries_steps=None,
        log_step_count_steps=None,
        hooks=hooks,
        steps_per_execution="auto",
    ) as sess:
        print(hook.run_id, flush=True)
        while not sess.should_stop():
            sess.run(program.step)


if __name__ == "__main__":
    main()
