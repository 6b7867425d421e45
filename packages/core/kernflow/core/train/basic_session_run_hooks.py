"""The standard `SessionRunHook`s of TF1's tf.train: stopping, checkpointing, logging, checks.

`StopAtStepHook`, `CheckpointSaverHook` (with `CheckpointSaverListener`), `StepCounterHook`,
`SummarySaverHook`, `LoggingTensorHook`, `NanTensorHook`, `FinalOpsHook`, `FeedFnHook`,
`GlobalStepWaiterHook`, `ProfilerHook` and the `SecondOrStepTimer` they trigger on.

The hooks that write TensorBoard events share one `kf.summary.FileWriter` per directory through
`FileWriterCache`, as TF's: `SummarySaverHook` writes SessionLog START at its first step and then
the summary op's output every N steps or seconds; `StepCounterHook` writes "global_step/sec";
`CheckpointSaverHook` writes the graph and meta graph when the session is created and a SessionLog
CHECKPOINT after each save. Each of them flushes its writer in `end()`.

The hooks that act on the global step (`StopAtStepHook`, `CheckpointSaverHook`, `StepCounterHook`,
`SummarySaverHook`) fetch its read tensor in every step in TF, and run the session again for its
value after the update when they are about to act. Where the session can read the global step
directly (`training_util.global_step_reader`: the embedded runtime, the variable in host memory),
they read it after each step instead and fetch nothing: the same steps trigger, with the exact
value, and a monitored step costs ~2 us less (of ~220 us, tools/bench_summaries.py). Otherwise
(a remote session, a hook driven without `after_create_session`) they fetch as TF's do.

Example::

    hooks = [kf.train.StopAtStepHook(last_step=1000),
             kf.train.NanTensorHook(loss),
             kf.train.LoggingTensorHook({"loss": loss}, every_n_iter=100)]
    with kf.train.MonitoredTrainingSession(checkpoint_dir="/tmp/run", hooks=hooks) as sess:
        while not sess.should_stop():
            sess.run(train_op)
"""

from __future__ import annotations

import logging
import os
import time

import numpy as np

from kernflow.core.framework import errors
from kernflow.core.framework import ops as _ops
from kernflow.core.protobuf.event_pb2 import SessionLog
from kernflow.core.summary.wire import scalar_summary
from kernflow.core.summary.writer import FileWriterCache
from kernflow.core.train import training_util
from kernflow.core.train.learning_rate import get_global_step
from kernflow.core.train.meta_graph import export_meta_graph
from kernflow.core.train.session_run_hook import SessionRunArgs, SessionRunHook

__all__ = ["SecondOrStepTimer", "LoggingTensorHook", "StopAtStepHook", "CheckpointSaverListener",
           "CheckpointSaverHook", "StepCounterHook", "SummarySaverHook", "NanLossDuringTrainingError",
           "NanTensorHook", "FeedFnHook", "FinalOpsHook", "GlobalStepWaiterHook", "ProfilerHook"]

_log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------- timers
class SecondOrStepTimer:
    """Triggers at most once every `every_secs` seconds or once every `every_steps` steps.

    Args:
        every_secs: seconds between triggers.
        every_steps: steps between triggers.

    Raises:
        ValueError: neither or both are given.
    """

    def __init__(self, every_secs=None, every_steps=None):
        if every_secs is None and every_steps is None:
            raise ValueError("Either every_secs or every_steps should be provided.")
        if every_secs is not None and every_steps is not None:
            raise ValueError("Can not provide both every_secs and every_steps.")
        self._every_secs = every_secs
        self._every_steps = every_steps
        self.reset()

    def reset(self) -> None:
        """Forgets the last trigger: the next `should_trigger_for_step` is True."""
        self._last_triggered_step = None
        self._last_triggered_time = None
        # The first step that may trigger, for a step timer that has triggered (else None): the
        # hooks compare a step with it before calling `should_trigger_for_step`, every step.
        self.due_step = None

    def should_trigger_for_step(self, step) -> bool:
        """True if the timer should trigger at `step` (never twice for the same step)."""
        last = self._last_triggered_step
        if last is None:
            return True
        if last == step:
            return False
        if self._every_secs is not None:   # (then every_steps is None: exactly one is set)
            return time.time() >= self._last_triggered_time + self._every_secs
        return step >= last + self._every_steps

    def update_last_triggered_step(self, step):
        """Records a trigger at `step`; returns (elapsed seconds, elapsed steps) since the last one,
        or (None, None) for the first."""
        now = time.time()
        if self._last_triggered_time is None:
            elapsed = (None, None)
        else:
            elapsed = (now - self._last_triggered_time, step - self._last_triggered_step)
        self._last_triggered_time = now
        self._last_triggered_step = step
        if self._every_secs is None and self._every_steps is not None:
            self.due_step = step + self._every_steps
        return elapsed

    def last_triggered_step(self):
        """The step of the last trigger, or None."""
        return self._last_triggered_step


