"""`kf.train.MonitoredSession`, `MonitoredTrainingSession` and the session creators (TF1).

Creating a monitored session, in order: each hook's `begin()`; `scaffold.finalize()` (the graph
becomes read-only); a session from the creator (the chief restores the latest checkpoint or runs
the init ops, a worker waits until the model is ready); queue runners started on a `Coordinator`;
each hook's `after_create_session()`. `run()` calls the hooks around one merged `Session.run`
(session_wrappers.py). A MonitoredSession recovers from AbortedError and UnavailableError by
creating a new session and re-issuing the call; a SingularMonitoredSession does not. `close()`
calls each hook's `end()` (not when an exception leaves the `with` block, except OutOfRangeError
and StopIteration, which the `with` absorbs), stops the threads and closes the session; the graph
is unfinalized again if it was not finalized before.

Example::

    global_step = kf.train.get_or_create_global_step()
    train_op = kf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
    with kf.train.MonitoredTrainingSession(checkpoint_dir="/tmp/run",
                                           hooks=[kf.train.StopAtStepHook(last_step=1000)]) as sess:
        while not sess.should_stop():
            sess.run(train_op)
"""

from __future__ import annotations

import inspect

from kernflow.core.framework import errors
from kernflow.core.framework import ops as _ops
from kernflow.core.train import basic_session_run_hooks as _hooks
from kernflow.core.train.coordinator import Coordinator
from kernflow.core.train.queue_runner import start_queue_runners
from kernflow.core.train.scaffold import Scaffold
from kernflow.core.train.session_manager import SessionManager
from kernflow.core.train.session_wrappers import (CoordinatedSession, HookedSession,
                                                  RecoverableSession, StepContext)

__all__ = ["SessionCreator", "ChiefSessionCreator", "WorkerSessionCreator", "MonitoredSession",
           "SingularMonitoredSession", "MonitoredTrainingSession"]

# The default of the save_* arguments of MonitoredTrainingSession ("not given").
USE_DEFAULT = object()


# ---------------------------------------------------------------------------- session creators
class SessionCreator:
    """Creates a `Session` for a monitored session (subclasses implement `create_session`)."""

    def create_session(self):
        """Returns a new, initialized `Session`."""
        raise NotImplementedError(f"create_session is not implemented for {self}.")


class _ScaffoldSessionCreator(SessionCreator):
    """A creator that finalizes a scaffold and uses a SessionManager built from its ops."""

    # SessionManager's recovery_wait_secs (TF's default); tests may lower it per instance.
    _recovery_wait_secs = 30

    def __init__(self, scaffold, master, config):
        self._scaffold = scaffold or Scaffold()
        self._session_manager = None
        self._master = master
        self._config = config

    def _get_session_manager(self):
        if self._session_manager is None:
            s = self._scaffold
            self._session_manager = SessionManager(
                local_init_op=s.local_init_op, ready_op=s.ready_op,
                ready_for_local_init_op=s.ready_for_local_init_op, graph=_ops.get_default_graph(),
                recovery_wait_secs=self._recovery_wait_secs, local_init_feed_dict=s.local_init_feed_dict)
        return self._session_manager


class ChiefSessionCreator(_ScaffoldSessionCreator):
    """Creates a session for the chief: restores the latest checkpoint or initializes the model.

    Args:
        scaffold: a `Scaffold` (default: a new one).
        master: the session target.
        config: the session's `ConfigProto`.
        checkpoint_dir: the directory whose latest checkpoint is restored.
        checkpoint_filename_with_path: a checkpoint prefix to restore instead.
    """

    def __init__(self, scaffold=None, master="", config=None, checkpoint_dir=None,
                 checkpoint_filename_with_path=None):
        super().__init__(scaffold, master, config)
        self._checkpoint_dir = checkpoint_dir
        self._checkpoint_filename_with_path = checkpoint_filename_with_path

    def create_session(self):
        self._scaffold.finalize()
        s = self._scaffold
        return self._get_session_manager().prepare_session(
            self._master, saver=s.saver, checkpoint_dir=self._checkpoint_dir,
            checkpoint_filename_with_path=self._checkpoint_filename_with_path, config=self._config,
            init_op=s.init_op, init_feed_dict=s.init_feed_dict, init_fn=s.init_fn)


