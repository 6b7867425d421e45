"""`kf.train.Supervisor`: TF1's older training helper (before MonitoredTrainingSession).

A Supervisor gathers (or creates) the init, ready and save pieces of a graph, finalizes the graph
and creates sessions through a `SessionManager`: the chief restores the latest checkpoint of
`logdir` or initializes, then starts the standard services (a thread saving a checkpoint every
`save_model_secs`, and with a summary writer the summary threads); other workers wait for the chief.
All threads run on the Supervisor's `Coordinator`, which `stop()` stops and joins.

As in TF1, the chief with a `logdir` writes TensorBoard events there (a `kf.summary.FileWriter`
unless `summary_writer` is given): the graph and meta graph when a session is created, a SessionLog
START when the services start, the summary op's output (default `kf.summary.merge_all()`) and
``global_step/sec`` every `save_summaries_secs`.

Example::

    sv = kf.train.Supervisor(logdir="/tmp/run", save_model_secs=60)
    with sv.managed_session() as sess:
        while not sv.should_stop():
            sess.run(train_op)
"""

from __future__ import annotations

import contextlib
import logging
import os
import time

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.framework.graph_keys import GraphKeys
from kernflow.core.train import training_util
from kernflow.core.train.coordinator import Coordinator, LooperThread
from kernflow.core.train.learning_rate import global_step as _global_step_value
from kernflow.core.train.scaffold import Scaffold
from kernflow.core.train.session_manager import SessionManager

__all__ = ["Supervisor"]

_log = logging.getLogger(__name__)


def _first_from_collection(key):
    items = _ops.get_collection(key)
    if len(items) > 1:
        _log.info("Found %d %s operations. Returning the first one.", len(items), key)
    return items[0] if items else None


def _default_or_collection(value, key, make_default):
    """`value` unless it is USE_DEFAULT; then the collection's first item, else a new default
    (added to the collection when not None)."""
    if value is not Supervisor.USE_DEFAULT:
        return value
    value = _first_from_collection(key)
    if value is None:
        value = make_default()
        if value is not None:
            _ops.add_to_collection(key, value)
    return value


def _default_summary_op():
    from kernflow.core.summary import summary_ops
    return summary_ops.merge_all()


def _default_ready_op():
    from kernflow.core.ops import variables
    return variables.report_uninitialized_variables()


def _default_init_op():
    from kernflow.core.ops import variables
    return variables.global_variables_initializer()


def _default_saver():
    from kernflow.core.ops import variables
    from kernflow.core.train.saver import Saver
    return Saver() if variables.global_variables() else None


def _default_global_step_tensor():
    try:
        gs = _ops.get_default_graph().get_tensor_by_name("global_step:0")
    except KeyError:
        return None
    if gs.dtype.base_dtype in (_dtypes.int32, _dtypes.int64):
        return gs
    _log.warning("Found 'global_step' is not an int type: %s", gs.dtype)
    return None


