"""Every name of `tf.compat.v1.train` for monitored sessions and hooks is `monsession.NAME`.

Runs in the `all` env, where every family of this repository is installed:
the names that families provide resolve lazily to the family's class.
"""

from __future__ import annotations

import json
import os
import re
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


# Parity, stated exactly: every public name of tf.compat.v1.train is either provided by
# monsession or listed in docs/migration.md with what to use instead.
_ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
PUBLIC = sorted(name for name in dir(tf.compat.v1.train) if not name.startswith("_"))


def _read(*path: str) -> str:
    with open(os.path.join(_ROOT, *path), encoding="utf-8") as stream:
        return stream.read()


def _listed() -> dict[str, str]:
    """Each name of migration.md's table of names monsession does not provide, and its row."""
    page = _read("docs", "migration.md")
    table = page.split("| `tf.compat.v1.train.` | graph mode | eager mode |\n")[1].split("\n\n")[0]
    listed: dict[str, str] = {}
    for row in table.strip().splitlines()[1:]:
        names, *alternatives = (cell.strip() for cell in row.strip("|").split("|"))
        assert len(alternatives) == 2 and all(alternatives), f"no alternative given in {row}"
        for name in re.findall(r"`(\w+)`", names):
            assert name not in listed, f"{name} is listed twice"
            listed[name] = row
    return listed


def _provided(name: str) -> bool:
    """Whether monsession gives `name` as its own object (not TensorFlow's, re-exported)."""
    if name not in dir(monsession):
        return False
    ours = getattr(monsession, name)
    return ours is not getattr(tf.compat.v1.train, name) and ours.__module__.startswith(
        "monsession"
    )


def test_every_public_name_is_provided_or_listed_with_an_alternative():
    listed = _listed()
    provided = [name for name in PUBLIC if _provided(name)]
    assert sorted(set(provided) & set(listed)) == [], "provided, yet listed as not provided"
    missing = [name for name in PUBLIC if name not in provided and name not in listed]
    assert missing == [], f"neither provided by monsession nor listed in migration.md: {missing}"
    assert sorted(set(listed) - set(PUBLIC)) == [], "listed, but not in tf.compat.v1.train"
    print(
        f"tf.compat.v1.train {tf.__version__}: {len(PUBLIC)} public names, "
        f"{len(provided)} provided by monsession, {len(listed)} listed with an alternative"
    )
    # The counts the docs state are these.
    counts = f"{len(provided)} of the {len(PUBLIC)} public names"
    assert counts in _read("docs", "migration.md")
    assert f"The other {len(listed)} are not" in _read("docs", "migration.md")
    readme = " ".join(_read("README.md").split())
    assert f"its {len(provided)} names that training loops call" in readme
    assert f"the other {len(listed)} (optimizers" in readme
    assert (len(provided), len(listed)) == (30, 89)


def test_the_migration_page_names_every_provided_name():
    """The table of provided names lists exactly the names monsession provides."""
    page = _read("docs", "migration.md")
    table = page.split("| `tf.compat.v1.train.` | monsession |")[1].split("\n\n")[0]
    named = set(re.findall(r"`(\w+)`", table)) & set(PUBLIC)
    assert named == {name for name in PUBLIC if _provided(name)}