class WorkerSessionCreator(_ScaffoldSessionCreator):
    """Creates a session for a non-chief worker: waits until the chief has initialized the model.

    Args:
        scaffold: a `Scaffold` (default: a new one).
        master: the session target (shared with the chief, e.g. a cluster's grpc:// target).
        config: the session's `ConfigProto`.
        max_wait_secs: how long to wait (DeadlineExceededError afterwards).
    """

    def __init__(self, scaffold=None, master="", config=None, max_wait_secs=30 * 60):
        super().__init__(scaffold, master, config)
        self._max_wait_secs = max_wait_secs

    def create_session(self):
        self._scaffold.finalize()
        return self._get_session_manager().wait_for_session(self._master, config=self._config,
                                                            max_wait_secs=self._max_wait_secs)


class _CoordinatedSessionCreator(SessionCreator):
    """Creates the raw session, starts its queue runners and tells the hooks; `tf_sess` and
    `coord` are those of the session made last."""

    def __init__(self, session_creator, hooks, stop_grace_period_secs, graph):
        self._session_creator = session_creator
        self._hooks = hooks
        self._stop_grace_period_secs = stop_grace_period_secs
        self._graph = graph
        self.coord = None
        self.tf_sess = None

    def create_session(self):
        with self._graph.as_default():
            self.tf_sess = self._session_creator.create_session()
            # The coordinator must not swallow any error (OutOfRange included).
            self.coord = Coordinator(clean_stop_exception_types=[])
            if self._graph.get_collection(_ops.GraphKeys.QUEUE_RUNNERS):
                start_queue_runners(sess=self.tf_sess, coord=self.coord)
            for hook in self._hooks:
                hook.after_create_session(self.tf_sess, self.coord)
        return CoordinatedSession(HookedSession(self.tf_sess, self._hooks), self.coord,
                                  self._stop_grace_period_secs)


# ---------------------------------------------------------------------------- monitored sessions
class _MonitoredSession:
    """The shared part of MonitoredSession and SingularMonitoredSession (see module doc)."""

    StepContext = StepContext

    def __init__(self, session_creator, hooks, should_recover, stop_grace_period_secs=120):
        self._graph = _ops.get_default_graph()
        self._graph_was_finalized = self._graph.finalized
        self._hooks = list(hooks or [])
        self._sess = None
        try:
            with self._graph.as_default():
                for hook in self._hooks:
                    hook.begin()
            self._coordinated_creator = _CoordinatedSessionCreator(
                session_creator or ChiefSessionCreator(), self._hooks, stop_grace_period_secs,
                self._graph)
            if should_recover:
                self._sess = RecoverableSession(self._coordinated_creator)
            else:
                self._sess = self._coordinated_creator.create_session()
        except BaseException:
            self._unfinalize()
            raise

    @property
    def graph(self):
        """The graph the session runs."""
        return self._tf_sess().graph

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        """Runs `fetches` like `Session.run`, calling the hooks around the call.

        Raises:
            RuntimeError: called after `should_stop()` became True, or a hook and the caller feed
                the same tensor.
        """
        return self._sess.run(fetches, feed_dict=feed_dict, options=options, run_metadata=run_metadata)

    def run_step_fn(self, step_fn):
        """Runs `step_fn(step_context)`, recovering (MonitoredSession) as `run` does.

        `step_context.session` is the raw session, `step_context.run_with_hooks(...)` a monitored
        run, and `step_context.request_stop()` raises StopIteration to end the loop.

        Returns:
            What `step_fn` returns.

        Raises:
            ValueError: `step_fn` does not take exactly a `step_context` argument.
            StopIteration: `step_fn` called `request_stop()`.
        """
        names = tuple(inspect.signature(step_fn).parameters)  # a bound method's `self` is left out
        if names not in (("step_context",), ("self", "step_context")):
            raise ValueError("`step_fn` may either have one `step_context` argument, or `self` and "
                             f"`step_context` arguments if it's an instance method. Got {names} instead.")
        return self._sess.run_step_fn(step_fn, self._tf_sess(), run_with_hooks=None)

    def should_stop(self) -> bool:
        """True once a hook requested a stop, a thread failed, or the session is closed."""
        return self._sess is None or self._sess.should_stop()

    def close(self) -> None:
        """Calls the hooks' `end()`, stops the threads and closes the session.

        Raises:
            RuntimeError: the session is already closed.
        """
        self._close_internal()

    def __enter__(self):
        return self

    def __exit__(self, exception_type, exception_value, traceback):
        if exception_type in (errors.OutOfRangeError, StopIteration):
            exception_type = None
        self._close_internal(exception_type)
        return exception_type is None

    def _close_internal(self, exception_type=None):
        try:
            if not exception_type:
                with self._graph.as_default():
                    for hook in self._hooks:
                        hook.end(self._coordinated_creator.tf_sess)
        finally:
            try:
                if self._sess is None:
                    raise RuntimeError("Session is already closed.")
                self._sess.close()
            finally:
                self._sess = None
                self._coordinated_creator.tf_sess = None
                self._coordinated_creator.coord = None
                self._unfinalize()

    def _unfinalize(self) -> None:
        if not self._graph_was_finalized:
            self._graph._unsafe_unfinalize()

    def _is_closed(self) -> bool:
        return self._sess is None

    def _tf_sess(self):
        return self._coordinated_creator.tf_sess