class Supervisor:
    """Initializes or restores a model, runs the checkpoint and summary services, stops threads.

    Args:
        graph: the graph (default: the default graph); finalized by the constructor.
        ready_op: op naming uninitialized variables (USE_DEFAULT: READY_OP collection, else
            `report_uninitialized_variables()`; None: no check).
        ready_for_local_init_op: the check before `local_init_op` (USE_DEFAULT: the
            READY_FOR_LOCAL_INIT_OP collection, else None).
        is_chief: whether this process initializes, saves checkpoints and writes summaries.
        init_op: op initializing the model (USE_DEFAULT: INIT_OP collection, else
            `global_variables_initializer()`).
        init_feed_dict: feeds for `init_op`.
        local_init_op: op run in every new session (USE_DEFAULT: LOCAL_INIT_OP collection, else
            local variables and tables).
        logdir: the directory of checkpoints (and graph.pbtxt); None: no checkpoints.
        summary_op: the summary op (USE_DEFAULT: SUMMARY_OP collection, else None).
        saver: the `Saver` (USE_DEFAULT: SAVERS collection, else a new one if there are variables).
        global_step: the global step tensor (USE_DEFAULT: GLOBAL_STEP collection, else the tensor
            named "global_step:0").
        save_summaries_secs: seconds between summaries (None: none).
        save_model_secs: seconds between checkpoints (None or 0: none).
        recovery_wait_secs: seconds between readiness checks of a waiting worker.
        stop_grace_secs: how long `stop()` waits for the threads.
        checkpoint_basename: the checkpoint file name in `logdir`.
        session_manager: a `SessionManager` (default: one built from the ops above).
        summary_writer: a summary writer (USE_DEFAULT: a `kf.summary.FileWriter` of `logdir`, if any).
        init_fn: fn(session) called after `init_op`.
        local_init_run_options: `RunOptions` for `local_init_op`.

    Raises:
        ValueError: a non-chief Supervisor and a variable without a device.
    """

    USE_DEFAULT = 0

    def __init__(self, graph=None, ready_op=USE_DEFAULT, ready_for_local_init_op=USE_DEFAULT, is_chief=True,
                 init_op=USE_DEFAULT, init_feed_dict=None, local_init_op=USE_DEFAULT, logdir=None,
                 summary_op=USE_DEFAULT, saver=USE_DEFAULT, global_step=USE_DEFAULT,
                 save_summaries_secs=120, save_model_secs=600, recovery_wait_secs=30,
                 stop_grace_secs=120, checkpoint_basename="model.ckpt", session_manager=None,
                 summary_writer=USE_DEFAULT, init_fn=None, local_init_run_options=None):
        self._graph = graph if graph is not None else _ops.get_default_graph()
        with self._graph.as_default():
            self._init_pieces(ready_op, ready_for_local_init_op, init_op, local_init_op, summary_op,
                              saver, global_step)
        self._init_feed_dict = init_feed_dict
        self._is_chief = is_chief
        self._coord = Coordinator()
        self._recovery_wait_secs = recovery_wait_secs
        self._stop_grace_secs = stop_grace_secs
        self._init_fn = init_fn
        self._local_init_run_options = local_init_run_options
        # Only a chief saves checkpoints and writes events.
        self._logdir = self._save_summaries_secs = self._save_model_secs = None
        self._save_path = self._summary_writer = None
        if is_chief:
            self._logdir = logdir
            self._save_summaries_secs = save_summaries_secs
            self._save_model_secs = save_model_secs
            if logdir:
                self._save_path = os.path.join(logdir, checkpoint_basename)
            if summary_writer is not Supervisor.USE_DEFAULT:
                self._summary_writer = summary_writer
            elif logdir:
                from kernflow.core.summary.writer import FileWriter
                self._summary_writer = FileWriter(logdir)
        self._session_manager = session_manager or SessionManager(
            local_init_op=self._local_init_op, ready_op=self._ready_op,
            ready_for_local_init_op=self._ready_for_local_init_op, graph=self._graph,
            recovery_wait_secs=recovery_wait_secs, local_init_run_options=local_init_run_options)
        self._verify_setup()
        self._graph.finalize()

    def _init_pieces(self, ready_op, ready_for_local_init_op, init_op, local_init_op, summary_op,
                     saver, global_step):
        self._ready_op = _default_or_collection(ready_op, GraphKeys.READY_OP, _default_ready_op)
        self._ready_for_local_init_op = _default_or_collection(
            ready_for_local_init_op, GraphKeys.READY_FOR_LOCAL_INIT_OP, lambda: None)
        self._init_op = _default_or_collection(init_op, GraphKeys.INIT_OP, _default_init_op)
        self._local_init_op = _default_or_collection(local_init_op, GraphKeys.LOCAL_INIT_OP,
                                                     Scaffold.default_local_init_op)
        self._saver = _default_or_collection(saver, GraphKeys.SAVERS, _default_saver)
        self._summary_op = _default_or_collection(summary_op, GraphKeys.SUMMARY_OP, _default_summary_op)
        self._global_step = _default_or_collection(global_step, GraphKeys.GLOBAL_STEP,
                                                   _default_global_step_tensor)

    def _verify_setup(self) -> None:
        """A non-chief (replicated) Supervisor needs every variable placed on a device."""
        if self._is_chief:
            return
        for op in self._graph.get_operations():
            if op.type in ("Variable", "VariableV2") and not op.device:
                raise ValueError(f"When using replicas, all Variables must have their device set: {op}")

    # ------------------------------------------------------------------ properties
    is_chief = property(lambda self: self._is_chief, doc="Whether this is the chief.")
    session_manager = property(lambda self: self._session_manager, doc="The `SessionManager`.")
    coord = property(lambda self: self._coord, doc="The `Coordinator` of the threads.")
    init_op = property(lambda self: self._init_op, doc="The init op.")
    init_feed_dict = property(lambda self: self._init_feed_dict, doc="Feeds for the init op.")
    ready_op = property(lambda self: self._ready_op, doc="The ready op.")
    ready_for_local_init_op = property(lambda self: self._ready_for_local_init_op,
                                       doc="The check before the local init op.")
    summary_writer = property(lambda self: self._summary_writer, doc="The summary writer, or None.")
    summary_op = property(lambda self: self._summary_op, doc="The summary op, or None.")
    save_summaries_secs = property(lambda self: self._save_summaries_secs,
                                   doc="Seconds between summaries.")
    global_step = property(lambda self: self._global_step, doc="The global step tensor, or None.")
    saver = property(lambda self: self._saver, doc="The `Saver`, or None.")
    save_model_secs = property(lambda self: self._save_model_secs, doc="Seconds between checkpoints.")
    save_path = property(lambda self: self._save_path, doc="The checkpoint prefix, or None.")

    # ------------------------------------------------------------------ sessions and services
    def prepare_or_wait_for_session(self, master="", config=None, wait_for_checkpoint=False,
                                    max_wait_secs=7200, start_standard_services=True):
        """Creates a session: the chief restores or initializes, a worker waits for the chief.

        Args:
            master: the session target.
            config: the session's `ConfigProto`.
            wait_for_checkpoint: (chief) wait for a checkpoint in `logdir`.
            max_wait_secs: how long to wait for a checkpoint or for the chief.
            start_standard_services: start the services (chief) and the queue runners.

        Returns:
            The `Session`.
        """
        self._coord.clear_stop()  # a recreated session's threads must run
        if self._summary_writer is not None and hasattr(self._summary_writer, "reopen"):
            self._summary_writer.reopen()
        if self._is_chief:
            sess = self._session_manager.prepare_session(
                master, init_op=self._init_op, saver=self._saver, checkpoint_dir=self._logdir,
                wait_for_checkpoint=wait_for_checkpoint, max_wait_secs=max_wait_secs, config=config,
                init_feed_dict=self._init_feed_dict, init_fn=self._init_fn)
            self._write_graph()
            if start_standard_services:
                _log.info("Starting standard services.")
                self.start_standard_services(sess)
        else:
            sess = self._session_manager.wait_for_session(master, config=config,
                                                          max_wait_secs=max_wait_secs)
        if start_standard_services:
            _log.info("Starting queue runners.")
            self.start_queue_runners(sess)
        return sess

    def _write_graph(self) -> None:
        if self._logdir:
            training_util.write_graph(self._graph.as_graph_def(add_shapes=True), self._logdir,
                                      "graph.pbtxt")
        if self._summary_writer is not None:
            from kernflow.core.train.meta_graph import export_meta_graph
            self._summary_writer.add_graph(self._graph)
            self._summary_writer.add_meta_graph(export_meta_graph(graph=self._graph))

    def start_standard_services(self, sess):
        """Starts the checkpoint thread (and, with a summary writer, the summary threads).

        Returns:
            The started threads.

        Raises:
            RuntimeError: not the chief.
        """
        if not self._is_chief:
            raise RuntimeError("Only chief supervisor can start standard services. Because only "
                               "chief supervisors can write events.")
        threads = []
        if self._summary_writer is not None:
            from kernflow.core.protobuf.event_pb2 import SessionLog
            step = _global_step_value(sess, self._global_step) if self._global_step is not None else None
            self._summary_writer.add_session_log(SessionLog(status=SessionLog.START), step)
        if self._save_summaries_secs and self._summary_writer is not None:
            if self._summary_op is not None:
                threads.append(_SummaryThread(self, sess))
            if self._global_step is not None:
                threads.append(_StepCounterThread(self, sess))
        if self._saver is not None and self._save_model_secs and self._save_path:
            threads.append(_CheckpointThread(self, sess))
        for t in threads:
            t.start()
        return threads

    def start_queue_runners(self, sess, queue_runners=None):
        """Starts the threads of `queue_runners` (default: the graph's QUEUE_RUNNERS) on the
        Supervisor's coordinator; returns them."""
        if queue_runners is None:
            queue_runners = self._graph.get_collection(GraphKeys.QUEUE_RUNNERS)
        threads = []
        for qr in queue_runners:
            threads.extend(qr.create_threads(sess, coord=self._coord, daemon=True, start=True))
        return threads

    def loop(self, timer_interval_secs, target, args=None, kwargs=None):
        """Starts a `LooperThread` calling `target(*args, **kwargs)` every `timer_interval_secs`
        until the Supervisor stops; returns it."""
        looper = LooperThread(self._coord, timer_interval_secs, target=target, args=args, kwargs=kwargs)
        looper.start()
        return looper

    # ------------------------------------------------------------------ stopping
    def stop(self, threads=None, close_summary_writer=True, ignore_live_threads=False) -> None:
        """Requests a stop and joins the threads (registered ones and `threads`).

        Raises:
            The first exception reported to the coordinator (see `Coordinator.join`).
        """
        self._coord.request_stop()
        try:
            self._coord.join(threads, stop_grace_period_secs=self._stop_grace_secs,
                             ignore_live_threads=ignore_live_threads)
        finally:
            if close_summary_writer and self._summary_writer is not None \
                    and hasattr(self._summary_writer, "close"):
                self._summary_writer.close()

    def request_stop(self, ex=None) -> None:
        """Requests the threads to stop; `ex` is re-raised by `stop()`."""
        self._coord.request_stop(ex=ex)

    def should_stop(self) -> bool:
        """True once a stop was requested."""
        return self._coord.should_stop()

    def stop_on_exception(self):
        """A context manager that requests a stop on any exception (see Coordinator)."""
        return self._coord.stop_on_exception()

    def wait_for_stop(self) -> None:
        """Blocks until a stop is requested."""
        self._coord.wait_for_stop()

    def summary_computed(self, sess, summary, global_step=None) -> None:
        """Writes a serialized summary with the summary writer.

        Raises:
            RuntimeError: there is no summary writer.
        """
        if self._summary_writer is None:
            raise RuntimeError("Writing a summary requires a summary writer.")
        if global_step is None and self._global_step is not None:
            global_step = _global_step_value(sess, self._global_step)
        self._summary_writer.add_summary(summary, global_step)

    @contextlib.contextmanager
    def managed_session(self, master="", config=None, start_standard_services=True,
                        close_summary_writer=True):
        """A context manager yielding a prepared session; on exit stops the threads, closes the
        session and re-raises an exception of the block (OutOfRangeError ends it quietly).

        Args:
            master: the session target.
            config: the session's `ConfigProto`.
            start_standard_services: start the services and queue runners.
            close_summary_writer: close the summary writer on exit.
        """
        sess = None
        try:
            sess = self.prepare_or_wait_for_session(master=master, config=config,
                                                    start_standard_services=start_standard_services)
            yield sess
        except Exception as e:  # noqa: BLE001 - handed to the coordinator, re-raised by stop()
            self.request_stop(e)
        finally:
            try:
                self.stop(close_summary_writer=close_summary_writer)
            finally:
                if sess is not None:
                    try:
                        sess.close()
                    except Exception:  # noqa: BLE001 - closing errors are not interesting here
                        pass

    # TF1's deprecated CamelCase names.
    PrepareSession = prepare_or_wait_for_session
    StartQueueRunners = start_queue_runners
    StartStandardServices = start_standard_services
    Stop = stop
    RequestStop = request_stop
    Loop = loop
    ShouldStop = should_stop
    StopOnException = stop_on_exception
    WaitForStop = wait_for_stop
    SummaryComputed = summary_computed


