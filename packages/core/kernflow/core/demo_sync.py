"""`kernflow demo --target T --sync-replicas N [--backup-workers B]`: synchronous data-parallel training.

The digits model of `kernflow.core.demo`, trained by ``N + B`` replicas with
`kf.train.SyncReplicasOptimizer` (each global step applies the mean of the first ``N`` gradients that
arrive; the ``B`` late ones are dropped and counted) under `kf.train.MonitoredTrainingSession`, the way
a TF1 between-graph replicated job does it: replica ``r`` builds its own graph with the variables on the
``ps`` tasks and its computation on ``/job:worker/task:r``, and runs its own session against the
target's master; replica 0 is the chief (it initializes or restores the model, runs the sync queue
runner and saves checkpoints every ``--save-checkpoint-steps``).

By default this process runs every replica, one thread each (the computation runs on the worker
tasks; the threads mostly wait for their steps). ``--task-index R`` runs replica ``R`` only, so the
replicas can be separate processes on separate machines, as in TF1.

Each replica's batch is a function of its local step (the global step its gradient is computed at):
replica ``r`` at step ``s`` takes batch ``s * (N + B) + r`` of a sequence of shuffled epochs. When a
task dies and the monitored sessions recover from the last checkpoint, the replicas redo the steps
after it on the same batches, so a run interrupted by failures ends where an uninterrupted one does
(up to the order gradients are summed in, and, with backup workers, which gradients were first).

Every session a replica creates is reported: ``replica R: session at global step S (started)``,
then ``(recovered)`` for each one its monitored session recreated after a task failed; the chief
shows its progress (a bar, or with ``--no-progress`` a ``global step S/LAST`` line per checkpoint
interval) and prints the dropped-gradient count at the end. The chief adds no initial tokens
(``num_tokens=0``): each replica applies one gradient and waits for the step's tokens, so no replica
runs ahead alone.
"""

from __future__ import annotations

import os
import threading
import time

__all__ = ["configure", "run_sync"]

# How long the non-chief replicas may take to finish after the chief did (they stop on the chief's
# last step, or when its closed token queue tells them to).
_FINISH_TIMEOUT_S = 120.0


def configure(parser) -> None:
    """Adds the sync-replica options to `kernflow demo`'s parser."""
    parser.add_argument("--sync-replicas", type=int, default=0, metavar="N",
                        help="train with SyncReplicasOptimizer: aggregate N gradients per step "
                             "(needs --target with a ps job and N + B worker tasks)")
    parser.add_argument("--backup-workers", type=int, default=0, metavar="B",
                        help="with --sync-replicas: B more replicas whose late gradients are dropped")
    parser.add_argument("--task-index", type=int, default=None, metavar="R",
                        help="with --sync-replicas: run replica R only (0 is the chief); default: all, "
                             "one thread each")
    parser.add_argument("--save-checkpoint-steps", type=int, default=None, metavar="S",
                        help="with --sync-replicas: the chief saves a checkpoint every S global steps "
                             "(default: every epoch)")


class _ReplicaBatches:
    """Replica `replica`'s batch at local step s: batch ``s * replicas + replica`` of a sequence of
    epochs, each a permutation of the training set drawn from ``seed + epoch``."""

    def __init__(self, x, y, batch_size, replicas, replica, seed):
        self.x, self.y = x, y
        self.batch_size, self.replicas, self.replica, self.seed = batch_size, replicas, replica, seed
        self.per_epoch = (len(x) + batch_size - 1) // batch_size
        self._perms: dict[int, object] = {}

    def __call__(self, step: int):
        import numpy as np
        k = step * self.replicas + self.replica
        epoch, i = divmod(k, self.per_epoch)
        perm = self._perms.get(epoch)
        if perm is None:
            perm = np.random.RandomState(self.seed + epoch).permutation(len(self.x))
            self._perms = {epoch: perm}
        idx = perm[i * self.batch_size:(i + 1) * self.batch_size]
        return self.x[idx], self.y[idx]


