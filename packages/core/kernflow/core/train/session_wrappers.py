"""The session wrappers a `MonitoredSession` is built from (TF1's monitored_session internals).

A monitored session's `run` goes through, outermost first:

- `_RecoverableSession` (MonitoredSession only): on AbortedError or UnavailableError closes the
  session, creates a new one through the session creator (which restores the latest checkpoint,
  or waits for the chief) and re-issues the failed call, hooks included.
- `_CoordinatedSession`: owns the `Coordinator` of the queue-runner threads; `should_stop` raises
  an error a thread reported, `close` stops and joins the threads first.
- `_HookedSession`: calls the hooks' `before_run`, runs the caller's fetches merged with the hooks'
  (one `Session.run`), calls `after_run`, and stops once a hook requested it.

Invariants: `_sess` is None only after `close()` (or, in `_RecoverableSession`, between a failure
and the next session); each wrapper's `should_stop` is its own condition or the inner wrapper's.
"""

from __future__ import annotations

import logging

from kernflow.core.framework import errors
from kernflow.core.protobuf import config_pb2
from kernflow.core.train.session_run_hook import SessionRunArgs, SessionRunContext, SessionRunValues

_new_tuple = tuple.__new__

_log = logging.getLogger(__name__)

PREEMPTION_ERRORS = (errors.AbortedError, errors.UnavailableError)

_RUN_OPTION_FIELDS = ("trace_level", "timeout_in_ms", "inter_op_thread_pool", "output_partition_graphs",
                      "report_tensor_allocations_upon_oom")

_RECOVERY_HINT = ("This error may also occur due to a gRPC failure caused by high memory or network "
                  "bandwidth usage in the parameter servers. If this error occurs repeatedly, try "
                  "increasing the number of parameter servers assigned to the job.")


class StepContext:
    """What `MonitoredSession.run_step_fn` hands to the step function.

    Args:
        session: the raw `Session` (runs without hooks).
        run_with_hooks_fn: the monitored `run` (runs with hooks).
    """

    def __init__(self, session, run_with_hooks_fn):
        self._session = session
        self._run_with_hooks_fn = run_with_hooks_fn

    @property
    def session(self):
        """The raw `Session`."""
        return self._session

    def run_with_hooks(self, *args, **kwargs):
        """`MonitoredSession.run`: a step with the hooks called around it."""
        return self._run_with_hooks_fn(*args, **kwargs)

    def request_stop(self):
        """Ends the iterations: raises StopIteration, which the monitored session's `with` absorbs.

        Raises:
            StopIteration: always.
        """
        raise StopIteration("step_fn has requested the iterations to stop.")


class _WrappedSession:
    """Forwards to a wrapped session; subclasses add a stop condition (`_check_stop`)."""

    def __init__(self, sess):
        self._sess = sess
        self._wrapped_is_stoppable = isinstance(sess, _WrappedSession)

    @property
    def graph(self):
        return self._sess.graph

    @property
    def sess_str(self):
        return self._sess.sess_str

    def should_stop(self) -> bool:
        if self._check_stop():
            return True
        if self._sess:
            return self._wrapped_is_stoppable and self._sess.should_stop()
        return True

    def _check_stop(self) -> bool:
        raise NotImplementedError

    def close(self) -> None:
        if self._sess:
            try:
                self._sess.close()
            except PREEMPTION_ERRORS as e:
                _log.error("An error occurred when attempting to close the session. This may be due "
                           "to a preemption in a connected worker or parameter server. Error: %s", e)
            finally:
                self._sess = None

    def run(self, *args, **kwargs):
        return self._sess.run(*args, **kwargs)

    def run_step_fn(self, step_fn, raw_session, run_with_hooks):
        run_with_hooks = run_with_hooks or self.run
        return step_fn(StepContext(raw_session, run_with_hooks))


class RecoverableSession(_WrappedSession):
    """Recreates its session through `sess_creator` after a preemption error (see module doc).

    Args:
        sess_creator: a creator whose `create_session()` returns a `CoordinatedSession` and whose
            `tf_sess` is the raw session it made last.
    """

    def __init__(self, sess_creator):
        self._sess_creator = sess_creator
        super().__init__(self._create_session())

    def _create_session(self):
        while True:
            try:
                return self._sess_creator.create_session()
            except PREEMPTION_ERRORS as e:
                _log.info("An error was raised while a session was being created. This may be due to "
                          "a preemption of a connected worker or parameter server. A new session will "
                          "be created. %s Error: %s", _RECOVERY_HINT, e)

    def _recreate(self, e, what="An error was raised") -> None:
        _log.info("%s. This may be due to a preemption in a connected worker or parameter server. The "
                  "current session will be closed and a new session will be created. %s Error: %s",
                  what, _RECOVERY_HINT, e)
        self.close()
        self._sess = None

    def _check_stop(self) -> bool:
        try:
            return self._sess._check_stop() if self._sess else True
        except PREEMPTION_ERRORS as e:
            self._recreate(e, "An error was raised while considering whether the session is complete")
            self._sess = self._create_session()
            return False  # a new session: the computation goes on
        except Exception:  # noqa: BLE001 - should_stop answers True instead of raising, as TF
            return True

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        while True:
            try:
                if not self._sess:
                    self._sess = self._create_session()
                return self._sess.run(fetches, feed_dict=feed_dict, options=options,
                                      run_metadata=run_metadata)
            except PREEMPTION_ERRORS as e:
                self._recreate(e)

    def run_step_fn(self, step_fn, raw_session, run_with_hooks):
        while True:
            try:
                if not self._sess:
                    self._sess = self._create_session()
                return self._sess.run_step_fn(step_fn, self._sess_creator.tf_sess, self._sess.run)
            except PREEMPTION_ERRORS as e:
                self._recreate(e)


