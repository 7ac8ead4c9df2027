"""MonitoredTrainingSession: defaults from plugins, missing families, chief and worker."""

from __future__ import annotations

import importlib.metadata
import logging

import pytest
import tensorflow as tf

import monsession
from monsession import plugins
from monsession._plugins._hookspecs import (
    ORDER_CHECKPOINT_SAVER,
    ORDER_STEP_COUNTER,
    ORDER_SUMMARY_SAVER,
    DefaultHook,
)

pytest_plugins = ["core_plugin_fixtures"]


class Named(monsession.SessionRunHook):
    def __init__(self, name, log=None):
        self.name = name
        self.log = log if log is not None else []

    def begin(self):
        self.log.append(self.name)


class FakeFamily:
    """A family plugin serving all default arguments; it records what it got."""

    def __init__(self, log):
        self.log = log
        self.settings = None

    @monsession.hookimpl
    def monsession_training_arguments(self):
        return [
            "save_checkpoint_secs",
            "save_checkpoint_steps",
            "save_summaries_steps",
            "save_summaries_secs",
            "log_step_count_steps",
        ]

    @monsession.hookimpl
    def monsession_default_hooks(self, settings):
        self.settings = settings
        # Returned out of order on purpose: the order key decides.
        return [
            DefaultHook(Named("checkpoint", self.log), ORDER_CHECKPOINT_SAVER),
            DefaultHook(Named("step_counter", self.log), ORDER_STEP_COUNTER),
            DefaultHook(Named("summary", self.log), ORDER_SUMMARY_SAVER),
        ]


def test_default_hooks_come_in_tensorflow_order(graph, register_plugin, tmp_path):
    monsession.get_or_create_global_step()
    log = []
    family = register_plugin(FakeFamily(log), "fake-family")
    with monsession.MonitoredTrainingSession(
        checkpoint_dir=str(tmp_path),
        chief_only_hooks=[Named("chief", log)],
        hooks=[Named("user", log)],
    ):
        pass
    assert log == ["chief", "step_counter", "summary", "checkpoint", "user"]
    settings = family.settings
    assert settings.save_checkpoint_secs == 600 and settings.save_checkpoint_steps is None
    assert settings.save_summaries_steps == 100 and settings.save_summaries_secs is None
    assert settings.summary_dir == str(tmp_path) and settings.is_chief
    assert settings.explicit == frozenset() and not settings.eager


def test_one_explicit_argument_disables_its_default_partner(graph, register_plugin, tmp_path):
    family = register_plugin(FakeFamily([]), "fake-family")
    with monsession.MonitoredTrainingSession(
        checkpoint_dir=str(tmp_path), save_checkpoint_steps=7, save_summaries_secs=3
    ):
        pass
    settings = family.settings
    assert (settings.save_checkpoint_steps, settings.save_checkpoint_secs) == (7, None)
    assert (settings.save_summaries_steps, settings.save_summaries_secs) == (None, 3)
    assert settings.explicit == {"save_checkpoint_steps", "save_summaries_secs"}


def test_worker_runs_only_its_hooks(graph, register_plugin):
    server = tf.distribute.Server.create_local_server()
    global_step = monsession.get_or_create_global_step()
    log = []
    family = register_plugin(FakeFamily(log), "fake-family")
    with monsession.MonitoredTrainingSession(master=server.target, is_chief=True) as chief:
        assert chief.run(global_step) == 0
        with monsession.MonitoredTrainingSession(
            master=server.target,
            is_chief=False,
            hooks=[Named("user", log)],
            chief_only_hooks=[Named("chief", log)],
            max_wait_secs=30,
        ) as worker:
            assert worker.run(global_step) == 0
    assert log.count("user") == 1 and "chief" not in log
    assert log.count("checkpoint") == 1, "default hooks were built for the chief only"
    assert family.settings.master == server.target


def test_worker_gives_up_after_max_wait_secs(graph):
    server = tf.distribute.Server.create_local_server()
    monsession.get_or_create_global_step()
    with pytest.raises(tf.errors.DeadlineExceededError):
        monsession.MonitoredTrainingSession(master=server.target, is_chief=False, max_wait_secs=1)


def test_explicit_argument_of_a_missing_family_names_the_distribution(
    graph, isolated_plugins, tmp_path
):
    with pytest.raises(ImportError, match="monsession-hooks-checkpoint"):
        monsession.MonitoredTrainingSession(checkpoint_dir=str(tmp_path), save_checkpoint_steps=10)
    with pytest.raises(ImportError, match="monsession-hooks-summary"):
        monsession.MonitoredTrainingSession(checkpoint_dir=str(tmp_path), log_step_count_steps=5)
    with pytest.raises(ImportError, match=r"save_summaries_secs=3"):
        monsession.MonitoredTrainingSession(summary_dir=str(tmp_path), save_summaries_secs=3)


