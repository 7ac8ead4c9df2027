"""The fusion layer: the steps on which no hook acts run before the hooked one.

Eager mode with `steps_per_execution` other than 1. Each training run
that calls all the hooks first runs its *silent* steps, fused into one call
(`_fusion.Fusion.run_silent_steps`), then the step with the hooks; a run
that can fuse nothing may run as a *quiet* step, without the hooks, when
none acts on it (`Fusion.quiet`). The next run with the hooks tells them
how many steps ran silently (`SessionRunContext.silent_steps`).
"""

from __future__ import annotations

from collections.abc import Mapping

from monsession._backends._backend import Backend, StepSource
from monsession._backends._fused_loop import fused_function
from monsession._backends._fusion import Fusion
from monsession._session._hooked_session import HookSelection, _HookedSession
from monsession._session._session_layers import Results, RunCall, _WrappedSession


class _FusedSession(_WrappedSession[_HookedSession]):
    """Runs the silent and quiet steps of each training run around a `_HookedSession`.

    Args:
      sess: The hooked session.
      fusion: The session's `Fusion`, which plans and runs the silent steps.
      selection: The session's `HookSelection`: only training calls with all
        the hooks fuse.
    """

    def __init__(self, sess: _HookedSession, fusion: Fusion, selection: HookSelection) -> None:
        super().__init__(sess)
        self._hooked = sess
        self._fusion = fusion
        self._selection = selection
        fusion.attach(sess.backend)

    def run_call(self, call: RunCall) -> Results:
        hooked, fusion = self._hooked, self._fusion
        hooked.check_runnable()
        silent: int = 0
        kept: Mapping[str, object] | None = None
        if self._selection.fuses():
            silent, kept = fusion.run_silent_steps(call.fetches, call.feed_dict, hooked.backend)
            if not silent and _may_run_quiet(call.fetches) and fusion.quiet(hooked.backend):
                quiet = _quiet_step(_bound(call.fetches, 0), hooked.backend)
                return hooked.run_quiet(call._replace(fetches=quiet))
        fetches = _bound(call.fetches, silent)
        if fetches is None:  # The silent steps took a step source's last input.
            fusion.report_later(silent)
            return None
        # Quiet steps before this run count as silent ones for its hooks.
        silent += fusion.take_quiet_steps()
        return hooked.run_hooked(call._replace(fetches=fetches), silent, kept)


def _bound(fetches: object, silent: int) -> object:
    """The fetches to run: a `StepSource` takes its input now, after `silent` steps."""
    return fetches.bind(silent) if isinstance(fetches, StepSource) else fetches


def _quiet_step(fetches: object, backend: Backend) -> object:
    """What a quiet step runs: the `tf.function` a fused loop would run
    (`fused_function`: for a wrapper naming one in its `monsession_fused_step`,
    that function), called through its trace.

    Such a wrapper does nothing on the steps where no hook acts; a step that
    schedules closures is always run as it is.
    """
    step = fused_function(fetches)
    if step is None or step is fetches or backend.schedules_steps():
        return fetches
    return step


def _may_run_quiet(fetches: object) -> bool:
    """Whether the run may skip the hooks: not when it takes an input they must see.

    A step source's last input (an epoch's last batch) goes to the hooks
    unless the source `ends_silently` (no hook acts at the epoch's end).
    """
    if not isinstance(fetches, StepSource):
        return True
    return fetches.silent_limit >= 1 or fetches.ends_silently
