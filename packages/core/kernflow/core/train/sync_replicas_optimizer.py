"""`kf.train.SyncReplicasOptimizer`: synchronous data-parallel training with backup workers (TF1).

Every worker wraps its optimizer and builds the same graph (between-graph replication, usually
under `replica_device_setter`); the graph `apply_gradients` adds is TF1's:

* a local step per worker (``sync_rep_local_step``, LOCAL_VARIABLES, on the worker's task): the
  global step this worker's gradients were computed at;
* one conditional accumulator per variable on the variable's task (``shared_name`` =
  ``<variable name>/grad_accum``, so every worker shares it), sparse for `IndexedSlices` gradients;
* a token queue (``sync_token_q``) on the global step's task.

A worker's train op applies its gradients to the accumulators with its local step, then dequeues a
token and sets its local step to it. The chief's queue runner runs the sync op: take
`replicas_to_aggregate` gradients from every accumulator (their mean), apply them with the wrapped
optimizer (incrementing the global step), then enqueue ``max(total_num_replicas,
replicas_to_aggregate)`` tokens holding the new global step. An accumulator drops a gradient whose
local step is below its global step, so with ``total_num_replicas > replicas_to_aggregate`` a step
completes with the first gradients that arrive and the late (backup) workers' are dropped.

kernflow extension: the accumulators count what they drop (``AccumulatorNumDropped``);
`dropped_gradients` is the total over this optimizer's accumulators, ``sync_rep_dropped_gradients``
a variable the sync op sets to it after every step, and the chief's hook logs it when it grew.

Example::

    opt = kf.train.SyncReplicasOptimizer(kf.train.GradientDescentOptimizer(0.1),
                                         replicas_to_aggregate=2, total_num_replicas=3)
    train_op = opt.minimize(loss, global_step=global_step)
    hook = opt.make_session_run_hook(is_chief=(task == 0))
    with kf.train.MonitoredTrainingSession(master=server.target, is_chief=(task == 0),
                                           hooks=[hook]) as sess:
        while not sess.should_stop():
            sess.run(train_op)
"""

from __future__ import annotations

import logging

from kernflow.core.framework import device_spec as _device_spec
from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.framework.indexed_slices import IndexedSlices
from kernflow.core.train.optimizer import Optimizer
from kernflow.core.train.queue_runner import QueueRunner
from kernflow.core.train.session_run_hook import SessionRunArgs, SessionRunHook

__all__ = ["SyncReplicasOptimizer"]

_log = logging.getLogger(__name__)


def _task_device(device: str) -> str:
    """`device` without its device type and index: accumulators have CPU kernels only, so they go
    to the variable's task (its CPU), not to a GPU the variable may have been pinned to."""
    spec = _device_spec.DeviceSpec.from_string(device or "")
    return spec.replace(device_type=None, device_index=None).to_string()


def _fresh_read(var):
    """A read of `var` made now (so that control dependencies around it order it)."""
    from kernflow.core.ops import array_ops
    if hasattr(var, "read_value"):
        return var.read_value()
    return array_ops.identity(var)