def _feed_hook_class(kf):
    class _LocalStepFeedHook(kf.train.SessionRunHook):
        """Feeds each run the batch of the replica's local step and learns the next local step from
        the train op (its value is the token the step dequeued); re-reads it in every new session."""

        def __init__(self, name, train_op, local_step, x, y, batches, report, created=None):
            self._name, self._train, self._local_step = name, train_op, local_step
            self._x, self._y, self._batches, self._report = x, y, batches, report
            self._created = created
            self._step = None
            self._sessions = 0

        def after_create_session(self, session, coord):
            self._step = int(session.run(self._local_step))
            how = "recovered" if self._sessions else "started"
            self._sessions += 1
            self._report(f"{self._name}: session at global step {self._step} ({how})")
            if self._created is not None:
                self._created.set()

        def before_run(self, run_context):
            bx, by = self._batches(self._step)
            return kf.train.SessionRunArgs(self._train, feed_dict={self._x: bx, self._y: by})

        def after_run(self, run_context, run_values):
            self._step = int(run_values.results)

    return _LocalStepFeedHook


def _worker_tasks(kf, target):
    """(ps task count, worker task indices) of the cluster at `target`."""
    from kernflow.core.framework import device_spec
    with kf.Session(target, graph=kf.Graph()) as probe:
        specs = [device_spec.DeviceSpec.from_string(d.name) for d in probe.list_devices()]
    ps = len({s.task for s in specs if s.job == "ps"})
    workers = sorted({s.task for s in specs if s.job == "worker"})
    return ps, workers


def run_sync(kf, np, args, build_model, make_optimizer, usage_error) -> int:
    """Trains with SyncReplicasOptimizer on ``args.target``; returns the exit status."""
    from kernflow.core.demo import load_digits
    n, b = args.sync_replicas, args.backup_workers
    total = n + b
    if not args.target:
        raise usage_error("--sync-replicas needs --target (a cluster with a ps job and worker tasks)")
    if n < 1 or b < 0:
        raise usage_error(f"--sync-replicas must be >= 1 and --backup-workers >= 0, got {n} and {b}")
    if args.task_index is not None and not 0 <= args.task_index < total:
        raise usage_error(f"--task-index must be in [0, {total}), got {args.task_index}")
    ps, workers = _worker_tasks(kf, args.target)
    if ps < 1 or len(workers) < total or workers[:total] != list(range(total)):
        raise usage_error(f"{args.target} has {ps} ps task(s) and worker tasks {workers}; "
                          f"{n} + {b} replicas need a ps job and worker tasks 0..{total - 1}")
    (xtr, ytr), (xte, yte) = load_digits()
    steps_per_epoch = (len(xtr) + args.batch_size - 1) // args.batch_size
    last_step = args.epochs * steps_per_epoch
    ckpt_dir = os.path.join(args.checkpoint_dir, f"{args.model}-sync")
    save_steps = args.save_checkpoint_steps or steps_per_epoch
    print(f"training on {args.target}: {total} replicas on /job:worker/task:0..{total - 1}, {n} "
          f"gradients per step ({b} backup), variables on {ps} ps task(s); {last_step} global steps, "
          f"checkpoints every {save_steps} in {ckpt_dir}", flush=True)
    lock = threading.Lock()

    def report(line):
        with lock:
            print(line, flush=True)

    results: dict[int, object] = {}
    # In this process the other replicas start once the chief has its session: a cluster that ran
    # this model before still holds its variables, and a replica that found them "ready" before
    # the chief initialized or restored them would compute its first gradient on stale weights.
    chief_ready = threading.Event()
    if args.task_index is not None:
        chief_ready.set()

    def replica(r):
        try:
            if r != 0:
                while not chief_ready.wait(1.0):
                    if isinstance(results.get(0), BaseException):
                        return
            results[r] = _train_replica(kf, args, r, n, total, ps, build_model, make_optimizer,
                                        (xtr, ytr, xte, yte), last_step, save_steps, ckpt_dir, report,
                                        chief_ready if r == 0 else None)
        except BaseException as e:  # reported by the main thread
            results[r] = e

    indices = [args.task_index] if args.task_index is not None else list(range(total))
    t0 = time.perf_counter()
    threads = [threading.Thread(target=replica, args=(r,), name=f"replica-{r}", daemon=True)
               for r in indices]
    for t in threads:
        t.start()
    chief_thread = threads[indices.index(0)] if 0 in indices else None
    if chief_thread is not None:
        chief_thread.join()
    for t in threads:
        t.join(_FINISH_TIMEOUT_S if chief_thread is not None else None)
        if t.is_alive():
            report(f"{t.name} did not finish {_FINISH_TIMEOUT_S:.0f} s after the chief")
            return 1
    failed = {r: e for r, e in results.items() if isinstance(e, BaseException)}
    for r, e in sorted(failed.items()):
        report(f"replica {r} failed: {type(e).__name__}: {e}")
    if failed:
        return 1
    if 0 in results:
        acc, step, dropped = results[0]
        print(f"stale gradients dropped since the ps tasks started: {dropped}")
        print(f"final test accuracy: {acc * 100:.2f}% ({args.model}, sync replicas {n} of {total}, "
              f"global step {step}, {time.perf_counter() - t0:.1f} s, {args.target})", flush=True)
    return 0