class MonitoredSession(_MonitoredSession):
    """A session that initializes or restores the model, calls hooks and recovers from errors.

    On AbortedError or UnavailableError (a preempted worker or parameter server) it closes the
    session, creates a new one through `session_creator` (restoring the latest checkpoint) and
    re-issues the failed `run` call.

    Args:
        session_creator: a `SessionCreator` (default: `ChiefSessionCreator()`).
        hooks: `SessionRunHook`s.
        stop_grace_period_secs: how long `close()` waits for the threads to stop.
    """

    def __init__(self, session_creator=None, hooks=None, stop_grace_period_secs=120):
        super().__init__(session_creator, hooks, should_recover=True,
                         stop_grace_period_secs=stop_grace_period_secs)


class SingularMonitoredSession(_MonitoredSession):
    """A `MonitoredSession` for a single process: always the chief, no recovery from errors.

    Args:
        hooks: `SessionRunHook`s.
        scaffold: a `Scaffold`.
        master: the session target.
        config: the session's `ConfigProto`.
        checkpoint_dir: the directory whose latest checkpoint is restored.
        stop_grace_period_secs: how long `close()` waits for the threads to stop.
        checkpoint_filename_with_path: a checkpoint prefix to restore instead.
    """

    def __init__(self, hooks=None, scaffold=None, master="", config=None, checkpoint_dir=None,
                 stop_grace_period_secs=120, checkpoint_filename_with_path=None):
        creator = ChiefSessionCreator(scaffold=scaffold, master=master, config=config,
                                      checkpoint_dir=checkpoint_dir,
                                      checkpoint_filename_with_path=checkpoint_filename_with_path)
        super().__init__(creator, hooks, should_recover=False,
                         stop_grace_period_secs=stop_grace_period_secs)

    def raw_session(self):
        """The underlying `Session` (runs without hooks)."""
        return self._tf_sess()


# ---------------------------------------------------------------------------- MonitoredTrainingSession
def _resolve_pair(steps, secs, default_steps, default_secs):
    """TF's USE_DEFAULT rules: both defaulted -> the defaults; one given -> the other is None."""
    if steps is USE_DEFAULT and secs is USE_DEFAULT:
        return default_steps, default_secs
    return (None if steps is USE_DEFAULT else steps), (None if secs is USE_DEFAULT else secs)