class SyncReplicasOptimizer(Optimizer):
    """Aggregates the gradients of the replicas and applies their mean with the wrapped optimizer.

    See the module docstring for the graph it builds. Every worker runs the train op that
    `apply_gradients` (or `minimize`) returns; the chief runs `get_chief_queue_runner()` and
    `get_init_tokens_op()`, or simply uses the hook from `make_session_run_hook`.

    Args:
        opt: the optimizer that computes and applies the gradients (a `kf.train.Optimizer`).
        replicas_to_aggregate: how many gradients each variable update averages.
        total_num_replicas: how many workers there are (default `replicas_to_aggregate`); more
            than `replicas_to_aggregate` means backup workers, fewer means that workers compute
            several gradients per update.
        variable_averages: optional `ExponentialMovingAverage`-like object; its
            ``apply(variables_to_average)`` runs after each update.
        variables_to_average: the variables `variable_averages` maintains.
        use_locking: passed to the base class (the wrapped optimizer has its own).
        name: the name scope of the accumulators.

    Raises:
        ValueError: `replicas_to_aggregate` or `total_num_replicas` below 1.
    """

    def __init__(self, opt, replicas_to_aggregate, total_num_replicas=None, variable_averages=None,
                 variables_to_average=None, use_locking=False, name="sync_replicas"):
        if total_num_replicas is None:
            total_num_replicas = replicas_to_aggregate
        if replicas_to_aggregate < 1 or total_num_replicas < 1:
            raise ValueError(f"replicas_to_aggregate ({replicas_to_aggregate}) and total_num_replicas "
                             f"({total_num_replicas}) must be at least 1")
        super().__init__(use_locking, name)
        _log.info("SyncReplicasV2: replicas_to_aggregate=%s; total_num_replicas=%s",
                  replicas_to_aggregate, total_num_replicas)
        self._opt = opt
        self._replicas_to_aggregate = replicas_to_aggregate
        self._total_num_replicas = total_num_replicas
        self._tokens_per_step = max(total_num_replicas, replicas_to_aggregate)
        self._variable_averages = variable_averages
        self._variables_to_average = variables_to_average
        self._gradients_applied = False
        self._global_step = None
        self._local_step = None
        self._sync_token_queue = None
        self._chief_queue_runner = None
        self._accumulator_list = []      # (accumulator, device)
        self._dropped_gradients = None
        self._dropped_variable = None
        self.local_step_init_op = None
        self.chief_init_op = None
        self.ready_for_local_init_op = None

    # ------------------------------------------------------------------ delegated to the wrapped optimizer
    def compute_gradients(self, *args, **kwargs):
        """The wrapped optimizer's `compute_gradients`: each replica's own gradients, which may be
        changed (clipped...) before `apply_gradients` aggregates them."""
        return self._opt.compute_gradients(*args, **kwargs)

    def get_slot(self, *args, **kwargs):
        """The wrapped optimizer's slot variable for (var, name), or None."""
        return self._opt.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        """The wrapped optimizer's slot names."""
        return self._opt.get_slot_names(*args, **kwargs)

    def variables(self):
        """The wrapped optimizer's variables (not the local step, as TF)."""
        return self._opt.variables()

    # ------------------------------------------------------------------ the graph
    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        """Builds the synchronization (see the module docstring) and returns this worker's train op.

        Args:
            grads_and_vars: (gradient, variable) pairs from `compute_gradients`.
            global_step: the global step variable (required: staleness is checked against it).
            name: unused; accepted for the `Optimizer` interface (as TF).

        Returns:
            The train op: a tensor that, once this worker's gradients are in the accumulators,
            waits for a token and sets the local step to it.

        Raises:
            ValueError: no (gradient, variable) pairs, or no `global_step`.
        """
        from kernflow.core.ops import control_flow_ops, state_ops, variables
        grads_and_vars = list(grads_and_vars)
        if not grads_and_vars:
            raise ValueError("Must supply at least one variable")
        if global_step is None:
            raise ValueError("Global step is required to check staleness")
        self._global_step = global_step
        self._local_step = self._make_local_step(global_step)
        self.local_step_init_op = state_ops.assign(self._local_step, global_step)
        self.ready_for_local_init_op = variables.report_uninitialized_variables(
            variables.global_variables())
        with _ops.name_scope(None, self._name):
            apply_ops, aggregated = self._accumulate(grads_and_vars)
            with _ops.device(global_step.device), _ops.name_scope(""):
                update_op = self._opt.apply_gradients(aggregated, global_step)
            train_op = self._build_sync(apply_ops, update_op)
            init_ops = [self.local_step_init_op]
            for accum, dev in self._accumulator_list:
                with _ops.device(dev):
                    init_ops.append(accum.set_global_step(global_step, name="SetGlobalStep"))
            self.chief_init_op = control_flow_ops.group(*init_ops)
        self._gradients_applied = True
        return train_op

    def _make_local_step(self, global_step):
        """The worker's local step, on this worker's task (a ps op would not be)."""
        from kernflow.core.ops import control_flow_ops
        from kernflow.core.ops.variables import Variable
        local_anchor = control_flow_ops.no_op()
        with _ops.colocate_with(local_anchor):
            return Variable(initial_value=0, trainable=False,
                            collections=[_ops.GraphKeys.LOCAL_VARIABLES],
                            dtype=global_step.dtype.base_dtype, name="sync_rep_local_step")

    def _accumulate(self, grads_and_vars):
        """One accumulator per variable; returns (the apply ops, [(mean gradient, variable)])."""
        from kernflow.core.ops.accumulator_ops import (ConditionalAccumulator,
                                                       SparseConditionalAccumulator)
        apply_ops, aggregated = [], []
        for grad, var in grads_and_vars:
            if grad is None:
                aggregated.append((None, var))  # passed through, as TF
                continue
            dev = _task_device(var.device)
            with _ops.device(dev):
                shared = var.name + "/grad_accum"
                if isinstance(grad, IndexedSlices):
                    accum = SparseConditionalAccumulator(grad.dtype, shape=var.get_shape(),
                                                         shared_name=shared)
                    apply_ops.append(accum.apply_indexed_slices_grad(grad, local_step=self._local_step))
                    mean = accum.take_indexed_slices_grad(self._replicas_to_aggregate)
                elif isinstance(grad, _ops.Tensor):
                    accum = ConditionalAccumulator(grad.dtype, shape=var.get_shape(), shared_name=shared)
                    apply_ops.append(accum.apply_grad(grad, local_step=self._local_step))
                    mean = accum.take_grad(self._replicas_to_aggregate)
                else:
                    raise ValueError(f"Unknown grad type {type(grad).__name__} for variable {var.name}")
            aggregated.append((mean, var))
            self._accumulator_list.append((accum, dev))
        return apply_ops, aggregated

    def _build_sync(self, apply_ops, update_op):
        """The token queue, the worker's train op and the chief's queue runner."""
        from kernflow.core.ops import array_ops, state_ops
        from kernflow.core.ops.data_flow_ops import FIFOQueue
        global_step = self._global_step
        with _ops.device(global_step.device), _ops.name_scope(""):
            self._sync_token_queue = FIFOQueue(-1, global_step.dtype.base_dtype, shapes=[()],
                                               name="sync_token_q", shared_name="sync_token_q")
            # The queue runner needs a queue to close on stop; closing the token queue would
            # end training for every worker, so it gets a queue of its own (as TF).
            dummy_queue = FIFOQueue(1, _dtypes.int32, shapes=[()], name="dummy_queue",
                                    shared_name="dummy_queue")
            with _ops.control_dependencies(apply_ops):
                token = self._sync_token_queue.dequeue()
            train_op = state_ops.assign(self._local_step, token)
            record_dropped = self._count_dropped(update_op)
            with _ops.control_dependencies([update_op, record_dropped]):
                # A read ordered after the update (not the snapshot, which nothing orders): the
                # tokens carry the new global step.
                tokens = array_ops.fill([self._tokens_per_step], _fresh_read(global_step))
                sync_op = self._sync_token_queue.enqueue_many((tokens,))
            if self._variable_averages is not None:
                with _ops.control_dependencies([sync_op]), _ops.name_scope(""):
                    sync_op = self._variable_averages.apply(self._variables_to_average)
            self._chief_queue_runner = QueueRunner(dummy_queue, [sync_op])
        return train_op

    def _count_dropped(self, update_op):
        """Builds `dropped_gradients` and the op, run after `update_op`, that records it."""
        from kernflow.core.ops import state_ops
        from kernflow.core.ops.variables import Variable
        with _ops.init_scope(), _ops.colocate_with(self._global_step), _ops.name_scope(None):
            self._dropped_variable = Variable(
                initial_value=0, trainable=False, dtype=_dtypes.int64, name="sync_rep_dropped_gradients")
        self._dropped_gradients = self._sum_dropped("dropped_gradients")
        with _ops.control_dependencies([update_op]):
            total = self._sum_dropped("dropped_gradients_after_update")
            return state_ops.assign(self._dropped_variable, total).op

    def _sum_dropped(self, name):
        """The accumulators' dropped counts, summed on each task first (one tensor per task)."""
        from kernflow.core.ops import math_ops
        by_device: dict = {}
        for accum, dev in self._accumulator_list:
            by_device.setdefault(dev, []).append(accum.num_dropped())
        partial = []
        for dev, counts in by_device.items():
            with _ops.device(dev):
                partial.append(counts[0] if len(counts) == 1 else math_ops.add_n(counts))
        if not partial:
            from kernflow.core.ops import array_ops
            return array_ops.constant(0, _dtypes.int64, name=name)
        return math_ops.add_n(partial, name=name) if len(partial) > 1 else \
            _identity(partial[0], name)

    # ------------------------------------------------------------------ for the chief
    def _check_applied(self, what):
        if not self._gradients_applied:
            raise ValueError(f"{what} should be called after apply_gradients().")

    def get_chief_queue_runner(self):
        """The `QueueRunner` the chief runs: aggregate, apply, increment the step, enqueue tokens.

        Raises:
            ValueError: called before `apply_gradients`.
        """
        if not self._gradients_applied:
            raise ValueError("Should be called after apply_gradients().")
        return self._chief_queue_runner

    def get_init_tokens_op(self, num_tokens=-1):
        """An op filling the token queue with `num_tokens` tokens (the current global step).

        The chief runs it once at the start, so that the replicas can finish their first step
        (each token lets one replica leave one step).

        Args:
            num_tokens: how many tokens (-1: `replicas_to_aggregate`); at least
                ``replicas_to_aggregate - total_num_replicas``. 0 adds none.

        Returns:
            The op.

        Raises:
            ValueError: called before `apply_gradients`, or too few tokens.
        """
        from kernflow.core.ops import array_ops, control_flow_ops
        self._check_applied("get_init_tokens_op()")
        tokens_needed = self._replicas_to_aggregate - self._total_num_replicas
        if num_tokens == -1:
            num_tokens = self._replicas_to_aggregate
        elif num_tokens < tokens_needed:
            raise ValueError(f"Too few tokens to finish the first step: {num_tokens} (given) vs "
                             f"{tokens_needed} (needed)")
        if num_tokens <= 0:
            return control_flow_ops.no_op(name="no_init_tokens")
        with _ops.device(self._global_step.device), _ops.name_scope(""):
            tokens = array_ops.fill([num_tokens], self._global_step)
            return self._sync_token_queue.enqueue_many((tokens,))

    @property
    def dropped_gradients(self):
        """An int64 scalar tensor: the stale gradients this optimizer's accumulators dropped.

        A kernflow extension. Each accumulator counts its own drops, so a late worker's gradient
        of a model with V variables counts V times; counts start at 0 when the accumulators are
        created (a restarted ps task starts again from 0).

        Raises:
            ValueError: read before `apply_gradients`.
        """
        self._check_applied("dropped_gradients")
        return self._dropped_gradients

    @property
    def dropped_gradients_variable(self):
        """The non-trainable int64 variable ``sync_rep_dropped_gradients`` (on the global step's
        task) that the chief's sync op sets to `dropped_gradients` after every update.

        Raises:
            ValueError: read before `apply_gradients`.
        """
        self._check_applied("dropped_gradients_variable")
        return self._dropped_variable

    def make_session_run_hook(self, is_chief, num_tokens=-1, log_dropped_every_n_steps=100):
        """A `SessionRunHook` that initializes the local step and, on the chief, the accumulators'
        global steps and the tokens, and starts the chief's queue runner.

        Args:
            is_chief: whether this worker is the chief.
            num_tokens: passed to `get_init_tokens_op` (chief only).
            log_dropped_every_n_steps: the chief logs the dropped-gradient count every N of its
                steps when it grew (kernflow extension; None or 0: never).

        Returns:
            The hook.
        """
        return _SyncReplicasOptimizerHook(self, is_chief, num_tokens, log_dropped_every_n_steps)


