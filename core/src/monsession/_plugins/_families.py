"""This project's own hook families, and what to tell a user who lacks one.

`KNOWN_HOOK_FAMILIES` and `KNOWN_ARGUMENTS` name the classes and
`MonitoredTrainingSession` arguments that the families shipped from this
repository provide, so that a missing one gets an install hint. The `all`
tox env checks them against the families' registrations
(examples/tests/test_known_families.py). Nothing here imports TensorFlow.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
from typing import Literal

from monsession._plugins._hookspecs import TrainingSettings
from monsession._plugins._plugin_manager import CORE_DISTRIBUTION, discovery, normalize
from monsession._plugins._plugin_types import ENV_DISABLE_AUTOLOAD, ENV_DISABLED_PLUGINS

KNOWN_HOOK_FAMILIES: dict[str, str] = {
    "CheckpointSaverHook": "monsession-hooks-checkpoint",
    "CheckpointSaverListener": "monsession-hooks-checkpoint",
    "SummarySaverHook": "monsession-hooks-summary",
    "StepCounterHook": "monsession-hooks-summary",
    "SummaryWriterCache": "monsession-hooks-summary",
    "LoggingTensorHook": "monsession-hooks-logging",
    "ProgressBarHook": "monsession-hooks-logging",
    "NanTensorHook": "monsession-hooks-debug",
    "NanLossDuringTrainingError": "monsession-hooks-debug",
    "ProfilerHook": "monsession-hooks-debug",
    "HookTimingHook": "monsession-hooks-debug",
    "KerasCallbacksHook": "monsession-hooks-keras",
    "MlflowHook": "monsession-hooks-mlflow",
}
"""{class name: distribution} of this project's families' classes (for install hints)."""

NOT_HOOKS: dict[str, str] = {
    "HooksCallback": (
        "a Keras callback (it runs monsession hooks inside model.fit), not a hook: "
        "`from monsession_hooks_keras import HooksCallback` (pip install monsession-hooks-keras)"
    ),
}
"""{name: where it lives} of this project's classes that `monsession.hooks` does not hold."""


@dataclasses.dataclass(frozen=True)
class KnownArgument:
    """A `MonitoredTrainingSession` argument that one of this project's families serves.

    Args:
      distribution: The family that serves it.
      directory: The `TrainingSettings` directory its default hook writes into.
      saves: What that hook saves, for messages (e.g. ``"checkpoints"``).
    """

    distribution: str
    directory: Literal["checkpoint_dir", "summary_dir"]
    saves: str

    def directory_in(self, settings: TrainingSettings) -> str | None:
        """The directory its default hook would write into under `settings`."""
        if self.directory == "checkpoint_dir":
            return settings.checkpoint_dir
        return settings.summary_dir


_CHECKPOINTS = KnownArgument("monsession-hooks-checkpoint", "checkpoint_dir", "checkpoints")
_SUMMARIES = KnownArgument("monsession-hooks-summary", "summary_dir", "summaries")
KNOWN_ARGUMENTS: dict[str, KnownArgument] = {
    "save_checkpoint_secs": _CHECKPOINTS,
    "save_checkpoint_steps": _CHECKPOINTS,
    "save_summaries_steps": _SUMMARIES,
    "save_summaries_secs": _SUMMARIES,
    "log_step_count_steps": KnownArgument(
        "monsession-hooks-summary", "summary_dir", "the step rate"
    ),
}
"""{`MonitoredTrainingSession` argument: who serves it and where it writes}."""

KNOWN_ARGUMENT_FAMILIES: dict[str, str] = {
    argument: known.distribution for argument, known in KNOWN_ARGUMENTS.items()
}
"""{`MonitoredTrainingSession` argument: distribution} of this project's families."""

# This repository's distributions: their folder in a checkout is the name
# without "monsession-" (install hints give that form too).
_OWN_DISTRIBUTIONS = frozenset(
    {CORE_DISTRIBUTION, *KNOWN_HOOK_FAMILIES.values(), *KNOWN_ARGUMENT_FAMILIES.values()}
)


def install_commands(distribution: str, upgrade: bool = False) -> str:
    """Returns how to install `distribution`: from the package index, and from a checkout.

    The checkout form is given for this repository's own distributions (their
    folder is the name without ``monsession-``, e.g. ``./hooks-summary``).

    Args:
      distribution: A distribution name, e.g. ``"monsession-hooks-summary"``.
      upgrade: Whether the distribution is installed and must be upgraded.

    Returns:
      E.g. ``"pip install monsession-hooks-summary (or, from a checkout of the
      monsession repository: pip install ./hooks-summary)"``.
    """
    index = f"pip install --upgrade {distribution}" if upgrade else f"pip install {distribution}"
    if distribution not in _OWN_DISTRIBUTIONS:
        return index
    checkout = "an up-to-date checkout" if upgrade else "a checkout"
    folder = distribution.removeprefix("monsession-")
    return f"{index} (or, from {checkout} of the monsession repository: pip install ./{folder})"


def missing_family_message(what: str, distribution: str) -> str:
    """Returns why `distribution`, which provides `what`, is unavailable, and the fix.

    Args:
      what: What the user asked for, e.g. ``"SummarySaverHook"``.
      distribution: The distribution that provides it.
    """
    found = discovery()
    wanted = normalize(distribution)
    provided = f"{what} is provided by the distribution '{distribution}'"
    for failure in found.failures:
        if normalize(failure.source.distribution or "") == wanted:
            return f"{provided}, but {failure.message[0].lower()}{failure.message[1:]}"
    for source in found.blocked:
        if normalize(source.distribution or "") == wanted:
            return (
                f"{provided}, whose plugin '{source.name}' is blocked by "
                f"{ENV_DISABLED_PLUGINS}; remove it from that variable to use it."
            )
    try:
        importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return (
            f"{provided}, which is not installed. Install it with: {install_commands(distribution)}"
        )
    if not found.autoload:
        return (
            f"{provided}, which is installed but not loaded because {ENV_DISABLE_AUTOLOAD} "
            "is set; unset it, or register the plugin with get_plugin_manager().register(...)."
        )
    return (
        f"{provided}, which is installed but does not provide it; upgrade it with: "
        + install_commands(distribution, upgrade=True)
    )