class NeverTriggerTimer(SecondOrStepTimer):
    """A timer that never triggers."""

    def __init__(self):
        self._every_secs = self._every_steps = None
        self.reset()

    def should_trigger_for_step(self, step) -> bool:
        return False


def _as_graph_element(obj, graph):
    """`obj` (a tensor, an op or a name) as an element of `graph` (a bare op name means ":0")."""
    if not isinstance(obj, str):
        if getattr(obj, "graph", None) is not graph:
            raise ValueError(f"Passed {obj} should have graph attribute that is equal to current "
                             f"graph {graph}.")
        return obj
    if ":" in obj:
        return graph.as_graph_element(obj)
    element = graph.as_graph_element(obj + ":0")
    try:
        graph.as_graph_element(obj + ":1")
    except (KeyError, ValueError):
        return element
    raise ValueError(f"Name {obj} is ambiguous, as this `Operation` has multiple outputs (at least 2).")


def _global_step_read(hook_name):
    read = training_util.get_or_create_global_step_read()
    if read is None:
        raise RuntimeError(f"Global step should be created to use {hook_name}.")
    return read


class _GlobalStepHook(SessionRunHook):
    """A hook that acts on the global step (see module doc): `_request` is its request of a step
    that needs nothing but the step, a fetch of the read tensor, or None once
    `after_create_session` found a reader (`_read_step`, else None)."""

    def _watch_global_step(self, hook_name):
        """In `begin`: the read tensor, and a fetch of it until a session offers a reader."""
        self._global_step_tensor = _global_step_read(hook_name)
        self._fetch_step = SessionRunArgs(self._global_step_tensor)   # the same every step
        self._request, self._read_step = self._fetch_step, None

    def _read_step_of(self, session):
        """In `after_create_session`: reads the step after each step where `session` can."""
        self._read_step = training_util.global_step_reader(session)
        self._request = None if self._read_step is not None else self._fetch_step


# ---------------------------------------------------------------------------- logging
class LoggingTensorHook(SessionRunHook):
    """Logs the values of tensors every N local steps, every N seconds, and/or at the end.

    The values are logged at INFO level as "tag = value, ..." (followed by the seconds since the
    last log), or as `formatter(values)`.

    Args:
        tensors: a dict {tag: tensor or name} or a list of tensors or names (tag = the name).
        every_n_iter: log every N local steps.
        every_n_secs: log every N seconds.
        at_end: log once more when the session ends.
        formatter: fn(dict {tag: value}) -> str.

    Raises:
        ValueError: unless exactly one of every_n_iter and every_n_secs is given (or only at_end).
    """

    def __init__(self, tensors, every_n_iter=None, every_n_secs=None, at_end=False, formatter=None):
        only_log_at_end = at_end and every_n_iter is None and every_n_secs is None
        if not only_log_at_end and (every_n_iter is None) == (every_n_secs is None):
            raise ValueError("either at_end and/or exactly one of every_n_iter and every_n_secs must "
                             "be provided.")
        if every_n_iter is not None and every_n_iter <= 0:
            raise ValueError(f"invalid every_n_iter={every_n_iter}.")
        if not isinstance(tensors, dict):
            self._tag_order = list(tensors)
            tensors = {item: item for item in tensors}
        else:
            self._tag_order = sorted(tensors.keys())
        self._tensors = tensors
        self._formatter = formatter
        self._timer = NeverTriggerTimer() if only_log_at_end else \
            SecondOrStepTimer(every_secs=every_n_secs, every_steps=every_n_iter)
        self._log_at_end = at_end

    def begin(self):
        self._timer.reset()
        self._iter_count = 0
        graph = _ops.get_default_graph()
        self._current_tensors = {tag: _as_graph_element(t, graph) for tag, t in self._tensors.items()}

    def before_run(self, run_context):
        self._should_trigger = self._timer.should_trigger_for_step(self._iter_count)
        return SessionRunArgs(self._current_tensors) if self._should_trigger else None

    def _log_tensors(self, tensor_values):
        elapsed_secs, _ = self._timer.update_last_triggered_step(self._iter_count)
        with np.printoptions(suppress=True):
            if self._formatter:
                _log.info("%s", self._formatter(tensor_values))
                return
            stats = ", ".join(f"{tag} = {tensor_values[tag]}" for tag in self._tag_order)
        if elapsed_secs is not None:
            _log.info("%s (%.3f sec)", stats, elapsed_secs)
        else:
            _log.info("%s", stats)

    def after_run(self, run_context, run_values):
        if self._should_trigger:
            self._log_tensors(run_values.results)
        self._iter_count += 1

    def end(self, session):
        if self._log_at_end:
            self._log_tensors(session.run(self._current_tensors))


