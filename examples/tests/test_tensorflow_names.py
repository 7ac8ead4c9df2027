"""Every name of `tf.compat.v1.train` for monitored sessions and hooks is `monsession.NAME`.

Runs in the `all` env, where every family of this repository is installed:
the names that families provide resolve lazily to the family's class.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import tensorflow as tf

import monsession
import monsession.hooks

# The TensorFlow modules whose public names monsession re-implements.
_MODULES = (
    "tensorflow.python.training.basic_session_run_hooks",
    "tensorflow.python.training.monitored_session",
    "tensorflow.python.training.session_run_hook",
)
TF_NAMES = sorted(
    name
    for name in dir(tf.compat.v1.train)
    if getattr(getattr(tf.compat.v1.train, name), "__module__", None) in _MODULES
)


def test_the_tensorflow_names_are_the_expected_ones():
    """A TensorFlow release that adds a hook makes this fail, so it gets added here."""
    assert "SummarySaverHook" in TF_NAMES and "MonitoredTrainingSession" in TF_NAMES
    assert len(TF_NAMES) == 24, TF_NAMES


@pytest.mark.parametrize("name", TF_NAMES)
def test_every_tensorflow_name_is_reachable_at_top_level(name):
    assert name in dir(monsession)
    ours = getattr(monsession, name)
    assert ours is not getattr(tf.compat.v1.train, name)
    assert ours.__module__.split(".")[0].startswith("monsession"), ours.__module__
    if name in monsession.plugins.KNOWN_HOOK_FAMILIES:
        assert ours is getattr(monsession.hooks, name)
        distribution = monsession.plugins.hook_class_entries()[name].distribution
        assert distribution == monsession.plugins.KNOWN_HOOK_FAMILIES[name]


def test_a_family_is_imported_only_when_one_of_its_names_is_used():
    code = """
    import json, sys
    import monsession
    dir(monsession)
    def loaded():
        return sorted(m for m in sys.modules if m.startswith("monsession_hooks_"))
    before = loaded()
    from monsession import NanTensorHook
    print(json.dumps([before, loaded(), NanTensorHook.__module__]))
    """
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    before, after, module = json.loads(result.stdout)
    assert before == []
    assert module == "monsession_hooks_debug._nan"
    # Discovery imports each family's registration module, never its hook modules.
    assert "monsession_hooks_debug._nan" in after
    assert "monsession_hooks_summary._summary_saver" not in after
    assert "monsession_hooks_checkpoint._checkpoint_saver" not in after
    assert "monsession_hooks_logging._logging_tensor_hook" not in after