def _installed(distribution):
    try:
        importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def _missing_family_warnings(caplog):
    return [
        r
        for r in caplog.records
        if r.name == "monsession" and "MonitoredTrainingSession is not saving" in r.getMessage()
    ]


def test_defaults_of_missing_families_warn_once_naming_what_is_not_saved(
    graph, isolated_plugins, tmp_path, caplog
):
    global_step = monsession.get_or_create_global_step()
    increment = global_step.assign_add(3)
    scaffold = monsession.Scaffold()
    with monsession.SingularMonitoredSession(scaffold=scaffold) as sess:
        sess.run(increment)
        scaffold.saver.save(sess.raw_session(), str(tmp_path / "model.ckpt"), global_step=3)
    with caplog.at_level(logging.WARNING, logger="monsession"):
        session = monsession.MonitoredTrainingSession(
            checkpoint_dir=str(tmp_path), scaffold=scaffold, hooks=[Named("user")]
        )
        with session:
            assert session.run(global_step) == 3, "the chief restored from checkpoint_dir"
        with monsession.MonitoredTrainingSession(checkpoint_dir=str(tmp_path / "again")):
            pass
    warnings = _missing_family_warnings(caplog)
    assert [r.levelno for r in warnings] == [logging.WARNING] * 2, "once per process and family"
    checkpoints, summaries = (r.getMessage() for r in warnings)
    assert checkpoints.startswith(
        f"MonitoredTrainingSession is not saving checkpoints to {str(tmp_path)!r} "
        "(save_checkpoint_secs=600, by default): Saving checkpoints is provided by the "
        "distribution 'monsession-hooks-checkpoint', which is "
    )
    assert checkpoints.endswith(
        ". Pass save_checkpoint_secs=None to turn them off and silence this warning."
    )
    assert summaries.startswith(
        f"MonitoredTrainingSession is not saving summaries and the step rate to "
        f"{str(tmp_path)!r} (save_summaries_steps=100, log_step_count_steps=100, by "
        "default): Saving summaries and the step rate is provided by the distribution "
        "'monsession-hooks-summary', which is "
    )
    assert summaries.endswith(
        ". Pass save_summaries_steps=None, log_step_count_steps=None to turn them off and "
        "silence this warning."
    )
    for message, folder in ((checkpoints, "hooks-checkpoint"), (summaries, "hooks-summary")):
        distribution = f"monsession-{folder}"
        if _installed(distribution):  # The `all` env: installed, autoloading is off.
            assert "installed but not loaded" in message
        else:
            assert (
                f"which is not installed. Install it with: pip install {distribution} (or, "
                f"from a checkout of the monsession repository: pip install ./{folder}). "
            ) in message


def test_missing_family_warnings_name_the_directory_each_argument_writes_into(
    graph, isolated_plugins, tmp_path, caplog
):
    monsession.get_or_create_global_step()
    checkpoints, summaries = str(tmp_path / "checkpoints"), str(tmp_path / "summaries")
    with caplog.at_level(logging.WARNING, logger="monsession"):
        # Only summaries: save_checkpoint_secs has no directory, so it saves nothing.
        with monsession.MonitoredTrainingSession(summary_dir=summaries):
            pass
        only_summaries = [r.getMessage() for r in _missing_family_warnings(caplog)]
        plugins.reset_plugin_manager()  # Forget what was warned.
        caplog.clear()
        with monsession.MonitoredTrainingSession(checkpoint_dir=checkpoints, summary_dir=summaries):
            pass
    assert len(only_summaries) == 1
    assert only_summaries[0].startswith(
        f"MonitoredTrainingSession is not saving summaries and the step rate to {summaries!r} "
    )
    both = sorted(r.getMessage() for r in _missing_family_warnings(caplog))
    assert [message.split(" (")[0] for message in both] == [
        f"MonitoredTrainingSession is not saving checkpoints to {checkpoints!r}",
        f"MonitoredTrainingSession is not saving summaries and the step rate to {summaries!r}",
    ]


def test_a_checkpoint_dir_nothing_will_write_is_not_created(program, isolated_plugins, tmp_path):
    """Core alone: no family saves checkpoints or summaries, so no folder appears."""
    directory = tmp_path / "run"
    with monsession.MonitoredTrainingSession(checkpoint_dir=str(directory)) as session:
        session.run(program.step)
    assert not directory.exists()