class StepCounterHook(_GlobalStepHook):
    """Logs the global steps per second ("global_step/sec: N") every N steps or seconds, and writes
    it as a scalar summary (tag "<global step op name>/sec") when it has a writer.

    Args:
        every_n_steps: log every N global steps.
        every_n_secs: log every N seconds.
        output_dir: the summary directory (its `FileWriterCache` writer is used).
        summary_writer: a `kf.summary.FileWriter` (takes precedence over `output_dir`).

    Raises:
        ValueError: unless exactly one of every_n_steps and every_n_secs is given.
    """

    def __init__(self, every_n_steps=100, every_n_secs=None, output_dir=None, summary_writer=None):
        if (every_n_steps is None) == (every_n_secs is None):
            raise ValueError("exactly one of every_n_steps and every_n_secs should be provided.")
        self._timer = SecondOrStepTimer(every_steps=every_n_steps, every_secs=every_n_secs)
        self._summary_writer = summary_writer
        self._output_dir = output_dir
        self._last_global_step = None
        self._steps_per_run = 1
        self._warned_not_increasing = 0

    def begin(self):
        if self._summary_writer is None and self._output_dir:
            self._summary_writer = FileWriterCache.get(self._output_dir)
        self._watch_global_step("StepCounterHook")
        self._summary_tag = get_global_step().op.name + "/sec"

    def after_create_session(self, session, coord):
        self._last_global_step = None
        self._timer.reset()
        self._read_step_of(session)

    def before_run(self, run_context):
        return self._request

    def _log_and_record(self, elapsed_steps, elapsed_time, global_step):
        rate = elapsed_steps / elapsed_time if elapsed_time > 0 else float("inf")
        if self._summary_writer is not None:   # (the bytes add_summary writes without parsing)
            self._summary_writer.add_summary(scalar_summary(self._summary_tag, rate), global_step)
        _log.info("%s: %g", self._summary_tag, rate)

    def after_run(self, run_context, run_values):
        read = self._read_step
        if read is None:   # the fetched value, which may predate this step's update
            stale_global_step = int(run_values.results)   # (a numpy scalar: slower to compare)
            step = stale_global_step + self._steps_per_run
        else:              # the value after this step's update
            stale_global_step = step = int(read())
        due = self._timer.due_step
        if (due is None or step >= due) and self._timer.should_trigger_for_step(step):
            global_step = step if read is not None else int(
                run_context.session.run(self._global_step_tensor))
            if self._timer.should_trigger_for_step(global_step):
                elapsed_time, elapsed_steps = self._timer.update_last_triggered_step(global_step)
                if elapsed_time is not None:
                    self._log_and_record(elapsed_steps, elapsed_time, global_step)
        if stale_global_step == self._last_global_step and self._warned_not_increasing < 5:
            self._warned_not_increasing += 1
            _log.warning("It seems that global step (kf.train.get_global_step) has not been "
                         "increased. Current value (could be stable): %s vs previous value: %s. You "
                         "could increase the global step by passing kf.train.get_global_step() to "
                         "Optimizer.apply_gradients or Optimizer.minimize.", stale_global_step,
                         self._last_global_step)
        self._last_global_step = stale_global_step

    def end(self, session):
        if self._summary_writer is not None:
            self._summary_writer.flush()


