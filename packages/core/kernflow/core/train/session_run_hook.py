"""`kf.train.SessionRunHook` and the values it exchanges with a `MonitoredSession` (TF1).

A hook sees a monitored session's life: `begin` before the graph is finalized (the last chance to
add ops), `after_create_session` each time a session is created (again after a recovery), then
around every `run` call `before_run` (which may ask for extra fetches, feeds and run options) and
`after_run` (which gets the values it asked for), and `end` when the session closes normally.

Example::

    class LossLogger(kf.train.SessionRunHook):
        def before_run(self, run_context):
            return kf.train.SessionRunArgs(loss)

        def after_run(self, run_context, run_values):
            if run_values.results > 100:
                run_context.request_stop()
"""

from __future__ import annotations

import collections

__all__ = ["SessionRunHook", "SessionRunArgs", "SessionRunContext", "SessionRunValues"]


class SessionRunHook:
    """Hook to extend calls to `MonitoredSession.run()`; every method is a no-op by default."""

    def begin(self):
        """Called once before the session is used; the graph may still be changed here."""

    def after_create_session(self, session, coord):
        """Called when a new session was created and initialized (also after a recovery).

        The graph is finalized by then, so no op can be added.

        Args:
            session: the new `Session` (the raw one, without hooks).
            coord: the `Coordinator` of its threads (queue runners).
        """

    def before_run(self, run_context):
        """Called before each `run()`; may return a `SessionRunArgs` to add to the call.

        Args:
            run_context: a `SessionRunContext` (the caller's fetches and feeds, the session).

        Returns:
            None or a `SessionRunArgs`.
        """
        return None

    def after_run(self, run_context, run_values):
        """Called after each successful `run()` with the values this hook asked for.

        Not called when `run()` raised.

        Args:
            run_context: the `SessionRunContext` given to `before_run`.
            run_values: a `SessionRunValues`.
        """

    def end(self, session):
        """Called when the session is closed without an error (may still run ops in `session`).

        Not called when an exception leaves the monitored session, except OutOfRangeError and
        StopIteration (the input is exhausted), which count as a normal end.
        """


class SessionRunArgs(collections.namedtuple("SessionRunArgs", ["fetches", "feed_dict", "options"])):
    """What a hook adds to a `run()` call.

    Args:
        fetches: anything `Session.run` accepts as fetches, or None.
        feed_dict: {tensor: value} to add to the call's feeds, or None.
        options: a `RunOptions` merged into the call's options (the larger value of each field).
    """

    def __new__(cls, fetches, feed_dict=None, options=None):
        return super().__new__(cls, fetches, feed_dict, options)


class SessionRunContext:
    """The `run()` call a hook is invoked for.

    Args:
        original_args: the caller's `SessionRunArgs` (fetches and feed_dict).
        session: the raw `Session` the call runs in; a hook may run other ops in it.
    """

    def __init__(self, original_args, session):
        self._original_args = original_args
        self._session = session
        self._stop_requested = False

    @property
    def original_args(self):
        """The caller's `SessionRunArgs` (before hooks added theirs)."""
        return self._original_args

    @property
    def session(self):
        """The raw `Session`."""
        return self._session

    @property
    def stop_requested(self) -> bool:
        """True once a hook called `request_stop()`."""
        return self._stop_requested

    def request_stop(self) -> None:
        """Asks the monitored session to stop: its `should_stop()` is True after this call."""
        self._stop_requested = True


class SessionRunValues(collections.namedtuple("SessionRunValues",
                                              ["results", "options", "run_metadata"])):
    """What a hook gets back after `run()`.

    Attributes:
        results: the values of the hook's `SessionRunArgs.fetches` (same structure), or None.
        options: the `RunOptions` the call ran with (hooks' options merged).
        run_metadata: the `RunMetadata` of the call.
    """