# ---------------------------------------------------------------------------- service threads
class _CheckpointThread(LooperThread):
    """Saves a checkpoint every `save_model_secs` (the first right away)."""

    def __init__(self, sv, sess):
        super().__init__(sv.coord, sv.save_model_secs)
        self.name = "SupervisorCheckpoint"
        self._sv = sv
        self._sess = sess

    def run_loop(self):
        _log.info("Saving checkpoint to path %s", self._sv.save_path)
        self._sv.saver.save(self._sess, self._sv.save_path, global_step=self._sv.global_step)


class _SummaryThread(LooperThread):
    """Runs the summary op every `save_summaries_secs` and hands the result to the writer."""

    def __init__(self, sv, sess):
        super().__init__(sv.coord, sv.save_summaries_secs)
        self.name = "SupervisorSummary"
        self._sv = sv
        self._sess = sess

    def run_loop(self):
        if self._sv.global_step is not None:
            summary, step = self._sess.run([self._sv.summary_op, self._sv.global_step])
        else:
            summary, step = self._sess.run(self._sv.summary_op), None
        _log.info("Recording summary at step %s.", step)
        self._sv.summary_writer.add_summary(summary, step)


class _StepCounterThread(LooperThread):
    """Writes (and logs, the first ten times) global steps per second every `save_summaries_secs`."""

    _max_logs = 10

    def __init__(self, sv, sess):
        super().__init__(sv.coord, sv.save_summaries_secs)
        self.name = "SupervisorStepCounter"
        self._sv = sv
        self._sess = sess
        self._step_counter = sv.global_step
        self._tag = self._step_counter.op.name + "/sec"
        self._logged = 0

    def start_loop(self):
        self._last_time = time.time()
        self._last_step = _global_step_value(self._sess, self._step_counter)

    def run_loop(self):
        step = _global_step_value(self._sess, self._step_counter)
        added, self._last_step = step - self._last_step, step
        now = time.time()
        elapsed, self._last_time = now - self._last_time, now
        rate = added / elapsed if elapsed > 0 else float("inf")
        from kernflow.core.protobuf.summary_pb2 import Summary
        summary = Summary(value=[Summary.Value(tag=self._tag, simple_value=rate)])
        self._sv.summary_writer.add_summary(summary, step)
        if self._logged < self._max_logs:
            self._logged += 1
            _log.info("%s: %g", self._tag, rate)