# ---------------------------------------------------------------------------- summaries
class SummarySaverHook(_GlobalStepHook):
    """Saves the output of a summary op every N steps or seconds (TF1 `tf.train.SummarySaverHook`).

    The first step writes a SessionLog START (so TensorBoard drops events of an earlier run from
    that step on) and the summaries; later steps fetch and write the summaries only when the timer
    triggers, stamped with the global step after the step ran. Summaries go to `summary_writer`, or
    to the cached writer of `output_dir`; with neither, nothing is fetched or written (as TF).

    Args:
        save_steps: save every N global steps.
        save_secs: save every N seconds.
        output_dir: the summary directory (its `FileWriterCache` writer is used).
        summary_writer: a `kf.summary.FileWriter` (takes precedence over `output_dir`).
        scaffold: a `Scaffold` whose `summary_op` is saved (read after it is finalized).
        summary_op: a serialized-Summary tensor, or a list of them.

    Raises:
        ValueError: not exactly one of `scaffold` and `summary_op`, or not exactly one of
            `save_steps` and `save_secs`.
    """

    def __init__(self, save_steps=None, save_secs=None, output_dir=None, summary_writer=None,
                 scaffold=None, summary_op=None):
        if (scaffold is None) == (summary_op is None):
            raise ValueError("Exactly one of scaffold or summary_op must be provided.")
        self._summary_op = summary_op
        self._summary_writer = summary_writer
        self._output_dir = output_dir
        self._scaffold = scaffold
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)

    def begin(self):
        if self._summary_writer is None and self._output_dir:
            self._summary_writer = FileWriterCache.get(self._output_dir)
        self._next_step = None
        # `_request` serves the steps that save nothing (most of them): the bare tensor (a nested
        # {"global_step": ...} costs every step a level of fetch mapping), or nothing.
        self._watch_global_step("SummarySaverHook")
        self._summary_ops = None

    def after_create_session(self, session, coord):
        self._read_step_of(session)

    def before_run(self, run_context):
        next_step = self._next_step
        due = self._timer.due_step
        self._request_summary = next_step is None or (
            (due is None or next_step >= due) and self._timer.should_trigger_for_step(next_step))
        if not self._request_summary or self._summary_writer is None:
            return self._request
        summary_ops = self._get_summary_op()
        if not summary_ops:
            return self._request
        if self._read_step is not None:
            return SessionRunArgs({"summary": summary_ops})
        return SessionRunArgs({"global_step": self._global_step_tensor, "summary": summary_ops})

    def after_run(self, run_context, run_values):
        if self._summary_writer is None:
            return
        if self._read_step is not None:
            global_step = int(self._read_step())   # (after this step's update)
            if not self._request_summary and self._next_step is not None:
                self._next_step = global_step + 1
                return
        elif self._next_step is None or self._request_summary:
            # The fetched value may predate this step's update: read the step again.
            global_step = int(run_context.session.run(self._global_step_tensor))
        else:
            # results: the bare global step (see begin), read before this step's update; the step
            # after it is the next one to consider.
            global_step = int(run_values.results) + 1
            self._next_step = global_step + 1
            return
        if self._next_step is None:
            self._summary_writer.add_session_log(SessionLog(status=SessionLog.START), global_step)
        if self._request_summary:
            self._timer.update_last_triggered_step(global_step)
            results = run_values.results   # (the bare step when there was no summary to fetch)
            for summary in results.get("summary", ()) if type(results) is dict else ():
                self._summary_writer.add_summary(summary, global_step)
        self._next_step = global_step + 1

    def end(self, session=None):
        if self._summary_writer is not None:
            self._summary_writer.flush()

    def _get_summary_op(self):
        """The summary tensors to fetch (a list), or None when there are none (kept once found:
        the scaffold's is fixed once it is finalized)."""
        if self._summary_ops is not None:
            return self._summary_ops
        summary_op = self._summary_op if self._summary_op is not None else self._scaffold.summary_op
        if summary_op is None:
            return None
        self._summary_ops = summary_op if isinstance(summary_op, list) else [summary_op]
        return self._summary_ops


