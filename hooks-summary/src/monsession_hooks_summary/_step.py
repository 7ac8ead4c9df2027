"""The global step as the summary hooks see it, in graph and eager mode."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from monsession import SessionRunContext, get_global_step
from monsession._global_step import global_step_read


class GlobalStep:
    """What a hook fetches to follow the global step, and how it reads the value.

    Graph mode fetches TensorFlow's global-step read tensor, whose value
    predates the step's own increment; eager mode fetches the variable, read
    after the step.

    Args:
      hook_name: The hook's class name, for the error message.

    Raises:
      RuntimeError: If there is no global step.
    """

    def __init__(self, hook_name: str) -> None:
        self.eager = tf.executing_eagerly()
        self.fetch = global_step_read()
        if self.fetch is None:
            raise RuntimeError(
                f"Global step should be created to use {hook_name}: call "
                "monsession.get_or_create_global_step() before creating the session."
            )
        self.variable = get_global_step()
        self.name: str = self.variable.name.split(":")[0]

    def estimate_after_step(self, fetched: Any, steps_per_run: int) -> int:
        """The global step after the step, from the fetched value, without a read."""
        return int(fetched) if self.eager else int(fetched) + steps_per_run

    def after_step(self, run_context: SessionRunContext, fetched: Any) -> int:
        """The global step after the step (graph mode reads the variable again)."""
        if self.eager:
            return int(fetched)
        return int(run_context.session.run(self.fetch))