def _identity(t, name):
    from kernflow.core.ops import array_ops
    return array_ops.identity(t, name=name)


class _TokenDrain:
    """Empties the token queue of tokens an earlier chief session left (kernflow extension).

    A token carries the global step of the step that made it; once the chief has restored or
    initialized the model, tokens of an earlier session (the release at the end of a finished
    run, a step's tokens no worker took before the chief died) would let a worker run ahead with
    a local step from another model state. The chief takes them out before adding its own. A
    worker may take one at the same moment, so each try waits at most `TIMEOUT_MS` for the count
    it read and a short one is tried again.
    """

    TIMEOUT_MS = 1000
    TRIES = 3

    def __init__(self, queue):
        from kernflow.core.ops import array_ops
        self._size = queue.size(name="sync_token_q_size")
        self._n = array_ops.placeholder(_dtypes.int32, [], name="sync_token_q_drain_n")
        self._take = queue.dequeue_many(self._n, name="sync_token_q_drain")

    def __call__(self, session) -> int:
        from kernflow.core.framework import errors
        from kernflow.core.protobuf.config_pb2 import RunOptions
        drained = 0
        for _ in range(self.TRIES):
            n = int(session.run(self._size))
            if n <= 0:
                break
            try:
                session.run(self._take, {self._n: n}, options=RunOptions(timeout_in_ms=self.TIMEOUT_MS))
                drained += n
            except errors.DeadlineExceededError:
                continue
        if drained:
            _log.info("SyncReplicasOptimizer: dropped %d tokens left by an earlier session", drained)
        return drained