class ProfilerHook(SessionRunHook):
    """Traces a step every N steps or seconds and saves its timeline (TF1 `tf.train.ProfilerHook`).

    A triggered step runs with ``RunOptions(trace_level=FULL_TRACE)``; its step stats are written as
    Chrome trace JSON to ``output_dir/timeline-<global step>.json`` (open it in chrome://tracing or
    Perfetto) and its `RunMetadata` is added to the directory's cached `FileWriter` under the tag
    ``step_<global step>`` (TensorBoard's graph tab then shows per-node compute time and memory).
    The first step only starts the timer, as in TF: tracing it would measure start-up work.

    Args:
        save_steps: trace every N global steps.
        save_secs: trace every N seconds.
        output_dir: where the timelines and the run metadata go.
        show_dataflow: draw arrows from producers to consumers in the timeline.
        show_memory: add memory counters to the timeline.

    Raises:
        ValueError: not exactly one of `save_steps` and `save_secs`.
    """

    def __init__(self, save_steps=None, save_secs=None, output_dir="", show_dataflow=True,
                 show_memory=False):
        self._output_file = os.path.join(output_dir, "timeline-{}.json")
        self._output_dir = output_dir
        self._show_dataflow, self._show_memory = show_dataflow, show_memory
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)

    def begin(self):
        self._file_writer = FileWriterCache.get(self._output_dir)
        self._next_step = None
        self._global_step_tensor = _global_step_read("ProfilerHook")

    def before_run(self, run_context):
        self._request_trace = (self._next_step is not None
                               and self._timer.should_trigger_for_step(self._next_step))
        options = None
        if self._request_trace:
            from kernflow.core.protobuf import config_pb2
            options = config_pb2.RunOptions(trace_level=config_pb2.RunOptions.FULL_TRACE)
        return SessionRunArgs({"global_step": self._global_step_tensor}, options=options)

    def after_run(self, run_context, run_values):
        global_step = run_values.results["global_step"]
        if self._next_step is None:
            self._timer.update_last_triggered_step(global_step)
        global_step += 1
        if self._request_trace:
            global_step = run_context.session.run(self._global_step_tensor)
            self._timer.update_last_triggered_step(global_step)
            self._save(global_step, run_values.run_metadata)
        self._next_step = global_step + 1

    def _save(self, step, run_metadata):
        from kernflow.core.client import timeline
        path = self._output_file.format(step)
        _log.info("Saving timeline for %d into '%s'.", step, path)
        trace = timeline.Timeline(run_metadata.step_stats).generate_chrome_trace_format(
            show_dataflow=self._show_dataflow, show_memory=self._show_memory)
        with open(path, "w", encoding="utf-8") as f:
            f.write(trace)
        self._file_writer.add_run_metadata(run_metadata, f"step_{step}", step)

    def end(self, session=None):
        self._file_writer.flush()


# ---------------------------------------------------------------------------- stopping and checks
class StopAtStepHook(_GlobalStepHook):
    """Requests a stop once the global step reaches `last_step` (or `num_steps` more steps).

    Args:
        num_steps: steps to run from the global step found when the session is created.
        last_step: the global step to stop at.

    Raises:
        ValueError: neither or both are given.
    """

    def __init__(self, num_steps=None, last_step=None):
        if num_steps is None and last_step is None:
            raise ValueError("One of num_steps or last_step must be specified.")
        if num_steps is not None and last_step is not None:
            raise ValueError("Only one of num_steps or last_step can be specified.")
        self._num_steps = num_steps
        self._last_step = last_step

    def begin(self):
        self._watch_global_step("StopAtStepHook")

    def after_create_session(self, session, coord):
        if self._last_step is None:
            self._last_step = session.run(self._global_step_tensor) + self._num_steps
        self._read_step_of(session)

    def before_run(self, run_context):
        return self._request

    def after_run(self, run_context, run_values):
        if self._read_step is not None:
            if int(self._read_step()) >= self._last_step:
                run_context.request_stop()
        elif run_values.results + 1 >= self._last_step:
            # The fetched value may predate this call's update: read the step again.
            if run_context.session.run(self._global_step_tensor) >= self._last_step:
                run_context.request_stop()


class NanLossDuringTrainingError(RuntimeError):
    """Raised by `NanTensorHook` when the loss is NaN."""

    def __str__(self):
        return "NaN loss during training."


class NanTensorHook(SessionRunHook):
    """Checks a loss tensor after every step: raises, or requests a stop, when it is NaN.

    Args:
        loss_tensor: the loss tensor.
        fail_on_nan_loss: raise `NanLossDuringTrainingError` (default) instead of stopping.
    """

    def __init__(self, loss_tensor, fail_on_nan_loss=True):
        self._loss_tensor = loss_tensor
        self._fail_on_nan_loss = fail_on_nan_loss

    def before_run(self, run_context):
        return SessionRunArgs(self._loss_tensor)

    def after_run(self, run_context, run_values):
        if np.isnan(run_values.results):
            failure_message = "Model diverged with loss = NaN."
            if self._fail_on_nan_loss:
                _log.error(failure_message)
                raise NanLossDuringTrainingError
            _log.warning(failure_message)
            run_context.request_stop()