class CoordinatedSession(_WrappedSession):
    """Stops and joins the coordinator's threads on close; surfaces their errors.

    Args:
        sess: the (hooked) session.
        coord: the `Coordinator`.
        stop_grace_period_secs: how long `close` waits for the threads.
    """

    def __init__(self, sess, coord, stop_grace_period_secs=120):
        super().__init__(sess)
        self._coord = coord
        self._stop_grace_period_secs = stop_grace_period_secs

    def _check_stop(self) -> bool:
        # An error reported by a thread is raised here, in the training loop.
        self._coord.raise_requested_exception()
        return self._coord.should_stop()

    def close(self) -> None:
        self._coord.request_stop()
        try:
            self._coord.join(stop_grace_period_secs=self._stop_grace_period_secs,
                             ignore_live_threads=True)
        finally:
            try:
                _WrappedSession.close(self)
            except Exception:  # noqa: BLE001 - join() already reported the useful error
                pass

    def run(self, *args, **kwargs):
        try:
            return self._sess.run(*args, **kwargs)
        except PREEMPTION_ERRORS:
            raise
        except Exception:
            # A preemption error a thread reported is the root cause: raise it instead.
            try:
                self._coord.raise_requested_exception()
            except PREEMPTION_ERRORS:
                raise
            except Exception:  # noqa: BLE001 - not a preemption: keep the original error
                pass
            raise


class HookedSession(_WrappedSession):
    """Calls the hooks around every `run` (see module doc).

    Args:
        sess: the raw `Session`.
        hooks: the `SessionRunHook`s, in call order.
    """

    def __init__(self, sess, hooks):
        super().__init__(sess)
        self._hooks = hooks
        self._should_stop = False
        # What after_run gets on a step that runs without options (neither the caller nor a hook
        # asked for any, the usual step): empty protos shared by those steps, which hooks only
        # read (two fewer messages a step; a step with options gets its own).
        self._no_options = config_pb2.RunOptions()
        self._no_metadata = config_pb2.RunMetadata()

    def _check_stop(self) -> bool:
        return self._should_stop

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        if self._should_stop or self._sess is None:   # (should_stop(): the raw session stops not)
            raise RuntimeError("Run called even after should_stop requested.")
        # (tuple.__new__: the namedtuples' keyword constructors cost a microsecond each, per step)
        run_context = SessionRunContext(_new_tuple(SessionRunArgs, (fetches, feed_dict, None)), self._sess)
        # The caller's fetches first, then each hook's request (a list: cheaper to key and to
        # rebuild every step than a dict keyed by the hooks); slots[i]: hook i's index in it.
        actual_fetches = [fetches]
        slots = []
        hook_feeds = merged_options = None
        for hook in self._hooks:
            request = hook.before_run(run_context)
            if request is None:
                slots.append(None)
                continue
            if request.fetches is None:
                slots.append(None)
            else:
                slots.append(len(actual_fetches))
                actual_fetches.append(request.fetches)
            if request.feed_dict:
                if hook_feeds is None:
                    hook_feeds = {}
                _raise_if_feeds_intersect(hook_feeds, request.feed_dict, "Same tensor is fed by two hooks.")
                hook_feeds.update(request.feed_dict)
            if request.options:
                if merged_options is None:
                    merged_options = _copy_options(options)
                _merge_run_options(merged_options, request.options)
        if hook_feeds:
            if feed_dict:
                _raise_if_feeds_intersect(feed_dict, hook_feeds,
                                          "Same tensor is fed by a SessionRunHook and user.")
                hook_feeds.update(feed_dict)
            feed_dict = hook_feeds
        if merged_options is None and options is not None:
            merged_options = _copy_options(options)
        if merged_options is None:
            # No options: nothing to trace or return in the metadata, and the hooks get empty
            # ones, as TF's would be.
            outputs = self._sess.run(actual_fetches, feed_dict, None, run_metadata)
            values_options = self._no_options
            values_metadata = self._no_metadata if run_metadata is None else run_metadata
        else:
            values_options = merged_options
            values_metadata = config_pb2.RunMetadata() if run_metadata is None else run_metadata
            outputs = self._sess.run(actual_fetches, feed_dict, merged_options, values_metadata)
        for hook, slot in zip(self._hooks, slots):
            hook.after_run(run_context, _new_tuple(SessionRunValues, (
                None if slot is None else outputs[slot], values_options, values_metadata)))
        if run_context._stop_requested:
            self._should_stop = True
        return outputs[0]


def _copy_options(options):
    """A new RunOptions with `options`' fields (empty for None)."""
    out = config_pb2.RunOptions()
    if options is not None:
        out.CopyFrom(options)
    return out


def _feed_name(key):
    """A feed key (tensor or name) as a tensor name, so that both spellings conflict."""
    name = key if isinstance(key, str) else getattr(key, "name", None)
    if not isinstance(name, str):
        return key
    return name if ":" in name else name + ":0"


def _raise_if_feeds_intersect(feeds1, feeds2, message) -> None:
    names1 = {_feed_name(k): k for k in feeds1}
    conflicts = [k for k in feeds2 if _feed_name(k) in names1]
    if conflicts:
        raise RuntimeError(f"{message} Conflict(s): {[getattr(k, 'name', k) for k in conflicts]}")


def _merge_run_options(options, incoming) -> None:
    """Takes, field by field, the larger of the two RunOptions values into `options`."""
    for field in _RUN_OPTION_FIELDS:
        setattr(options, field, max(getattr(options, field), getattr(incoming, field)))