def test_defaults_turned_off_give_no_missing_family_warning(
    graph, isolated_plugins, tmp_path, caplog
):
    monsession.get_or_create_global_step()
    with caplog.at_level(logging.WARNING, logger="monsession"):
        with monsession.MonitoredTrainingSession(
            checkpoint_dir=str(tmp_path),
            save_checkpoint_secs=None,
            save_summaries_steps=None,
            log_step_count_steps=None,
        ):
            pass
    assert _missing_family_warnings(caplog) == []


def test_arguments_that_ask_for_nothing_are_not_errors(graph, isolated_plugins):
    monsession.get_or_create_global_step()
    # No directory: TensorFlow would add no hook either, so nothing is missing.
    with monsession.MonitoredTrainingSession(save_checkpoint_steps=10, log_step_count_steps=5):
        pass
    with monsession.MonitoredTrainingSession(
        checkpoint_dir=None, save_checkpoint_secs=0, save_summaries_steps=None
    ):
        pass


class Saver(monsession.SessionRunHook):
    """A hook kind that a family adds by default and a user may pass too."""


class MySaver(Saver):
    pass


class SaverFamily:
    """A family adding a `Saver`, declaring the arguments that turn it on; and a `Named`."""

    @monsession.hookimpl
    def monsession_training_arguments(self):
        return ["save_checkpoint_secs", "save_checkpoint_steps"]

    @monsession.hookimpl
    def monsession_default_hooks(self, settings):
        arguments = ("save_checkpoint_secs", "save_checkpoint_steps")
        hooks = [DefaultHook(Named("undeclared"), ORDER_CHECKPOINT_SAVER)]
        if settings.save_checkpoint_secs or settings.save_checkpoint_steps:
            hooks.append(DefaultHook(Saver(), ORDER_CHECKPOINT_SAVER, arguments=arguments))
        return hooks


def _same_kind_warnings(caplog):
    return [m for m in caplog.messages if "your hooks include a" in m]


def test_user_hook_of_a_default_hooks_kind_warns_once_naming_the_arguments(
    graph, register_plugin, tmp_path, caplog
):
    monsession.get_or_create_global_step()
    register_plugin(SaverFamily(), "savers")
    log = []
    with caplog.at_level(logging.WARNING, logger="monsession"):
        for user_hooks in ([MySaver(), Named("user", log)], [Saver()]):
            session = monsession.MonitoredTrainingSession(
                checkpoint_dir=str(tmp_path), hooks=user_hooks
            )
            with session:
                pass
    assert _same_kind_warnings(caplog) == [
        "MonitoredTrainingSession: your hooks include a Saver and the default Saver "
        "(save_checkpoint_secs=600) is on too; both run, as in TensorFlow, and save the same "
        "things twice. To keep only yours, pass save_checkpoint_secs=None, "
        "save_checkpoint_steps=None."
    ]
    assert log == ["user"], "both kept; a default without arguments is not checked"


def test_chief_only_hook_of_a_default_hooks_kind_warns_too(
    graph, register_plugin, tmp_path, caplog
):
    monsession.get_or_create_global_step()
    register_plugin(SaverFamily(), "savers")
    with caplog.at_level(logging.WARNING, logger="monsession"):
        with monsession.MonitoredTrainingSession(
            checkpoint_dir=str(tmp_path), save_checkpoint_steps=5, chief_only_hooks=[Saver()]
        ):
            pass
    [warning] = _same_kind_warnings(caplog)
    assert "the default Saver (save_checkpoint_steps=5) is on too" in warning


def test_hooks_of_other_kinds_do_not_warn(graph, register_plugin, tmp_path, caplog):
    monsession.get_or_create_global_step()
    register_plugin(SaverFamily(), "savers")
    with caplog.at_level(logging.WARNING, logger="monsession"):
        with monsession.MonitoredTrainingSession(
            checkpoint_dir=str(tmp_path), hooks=[Named("user"), monsession.StopAtStepHook(5)]
        ):
            pass
        # The default is off: a user hook of its kind is alone.
        with monsession.MonitoredTrainingSession(
            checkpoint_dir=str(tmp_path), save_checkpoint_secs=None, hooks=[Saver()]
        ):
            pass
    assert _same_kind_warnings(caplog) == []


def test_default_hooks_see_eager_mode(register_plugin):
    tf.compat.v1.reset_default_graph()
    family = register_plugin(FakeFamily([]), "fake-family")
    with monsession.MonitoredTrainingSession():
        pass
    assert family.settings.eager