class _SyncReplicasOptimizerHook(SessionRunHook):
    """Runs the SyncReplicasOptimizer's initialization and starts the chief's queue runner.

    Args:
        sync_optimizer: the `SyncReplicasOptimizer`, after `apply_gradients`.
        is_chief: whether this worker is the chief.
        num_tokens: tokens the chief enqueues at the start (see `get_init_tokens_op`).
        log_every_n_steps: the chief logs the dropped-gradient count every N of its steps.
    """

    def __init__(self, sync_optimizer, is_chief, num_tokens, log_every_n_steps=100):
        self._sync_optimizer = sync_optimizer
        self._is_chief = is_chief
        self._num_tokens = num_tokens
        self._log_every_n_steps = log_every_n_steps if is_chief else None
        self._steps = 0
        self._dropped_logged = 0

    def begin(self):
        """Picks the chief's or a worker's init ops (and, on the chief, creates the token op).

        Raises:
            ValueError: `apply_gradients` was not called yet.
        """
        opt = self._sync_optimizer
        if not opt._gradients_applied:
            raise ValueError("SyncReplicasOptimizer.apply_gradient should be called before using the hook.")
        self._ready_for_local_init_op = opt.ready_for_local_init_op
        if self._is_chief:
            self._local_init_op = opt.chief_init_op
            self._q_runner = opt.get_chief_queue_runner()
            self._init_tokens_op = opt.get_init_tokens_op(self._num_tokens)
            # One more token per replica, for the workers still waiting when training ends.
            self._release_tokens_op = opt.get_init_tokens_op(max(opt._total_num_replicas, 1))
            self._drain = _TokenDrain(opt._sync_token_queue)
        else:
            self._local_init_op = opt.local_step_init_op
            self._q_runner = None
            self._init_tokens_op = None
            self._release_tokens_op = None
            self._drain = None

    def after_create_session(self, session, coord):
        """Runs the local init (and, on the chief, the tokens) and starts the chief's queue runner.

        Raises:
            RuntimeError: the global variables are not initialized yet.
        """
        from kernflow.core.train.session_manager import _ready
        ready, msg = _ready(self._ready_for_local_init_op, session,
                            "Model is not ready for SyncReplicasOptimizer local init.")
        if not ready:
            raise RuntimeError(f"Init operations did not make model ready for SyncReplicasOptimizer "
                               f"local_init. Init op: {self._local_init_op.name}, error: {msg}")
        session.run(self._local_init_op)
        if self._drain is not None:
            self._drain(session)
        if self._init_tokens_op is not None:
            session.run(self._init_tokens_op)
        if self._q_runner is not None:
            self._q_runner.create_threads(session, coord=coord, daemon=True, start=True)

    def end(self, session):
        """On the chief, when training ended normally: one more token for every replica (kernflow
        extension).

        A worker that waits for a token after the chief's last step gets one, finishes its step
        (a stale gradient, dropped) and sees the final global step (its StopAtStepHook stops it);
        in TF1 it waits forever, since the chief's queue runner is gone. The queue is not closed,
        so a later chief can train on with the same ps tasks.
        """
        if self._release_tokens_op is None:
            return
        try:
            session.run(self._release_tokens_op)
        except Exception as e:  # noqa: BLE001 - the tasks may already be gone; training is over
            _log.warning("SyncReplicasOptimizer: could not release the waiting workers: %s", e)

    def before_run(self, run_context):
        if not self._log_every_n_steps or self._log_every_n_steps <= 0:
            return None
        self._steps += 1
        if self._steps % self._log_every_n_steps:
            return None
        return SessionRunArgs(self._sync_optimizer.dropped_gradients)

    def after_run(self, run_context, run_values):
        dropped = run_values.results
        if dropped is not None and int(dropped) > self._dropped_logged:
            self._dropped_logged = int(dropped)
            _log.info("SyncReplicasOptimizer: %d stale gradients dropped so far", self._dropped_logged)
