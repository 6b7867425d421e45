"""`kf.train.QueueRunner`: threads that keep running enqueue ops to fill a queue (TF1).

A `QueueRunner` holds a list of enqueue ops; `create_threads` starts one thread per op, each
running its op in a loop. When an op fails because its input ran out (a
``queue_closed_exception_types`` error, OutOfRange by default) its thread ends, and the last one
to end closes the queue, so consumers drain what is left and then get OutOfRange. With a
`Coordinator`, one more thread cancels pending enqueues once a stop is requested, and other
errors are reported to the coordinator (an error raised after the stop, by an op that blocked until
the session closed, is only logged).

Example::

    qr = kf.train.QueueRunner(queue, [enqueue_op] * 4)
    kf.train.add_queue_runner(qr)
    coord = kf.train.Coordinator()
    threads = kf.train.start_queue_runners(sess, coord)
"""

from __future__ import annotations

import logging
import threading

from kernflow.core.framework import errors
from kernflow.core.framework import ops as _ops

__all__ = ["QueueRunner", "add_queue_runner", "start_queue_runners"]

_log = logging.getLogger(__name__)


class QueueRunner:
    """Holds a list of enqueue ops for a queue, each to be run in a thread.

    Args:
        queue: the queue the ops enqueue into (a `QueueBase`).
        enqueue_ops: list of enqueue ops; one thread each.
        close_op: op that closes the queue when the last thread ends (default
            ``queue.close()``).
        cancel_op: op that closes the queue and cancels pending enqueues when the coordinator
            stops (default ``queue.close(cancel_pending_enqueues=True)``).
        queue_closed_exception_types: errors that mean "the input is exhausted" and end a
            thread quietly (default ``(OutOfRangeError,)``).

    Raises:
        ValueError: no queue or no enqueue ops.
    """

    def __init__(self, queue=None, enqueue_ops=None, close_op=None, cancel_op=None,
                 queue_closed_exception_types=None):
        if not queue or not enqueue_ops:
            raise ValueError("Must provide queue and enqueue_ops.")
        self._queue = queue
        self._enqueue_ops = list(enqueue_ops)
        self._close_op = close_op if close_op is not None else queue.close()
        self._cancel_op = cancel_op if cancel_op is not None else \
            queue.close(cancel_pending_enqueues=True)
        if queue_closed_exception_types is None:
            queue_closed_exception_types = (errors.OutOfRangeError,)
        types = tuple(queue_closed_exception_types)
        if not types or not all(isinstance(t, type) and issubclass(t, errors.OpError) for t in types):
            raise TypeError("queue_closed_exception_types, when provided, must be a tuple of "
                            f"kf.errors.OpError subclasses, got {queue_closed_exception_types!r}")
        self._queue_closed_exception_types = types
        self._lock = threading.Lock()
        self._runs_per_session: dict = {}   # session -> enqueue threads still running
        self._exceptions_raised: list = []

    @property
    def queue(self):
        return self._queue

    @property
    def enqueue_ops(self) -> list:
        return self._enqueue_ops

    @property
    def close_op(self):
        return self._close_op

    @property
    def cancel_op(self):
        return self._cancel_op

    @property
    def queue_closed_exception_types(self) -> tuple:
        return self._queue_closed_exception_types

    @property
    def exceptions_raised(self) -> list:
        """Exceptions raised by the enqueue threads when no coordinator was given."""
        return self._exceptions_raised

    @property
    def name(self) -> str:
        """The name of the queue."""
        return self._queue.name

    def _run(self, sess, enqueue_op, coord=None) -> None:
        """One enqueue thread: runs `enqueue_op` until the input ends or a stop is requested."""
        decremented = False
        try:
            while True:
                if coord is not None and coord.should_stop():
                    break
                try:
                    sess.run(enqueue_op)
                except self._queue_closed_exception_types:
                    with self._lock:
                        self._runs_per_session[sess] -= 1
                        decremented = True
                        last = self._runs_per_session[sess] == 0
                        if last:
                            del self._runs_per_session[sess]
                    if last:
                        try:
                            sess.run(self._close_op)
                        except Exception as e:  # noqa: BLE001 - already closed: nothing to do
                            _log.info("Ignored exception while closing the queue: %s", e)
                    return
        except Exception as e:  # noqa: BLE001 - reported to the coordinator or recorded
            if coord is not None and coord.should_stop():
                # The stop came first (an op blocked until the session closed, e.g. the
                # SyncReplicasOptimizer's take): nothing left to report it to, so it is logged.
                _log.info("QueueRunner %s ended after the coordinator stopped: %s", self.name, e)
            elif coord is not None:
                coord.request_stop(e)
            else:
                _log.error("Exception in QueueRunner: %s", e)
                with self._lock:
                    self._exceptions_raised.append(e)
                raise
        finally:
            if not decremented:
                with self._lock:
                    self._runs_per_session[sess] -= 1
                    if self._runs_per_session[sess] <= 0:
                        del self._runs_per_session[sess]

    def _close_on_stop(self, sess, cancel_op, coord) -> None:
        """Waits for the coordinator to stop, then closes the queue cancelling pending enqueues."""
        coord.wait_for_stop()
        try:
            sess.run(cancel_op)
        except Exception as e:  # noqa: BLE001 - the session may be closed already
            _log.info("Ignored exception while cancelling the queue: %s", e)

    def create_threads(self, sess, coord=None, daemon=False, start=False) -> list:
        """Creates (and optionally starts) the threads that run the enqueue ops for `sess`.

        If threads of this runner are still running for `sess`, no new ones are created.

        Args:
            sess: the `Session` the ops run in.
            coord: optional `Coordinator` to report errors to and to stop on.
            daemon: make the threads daemons.
            start: start the threads (otherwise the caller starts them).

        Returns:
            The list of threads (empty if this runner already runs for `sess`).
        """
        with self._lock:
            if self._runs_per_session.get(sess, 0) > 0:
                return []
            self._runs_per_session[sess] = len(self._enqueue_ops)
            self._exceptions_raised = []
        threads = [threading.Thread(target=self._run, args=(sess, op, coord),
                                    name=f"QueueRunner-{self.name}-{i}")
                   for i, op in enumerate(self._enqueue_ops)]
        if coord is not None:
            threads.append(threading.Thread(target=self._close_on_stop,
                                            args=(sess, self._cancel_op, coord),
                                            name=f"QueueRunner-{self.name}-close"))
        for t in threads:
            if coord is not None:
                coord.register_thread(t)
            t.daemon = daemon
            if start:
                t.start()
        return threads


def add_queue_runner(qr, collection=_ops.GraphKeys.QUEUE_RUNNERS) -> None:
    """Adds `qr` to a collection of the default graph (`start_queue_runners` reads it)."""
    _ops.add_to_collection(collection, qr)


def start_queue_runners(sess=None, coord=None, daemon=True, start=True,
                        collection=_ops.GraphKeys.QUEUE_RUNNERS) -> list:
    """Starts the threads of every queue runner collected in the session's graph.

    Args:
        sess: the `Session` (default: the default session).
        coord: optional `Coordinator`.
        daemon: make the threads daemons.
        start: start the threads.
        collection: the collection holding the queue runners.

    Returns:
        The list of threads.

    Raises:
        ValueError: no session given and none is the default.
    """
    if sess is None:
        from kernflow.core.client.session import get_default_session
        sess = get_default_session()
        if sess is None:
            raise ValueError("Cannot start queue runners: No default session is registered. Use "
                             "`with sess.as_default()` or pass an explicit session to "
                             "kf.train.start_queue_runners(sess=sess)")
    with sess.graph.as_default():
        threads = []
        for qr in _ops.get_collection(collection):
            threads.extend(qr.create_threads(sess, coord=coord, daemon=daemon, start=start))
    return threads