def _train_replica(kf, args, r, n, total, ps, build_model, make_optimizer, data, last_step,
                   save_steps, ckpt_dir, report, created=None):
    """Replica `r`'s training loop; the chief returns (test accuracy, global step, dropped count)."""
    xtr, ytr, xte, yte = data
    is_chief = r == 0
    worker = f"/job:worker/task:{r}"
    g = kf.Graph()
    with g.as_default():
        with kf.device(kf.train.replica_device_setter(ps_tasks=ps, worker_device=worker)):
            kf.set_random_seed(args.seed)
            x = kf.placeholder(kf.float32, [None, 64], name="x")
            y = kf.placeholder(kf.int64, [None], name="y")
            logits = build_model(kf, x, args.seed)
            loss = kf.reduce_mean(kf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
            step = kf.train.get_or_create_global_step()
            opt = kf.train.SyncReplicasOptimizer(make_optimizer(kf, args), replicas_to_aggregate=n,
                                                 total_num_replicas=total)
            train = opt.minimize(loss, global_step=step)
            correct = kf.reduce_sum(kf.cast(kf.equal(kf.argmax(logits, 1), y), kf.int32))
        local_step = next(v for v in kf.local_variables() if v.op.name.endswith("sync_rep_local_step"))
        batches = _ReplicaBatches(xtr, ytr, args.batch_size, total, r, args.seed)
        # No initial tokens: every replica applies one gradient, then waits for the step's tokens,
        # so no replica (the chief included) runs ahead alone at the start or after a recovery.
        hooks = [opt.make_session_run_hook(is_chief, num_tokens=0),
                 _feed_hook_class(kf)(f"replica {r}", train, local_step, x, y, batches, report, created),
                 kf.train.StopAtStepHook(last_step=last_step)]
        # A replica's sessions need the ps tasks and its own task only, not the other replicas'.
        config = kf.ConfigProto(device_filters=["/job:ps", worker])
        bar = _progress_bar(kf, args, is_chief, last_step, step, save_steps, report)
        with kf.train.MonitoredTrainingSession(
                master=args.target, is_chief=is_chief, checkpoint_dir=ckpt_dir if is_chief else None,
                hooks=hooks + ([bar] if bar is not None else []), save_checkpoint_steps=save_steps,
                save_summaries_steps=None, config=config, log_step_count_steps=None,
                stop_grace_period_secs=5) as sess:
            while not sess.should_stop():
                sess.run(train)
        if not is_chief:
            return None
        with kf.Session(args.target, graph=g, config=config) as sess:
            hits, gs = sess.run([correct, step], {x: xte, y: yte})
            # The accumulators count per variable: a dropped gradient counts once per variable.
            with g.as_default():
                variables = len(kf.trainable_variables())
            dropped = int(sess.run(opt.dropped_gradients)) // max(variables, 1)
    return hits / len(xte), int(gs), dropped


def _progress_bar(kf, args, is_chief, last_step, step, every, report):
    """The chief's progress: a tqdm bar at the global step, or with ``--no-progress`` (or no tqdm)
    a line every `every` global steps."""
    if not is_chief:
        return None
    tqdm = None
    if not args.no_progress:
        try:
            from tqdm import tqdm
        except ImportError:  # the progress bar is optional
            pass

    class _Progress(kf.train.SessionRunHook):
        def begin(self):
            self.bar = tqdm(total=last_step, desc="global step", unit="step", leave=False) if tqdm else None
            self.reported = 0

        def before_run(self, run_context):
            return kf.train.SessionRunArgs(step)

        def after_run(self, run_context, run_values):
            at = int(run_values.results)
            if self.bar is not None:
                self.bar.update(at - self.bar.n)
            elif at >= self.reported + every or at >= last_step > self.reported:
                self.reported = at
                report(f"global step {at}/{last_step}")

        def end(self, session):
            if self.bar is not None:
                self.bar.close()

    return _Progress()