def _chief_hooks(scaffold, checkpoint_dir, summary_dir, log_step_count_steps, save_summaries_steps,
                 save_summaries_secs, save_checkpoint_steps, save_checkpoint_secs, save_graph_def):
    hooks = []
    if summary_dir and log_step_count_steps and log_step_count_steps > 0:
        hooks.append(_hooks.StepCounterHook(output_dir=summary_dir, every_n_steps=log_step_count_steps))
    if summary_dir and ((save_summaries_steps and save_summaries_steps > 0)
                        or (save_summaries_secs and save_summaries_secs > 0)):
        hooks.append(_hooks.SummarySaverHook(scaffold=scaffold, save_steps=save_summaries_steps,
                                             save_secs=save_summaries_secs, output_dir=summary_dir))
    if checkpoint_dir and ((save_checkpoint_secs and save_checkpoint_secs > 0)
                           or (save_checkpoint_steps and save_checkpoint_steps > 0)):
        hooks.append(_hooks.CheckpointSaverHook(checkpoint_dir, save_steps=save_checkpoint_steps,
                                                save_secs=save_checkpoint_secs, scaffold=scaffold,
                                                save_graph_def=save_graph_def))
    return hooks


def MonitoredTrainingSession(master="", is_chief=True, checkpoint_dir=None, scaffold=None,  # noqa: N802
                             hooks=None, chief_only_hooks=None, save_checkpoint_secs=USE_DEFAULT,
                             save_summaries_steps=USE_DEFAULT, save_summaries_secs=USE_DEFAULT,
                             config=None, stop_grace_period_secs=120, log_step_count_steps=100,
                             max_wait_secs=7200, save_checkpoint_steps=USE_DEFAULT, summary_dir=None,
                             save_graph_def=True):
    """Creates a `MonitoredSession` for training.

    The chief restores the latest checkpoint of `checkpoint_dir` (or initializes the model) and
    gets, before `hooks`, `chief_only_hooks`, a `StepCounterHook` and a `SummarySaverHook` of the
    scaffold's summary op (`kf.summary.merge_all()` by default) when there is a summary directory,
    and a `CheckpointSaverHook` when there is a `checkpoint_dir`; a worker waits up to
    `max_wait_secs` for the chief to initialize the model and gets only `hooks`.

    Args:
        master: the session target.
        is_chief: whether this process initializes, restores and saves.
        checkpoint_dir: the directory to restore from and save checkpoints to.
        scaffold: a `Scaffold` (default: a new one).
        hooks: `SessionRunHook`s for every process.
        chief_only_hooks: `SessionRunHook`s for the chief only.
        save_checkpoint_secs: save every N seconds (600 when neither this nor
            save_checkpoint_steps is given; None or 0: not by time).
        save_summaries_steps: save summaries every N global steps (100 when neither this nor
            save_summaries_secs is given; None or 0: not by steps).
        save_summaries_secs: save summaries every N seconds (None or 0: not by time).
        config: the session's `ConfigProto`.
        stop_grace_period_secs: how long `close()` waits for the threads to stop.
        log_step_count_steps: log global_step/sec every N steps (None or 0: never).
        max_wait_secs: how long a worker waits for the chief.
        save_checkpoint_steps: save every N global steps.
        summary_dir: the summary directory (default: `checkpoint_dir`).
        save_graph_def: write graph.pbtxt next to the checkpoints.

    Returns:
        A `MonitoredSession`.
    """
    save_summaries_steps, save_summaries_secs = _resolve_pair(
        save_summaries_steps, save_summaries_secs, 100, None)
    save_checkpoint_steps, save_checkpoint_secs = _resolve_pair(
        save_checkpoint_steps, save_checkpoint_secs, None, 600)
    scaffold = scaffold or Scaffold()
    if not is_chief:
        creator = WorkerSessionCreator(scaffold=scaffold, master=master, config=config,
                                       max_wait_secs=max_wait_secs)
        return MonitoredSession(session_creator=creator, hooks=hooks or [],
                                stop_grace_period_secs=stop_grace_period_secs)
    creator = ChiefSessionCreator(scaffold=scaffold, checkpoint_dir=checkpoint_dir, master=master,
                                  config=config)
    all_hooks = list(chief_only_hooks or [])
    all_hooks += _chief_hooks(scaffold, checkpoint_dir, summary_dir or checkpoint_dir,
                              log_step_count_steps, save_summaries_steps, save_summaries_secs,
                              save_checkpoint_steps, save_checkpoint_secs, save_graph_def)
    all_hooks += list(hooks or [])
    return MonitoredSession(session_creator=creator, hooks=all_hooks,
                            stop_grace_period_secs=stop_grace_period_secs)
