"""Eager mode (TF2 loops): what a session does around its step functions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from monsession._backends._fetches import resolve_eager_fetch
from monsession._backends._owned_step import own_global_step_if_missing


class EagerMode:
    """`Mode` of TF2 code, run eagerly (steps are usually `tf.function`s)."""

    eager = True
    fuses_steps = True

    def build_graph(self, build: Callable[[], None]) -> None:
        """Eager mode has no graph to build."""

    def keep_graph_finalization(self) -> Callable[[], None]:
        return _keep

    def own_global_step(self) -> None:
        own_global_step_if_missing()

    def prepare_graph(self) -> None:
        """Eager mode has no graph to prepare."""

    def start_queue_runners(self, sess: Any, coord: Any) -> None:
        """Eager mode has no queue runners."""

    def check_call(self, owner: str) -> None:
        """`call(step)` is eager mode's way to run a step."""

    def resolve_fetch(self, owner: str, argument: str, target: Any) -> Any:
        return resolve_eager_fetch(owner, argument, target)


def _keep() -> None:
    """Eager mode: no graph to unfinalize."""


EAGER = EagerMode()