class GlobalStepWaiterHook(SessionRunHook):
    """Delays the first step until the global step reaches `wait_until_step` (for workers that
    should start after the chief trained a while).

    Args:
        wait_until_step: the global step to wait for (<= 0: do not wait).
    """

    _poll_secs = 0.5

    def __init__(self, wait_until_step):
        self._wait_until_step = wait_until_step

    def begin(self):
        self._worker_is_started = False
        self._global_step_tensor = _global_step_read("GlobalStepWaiterHook")

    def before_run(self, run_context):
        if self._worker_is_started:
            return None
        if self._wait_until_step <= 0:
            self._worker_is_started = True
            return None
        _log.info("Waiting for global step %d before starting training.", self._wait_until_step)
        last_logged_step = 0
        while True:
            current_step = run_context.session.run(self._global_step_tensor)
            if current_step >= self._wait_until_step:
                self._worker_is_started = True
                return None
            if current_step - last_logged_step > 1000:
                _log.info("Waiting for global step %d before starting training. Current step is %d.",
                          self._wait_until_step, current_step)
                last_logged_step = current_step
            time.sleep(self._poll_secs)


# ---------------------------------------------------------------------------- feeds and final ops
class FeedFnHook(SessionRunHook):
    """Adds `feed_fn()` (a feed dict) to the feeds of every step.

    Args:
        feed_fn: fn() -> {tensor: value}.
    """

    def __init__(self, feed_fn):
        self.feed_fn = feed_fn

    def before_run(self, run_context):
        return SessionRunArgs(fetches=None, feed_dict=self.feed_fn())


class FinalOpsHook(SessionRunHook):
    """Evaluates tensors once when the session ends; their values are in `final_ops_values`.

    Args:
        final_ops: a tensor, a list of tensors or a dict {name: tensor}.
        final_ops_feed_dict: feeds for that run.
    """

    def __init__(self, final_ops, final_ops_feed_dict=None):
        self._final_ops = final_ops
        self._final_ops_feed_dict = final_ops_feed_dict
        self._final_ops_values = None

    @property
    def final_ops_values(self):
        """The values of `final_ops` after `end`, or None."""
        return self._final_ops_values

    def end(self, session):
        if self._final_ops is None:
            return
        try:
            self._final_ops_values = session.run(self._final_ops, feed_dict=self._final_ops_feed_dict)
        except (errors.OutOfRangeError, StopIteration):
            _log.warning("An OutOfRangeError or StopIteration exception is raised by the code in "
                         "FinalOpsHook. This typically means the ops run by the FinalOpsHook have a "
                         "dependency back to some input source, which should not happen: final ops "
                         "should only read variables, not take another batch from the input.")
            raise


# ---------------------------------------------------------------------------- checkpoints
class CheckpointSaverListener:
    """Callbacks around the saves of a `CheckpointSaverHook` (every method a no-op by default).

    `after_save` returning True asks the training to stop.
    """

    def begin(self):
        """Called from the hook's `begin`."""

    def before_save(self, session, global_step_value):
        """Called before each checkpoint is written."""

    def after_save(self, session, global_step_value):
        """Called after each checkpoint was written; return True to request a stop."""

    def end(self, session, global_step_value):
        """Called at the end of the session, after the last save."""


class CheckpointSaverHook(_GlobalStepHook):
    """Saves checkpoints every N steps or seconds, once when the session is created and once at
    its end (unless that step was just saved).

    As TF's, it also writes TensorBoard events to `checkpoint_dir` (through its `FileWriterCache`
    writer): the graph and the meta graph when the session is created (with `save_graph_def`) and
    a SessionLog CHECKPOINT naming the checkpoint prefix after each save.

    Args:
        checkpoint_dir: the directory of the checkpoints.
        save_secs: save every N seconds.
        save_steps: save every N global steps.
        saver: the `Saver` (default: the scaffold's, else the one in the SAVERS collection).
        checkpoint_basename: the prefix's file name ("model.ckpt" -> "model.ckpt-<step>").
        scaffold: a `Scaffold` whose saver is used.
        listeners: `CheckpointSaverListener`s.
        save_graph_def: also write ``graph.pbtxt``, the graph event and the meta graph event when
            the session is created, and a ``.meta`` file with each checkpoint.

    Raises:
        ValueError: both `saver` and `scaffold`, or neither or both of save_secs and save_steps.
    """

    def __init__(self, checkpoint_dir, save_secs=None, save_steps=None, saver=None,
                 checkpoint_basename="model.ckpt", scaffold=None, listeners=None, save_graph_def=True):
        _log.info("Create CheckpointSaverHook.")
        if saver is not None and scaffold is not None:
            raise ValueError("You cannot provide both saver and scaffold.")
        self._saver = saver
        self._checkpoint_dir = checkpoint_dir
        self._save_path = os.path.join(checkpoint_dir, checkpoint_basename)
        self._scaffold = scaffold
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)
        self._listeners = listeners or []
        self._steps_per_run = 1
        self._save_graph_def = save_graph_def

    def begin(self):
        self._graph = _ops.get_default_graph()
        self._summary_writer = FileWriterCache.get(self._checkpoint_dir)
        self._watch_global_step("CheckpointSaverHook")
        for listener in self._listeners:
            listener.begin()

    def after_create_session(self, session, coord):
        self._read_step_of(session)
        global_step = session.run(self._global_step_tensor)
        if self._save_graph_def:
            self._write_graph(session.graph)
        # The checkpoint written here holds the state at step `global_step`.
        self._save(session, global_step)
        self._timer.update_last_triggered_step(global_step)

    def before_run(self, run_context):
        return self._request

    def after_run(self, run_context, run_values):
        read = self._read_step
        if read is not None:   # the value after this step's update
            step = int(read())
        else:                  # the fetched value, which may predate it
            step = int(run_values.results) + self._steps_per_run
        if self._timer.should_trigger_for_step(step):
            global_step = step if read is not None else run_context.session.run(self._global_step_tensor)
            if self._timer.should_trigger_for_step(global_step):
                self._timer.update_last_triggered_step(global_step)
                if self._save(run_context.session, global_step):
                    run_context.request_stop()

    def end(self, session):
        last_step = session.run(self._global_step_tensor)
        if last_step != self._timer.last_triggered_step():
            self._save(session, last_step)
        for listener in self._listeners:
            listener.end(session, last_step)
        self._summary_writer.flush()

    def _write_graph(self, graph):
        """Writes graph.pbtxt and the graph and meta graph events (after every hook's `begin`, so
        the graph is complete)."""
        graph_def = graph.as_graph_def(add_shapes=True)
        training_util.write_graph(graph_def, self._checkpoint_dir, "graph.pbtxt")
        meta_graph_def = export_meta_graph(graph_def=graph_def, graph=graph,
                                           saver_def=self._get_saver().saver_def)
        self._summary_writer.add_graph(graph_def)
        self._summary_writer.add_meta_graph(meta_graph_def)

    def _save(self, session, step) -> bool:
        """Writes a checkpoint for `step`; returns True if a listener asked to stop."""
        _log.info("Calling checkpoint listeners before saving checkpoint %d...", step)
        for listener in self._listeners:
            listener.before_save(session, step)
        _log.info("Saving checkpoints for %d into %s.", step, self._save_path)
        self._get_saver().save(session, self._save_path, global_step=step,
                               write_meta_graph=self._save_graph_def)
        self._summary_writer.add_session_log(
            SessionLog(status=SessionLog.CHECKPOINT, checkpoint_path=self._save_path), step)
        _log.info("Calling checkpoint listeners after saving checkpoint %d...", step)
        should_stop = False
        for listener in self._listeners:
            if listener.after_save(session, step):
                _log.info("A CheckpointSaverListener requested that training be stopped. "
                          "listener: %s", listener)
                should_stop = True
        return should_stop

    def _get_saver(self):
        if self._saver is not None:
            return self._saver
        if self._scaffold is not None:
            return self._scaffold.saver
        savers = self._graph.get_collection(_ops.GraphKeys.SAVERS)
        if not savers:
            raise RuntimeError(f"No items in collection {_ops.GraphKeys.SAVERS}. Please add a saver "
                               "to the collection or provide a saver or scaffold.")
        if len(savers) > 1:
            raise RuntimeError(f"More than one item in collection {_ops.GraphKeys.SAVERS}. Please "
                               "indicate which one to use by passing it to the constructor.")
        self._saver = savers[0]
        return self._saver
