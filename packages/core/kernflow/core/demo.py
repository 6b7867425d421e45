"""`kernflow demo`: train a network on scikit-learn's bundled digits.

The MLP (64-128-128-10, ReLU) is the README's main job; ``--model convnet`` trains a small
convolutional network (conv2d + max_pool). The run saves a checkpoint every epoch and ``--resume``
continues from the latest one (without one it says so and starts from scratch). ``--optimizer``
takes a built-in short name or ``plugin:NAME``, any optimizer a plugin registered.

By default the demo runs in the embedded runtime. ``--target grpc://host:port`` (or any target a
session plugin serves, such as ``etcd://...``) runs the same graph on a cluster: the demo asks the
target's master for the cluster's devices and, when the cluster has a ``ps`` job, builds the graph
under ``kf.train.replica_device_setter`` (variables round robin on the ps tasks, the computation on
the master's own task). Checkpoints are written by the task that runs the save op, so on a cluster
of several machines ``--checkpoint-dir`` must be a path every task can reach.

The run also writes TensorBoard summaries (``train/loss`` and ``train/accuracy`` every
``SUMMARY_EVERY`` steps, ``test/accuracy`` and ``train/epoch_loss`` every epoch, and the graph) to
``<logdir>/<model>``; ``--logdir`` defaults to ``<checkpoint-dir>/logs`` and ``--logdir ''`` or
``--no-logdir`` turns the summaries off. The last line printed says how to open TensorBoard.

``--device`` picks where the model runs: ``auto`` (default) leaves it to placement, which prefers a
GPU when the GPU plugin registers one; ``cpu`` pins the model to ``/device:CPU:0``; ``gpu`` builds it
under ``/device:GPU:0`` (ops without a GPU kernel fall back to the CPU) and stops with a usage error
when no GPU device is registered. With ``--target`` the device applies to the computation's task
(variables stay on the ps tasks, pinned to their CPU for ``cpu``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time

OPTIMIZERS = {"sgd": "GradientDescent", "momentum": "Momentum", "adagrad": "Adagrad",
              "rmsprop": "RMSProp", "adam": "Adam"}
# ``--optimizer plugin:NAME``: the optimizer registered as NAME (`kf.train.get_optimizer`).
PLUGIN_PREFIX = "plugin:"
DEVICE_TYPES = {"cpu": "CPU", "gpu": "GPU"}
GPU_PLUGIN_HINT = ('install the GPU plugin: pip install "packages/kernels-gpu[cuda13]" '
                   '(or "packages/kernels-gpu[cuda12]" for CUDA 12)')
# Ops whose device is "where the model runs" in the demo's report.
_MODEL_OP_TYPES = ("MatMul", "Conv2D")
# Steps between two train/loss, train/accuracy summaries (a summary step runs 7 small ops more).
SUMMARY_EVERY = 10


class DemoUsageError(Exception):
    """The options cannot run here (e.g. ``--device gpu`` without a GPU); `run` exits with status 2."""


def _checked(convert, check, expected: str):
    """An argparse ``type``: `convert` the text, then require ``check(value)``."""
    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            value = None
        if value is None or not check(value):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value
    return parse


_positive_int = _checked(int, lambda v: v >= 1, "an integer >= 1")
_non_negative_int = _checked(int, lambda v: v >= 0, "an integer >= 0")
_positive_float = _checked(float, lambda v: v > 0, "a number > 0")


def _optimizer_choice(text: str) -> str:
    if text in OPTIMIZERS or (text.startswith(PLUGIN_PREFIX) and text[len(PLUGIN_PREFIX):]):
        return text
    raise argparse.ArgumentTypeError(f"invalid choice {text!r} (choose from "
                                     f"{', '.join(sorted(OPTIMIZERS))} or {PLUGIN_PREFIX}NAME)")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", choices=["mlp", "convnet"], default="mlp",
                        help="mlp (64-128-128-10, default) or convnet (two conv2d + max_pool layers)")
    parser.add_argument("--epochs", type=_non_negative_int, default=20,
                        help="epochs to train (default: 20); with --resume, the total, epochs already "
                             "done included")
    parser.add_argument("--batch-size", type=_positive_int, default=64,
                        help="examples per training step (default: 64)")
    parser.add_argument("--optimizer", type=_optimizer_choice, default=None, metavar="NAME",
                        help="sgd, momentum (default for the MLP: 0.9, lr 0.02), adagrad, rmsprop, adam "
                             "(default for the convnet), or any registered optimizer as plugin:NAME")
    parser.add_argument("--learning-rate", type=_positive_float, default=None, metavar="LR",
                        help="the optimizer's learning rate (default: one per optimizer)")
    parser.add_argument("--checkpoint-dir", default=os.path.join(os.getcwd(), "kernflow-demo-ckpt"),
                        metavar="DIR", help="checkpoints go to DIR/<model> every epoch (default: "
                                            "./kernflow-demo-ckpt)")
    parser.add_argument("--resume", action="store_true",
                        help="continue from the latest checkpoint in --checkpoint-dir (without one, "
                             "says so and starts from scratch)")
    parser.add_argument("--logdir", default=None,
                        help="TensorBoard summaries go to LOGDIR/<model> (default: <checkpoint-dir>/logs; "
                             "'' turns them off)")
    parser.add_argument("--no-logdir", dest="logdir", action="store_const", const="",
                        help="write no TensorBoard summaries")
    parser.add_argument("--seed", type=int, default=1,
                        help="seed of the initial weights and the batch order (default: 1)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--target", default="",
                        help="session target: empty for the embedded runtime (default), or a cluster's "
                             "master, e.g. grpc://localhost:2222 or etcd://127.0.0.1:2379/local")
    parser.add_argument("--device", choices=["auto", "cpu", "gpu"], default="auto",
                        help="where the model runs: auto (default: placement chooses, a GPU when one "
                             "is registered), cpu (/device:CPU:0) or gpu (/device:GPU:0, needs the GPU "
                             "plugin); with --target, the device of the computation's task")
    from kernflow.core import demo_sync
    demo_sync.configure(parser)


def load_digits(seed: int = 0):
    """Digits 8x8 scaled to [0, 1], split 80/20 with a fixed permutation."""
    import numpy as np
    from sklearn.datasets import load_digits as _load
    d = _load()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int64)
    perm = np.random.RandomState(seed).permutation(len(x))
    x, y = x[perm], y[perm]
    n_test = len(x) // 5
    return (x[n_test:], y[n_test:]), (x[:n_test], y[:n_test])


def build_mlp(kf, x, seed):
    h = x
    sizes = [64, 128, 128, 10]
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        w = kf.Variable(kf.random_normal([a, b], stddev=(2.0 / a) ** 0.5, seed=seed + i), name=f"w{i}")
        bias = kf.Variable(kf.zeros([b]), name=f"b{i}")
        h = kf.matmul(h, w) + bias
        if i < len(sizes) - 2:
            h = kf.nn.relu(h)
    return h


def build_convnet(kf, x, seed):
    img = kf.reshape(x, [-1, 8, 8, 1])
    w1 = kf.Variable(kf.truncated_normal([3, 3, 1, 32], stddev=0.3, seed=seed), name="conv1/w")
    b1 = kf.Variable(kf.zeros([32]), name="conv1/b")
    h = kf.nn.relu(kf.nn.bias_add(kf.nn.conv2d(img, w1, [1, 1, 1, 1], "SAME"), b1))
    h = kf.nn.max_pool(h, [1, 2, 2, 1], [1, 2, 2, 1], "SAME")            # 4x4x32
    w2 = kf.Variable(kf.truncated_normal([3, 3, 32, 64], stddev=0.08, seed=seed + 1), name="conv2/w")
    b2 = kf.Variable(kf.zeros([64]), name="conv2/b")
    h = kf.nn.relu(kf.nn.bias_add(kf.nn.conv2d(h, w2, [1, 1, 1, 1], "SAME"), b2))
    h = kf.nn.max_pool(h, [1, 2, 2, 1], [1, 2, 2, 1], "SAME")            # 2x2x64
    flat = kf.reshape(h, [-1, 2 * 2 * 64])
    w3 = kf.Variable(kf.truncated_normal([256, 10], stddev=0.06, seed=seed + 2), name="fc/w")
    b3 = kf.Variable(kf.zeros([10]), name="fc/b")
    return kf.matmul(flat, w3) + b3


def _optimizer_name(args) -> str:
    return args.optimizer or ("momentum" if args.model == "mlp" else "adam")


def optimizer_class(kf, name: str):
    """The optimizer class of ``--optimizer NAME`` (a built-in short name or ``plugin:NAME``).

    Raises:
        DemoUsageError: no optimizer is registered under a ``plugin:NAME``.
    """
    if not name.startswith(PLUGIN_PREFIX):
        return kf.train.get_optimizer(OPTIMIZERS[name])
    try:
        return kf.train.get_optimizer(name[len(PLUGIN_PREFIX):])
    except kf.errors.NotFoundError as e:
        raise DemoUsageError(f"--optimizer {name}: {e.message}") from None


def _optimizer(kf, args):
    name = _optimizer_name(args)
    lr = args.learning_rate
    cls = optimizer_class(kf, name)
    if name.startswith(PLUGIN_PREFIX):
        return cls(lr or 0.01)
    defaults = {"sgd": 0.1, "momentum": 0.02, "adagrad": 0.1, "rmsprop": 0.001, "adam": 0.003}
    lr = lr if lr is not None else defaults[name]
    if name == "momentum":
        return cls(lr, 0.9)
    return cls(lr)


def _progress(total, disabled, desc):
    try:
        from tqdm import tqdm
    except ImportError:  # the progress bar is optional
        return None
    return tqdm(total=total, disable=disabled, desc=desc, unit="step", leave=False)


def _no_device_error(device: str, where: str) -> DemoUsageError:
    hint = f"; {GPU_PLUGIN_HINT}" if device == "gpu" else ""
    return DemoUsageError(f"--device {device}: {where} has no {DEVICE_TYPES[device]} device{hint}")


def local_device_scope(kf, device: str = "auto"):
    """Returns the device scope for the embedded runtime's model (None for ``auto``).

    Raises:
        DemoUsageError: the embedded runtime has no device of the requested type.
    """
    if device == "auto":
        return None
    dtype = DEVICE_TYPES[device]
    with kf.Session(graph=kf.Graph()) as probe:
        types = {d.device_type for d in probe.list_devices()}
    if dtype not in types:
        raise _no_device_error(device, f"this machine (devices: {', '.join(sorted(types))})")
    return f"/device:{dtype}:0"


def cluster_device_setter(kf, target: str, device: str = "auto"):
    """Returns (device scope, description) for running the demo's graph on `target`.

    The scope is a device function, a device string or None (the master places everything).

    Asks the target's master for the cluster's devices. With a ``ps`` job, variables go to the ps
    tasks and everything else to the master's own task (its devices come first in the list);
    without one the master places the graph itself. `device` (``cpu``/``gpu``) pins the computation
    to that device type of its task (and, for ``cpu``, the variables to the ps tasks' CPUs).

    Raises:
        RuntimeError: the target lists no devices.
        DemoUsageError: no task that would run the computation has a device of type `device`.
    """
    from kernflow.core.framework import device_spec
    with kf.Session(target, graph=kf.Graph()) as probe:
        names = [d.name for d in probe.list_devices()]
    if not names:
        raise RuntimeError(f"{target} reports no devices")
    specs = [device_spec.DeviceSpec.from_string(n) for n in names]
    ps_tasks = len({s.task for s in specs if s.job == "ps"})
    jobs = sorted({s.job for s in specs})
    tasks = len({(s.job, s.task) for s in specs})
    where = f"{target}: {tasks} task(s) of job(s) {', '.join(jobs)}"
    dtype = DEVICE_TYPES.get(device)
    pin = f"/device:{dtype}:0" if dtype else ""
    # The master's own task (listed first), else the first task that is not a ps.
    own = next((s for s in specs if s.job != "ps"), None)
    if not ps_tasks or own is None:
        if dtype and not any(s.device_type == dtype for s in specs):
            raise _no_device_error(device, f"the cluster at {target}")
        return (pin or None), (f"{where}; model on {pin}" if pin else where)
    worker = f"/job:{own.job}/task:{own.task}"
    if dtype and not any(s.device_type == dtype and (s.job, s.task) == (own.job, own.task) for s in specs):
        raise _no_device_error(device, f"task {worker} of the cluster at {target}")
    ps_device = "/job:ps/device:CPU:0" if device == "cpu" else "/job:ps"
    setter = kf.train.replica_device_setter(ps_tasks=ps_tasks, ps_device=ps_device,
                                            worker_device=worker + pin)
    return setter, f"{where}; variables on {ps_tasks} ps task(s), computation on {worker}{pin}"


def model_devices(kf, sess, fetch, feed):
    """The devices that ran the model's MatMul/Conv2D ops in one traced run of `fetch` (sorted).

    Returns an empty list when the run could not be traced (e.g. a target that does not report
    step stats); the caller then reports the requested device.
    """
    md = kf.RunMetadata()
    try:
        sess.run(fetch, feed, options=kf.RunOptions(trace_level=kf.RunOptions.FULL_TRACE),
                 run_metadata=md)
    except Exception:  # the report is informational: training must not depend on tracing support
        return []
    found = set()
    for ds in md.step_stats.dev_stats:
        for ns in ds.node_stats:
            label = ns.op_type or ns.timeline_label
            if any(t in label for t in _MODEL_OP_TYPES):
                found.add(ds.device)
    return sorted(found)


def summary_logdir(args):
    """The demo's TensorBoard directory: ``--logdir``, by default ``<checkpoint-dir>/logs``; None
    when summaries are off."""
    logdir = getattr(args, "logdir", None)
    if logdir is None:
        return os.path.join(args.checkpoint_dir, "logs")
    return logdir or None


def train_summaries(kf, loss, correct, labels):
    """The merged ``train/loss`` and ``train/accuracy`` (of the batch) summary op."""
    with kf.name_scope("train"):
        accuracy = kf.cast(correct, kf.float32) / kf.cast(kf.size(labels), kf.float32)
        return kf.summary.merge([kf.summary.scalar("loss", loss), kf.summary.scalar("accuracy", accuracy)])


class _SummaryWriter:
    """Writes the demo's summaries to ``<logdir>/<model>``: the graph and a SessionLog START at the
    first step (TensorBoard then drops events of an earlier run from that step on), the train op's
    summaries every `SUMMARY_EVERY` steps, and the per-epoch values."""

    def __init__(self, kf, run_dir, graph, first_step):
        self._kf = kf
        self.writer = kf.summary.FileWriter(run_dir, graph=graph)
        self.writer.add_session_log(kf.summary.SessionLog(status=kf.summary.SessionLog.START), first_step)

    def wants(self, global_step):
        """Whether the step that starts at `global_step` should fetch the train summaries."""
        return global_step % SUMMARY_EVERY == 0

    def add(self, serialized_summary, global_step):
        """Writes a summary op's output."""
        self.writer.add_summary(serialized_summary, global_step)

    def epoch(self, global_step, epoch_loss, test_accuracy):
        """Writes the epoch's mean training loss and test accuracy."""
        Value = self._kf.summary.Summary.Value
        self.writer.add_summary(self._kf.summary.Summary(value=[
            Value(tag="train/epoch_loss", simple_value=epoch_loss),
            Value(tag="test/accuracy", simple_value=test_accuracy)]), global_step)

    def close(self):
        """Writes what is queued and closes the event file."""
        self.writer.close()


def run(args) -> int:
    import numpy as np
    import kernflow.core as kf
    try:
        optimizer_class(kf, _optimizer_name(args))  # an unknown plugin:NAME fails before any work
        return _train(kf, np, args)
    except DemoUsageError as e:
        print(f"kernflow demo: {e}", file=sys.stderr)
        return 2


def _train(kf, np, args) -> int:
    if getattr(args, "sync_replicas", 0):
        from kernflow.core import demo_sync
        return demo_sync.run_sync(kf, np, args, build_mlp if args.model == "mlp" else build_convnet,
                                  _optimizer, DemoUsageError)
    (xtr, ytr), (xte, yte) = load_digits()
    target = getattr(args, "target", "") or ""
    device = getattr(args, "device", "auto") or "auto"
    if target:
        setter, where = cluster_device_setter(kf, target, device)
        print(f"training on {where}", flush=True)
    else:
        setter = local_device_scope(kf, device)
    # Ops pinned to the GPU that have no GPU kernel (TF1's usual setting for GPU models) go to the CPU.
    config = kf.ConfigProto(allow_soft_placement=True) if device == "gpu" else None
    g = kf.Graph()
    with g.as_default():
        with kf.device(setter) if setter is not None else contextlib.nullcontext():
            kf.set_random_seed(args.seed)
            x = kf.placeholder(kf.float32, [None, 64], name="x")
            y = kf.placeholder(kf.int64, [None], name="y")
            logits = (build_mlp if args.model == "mlp" else build_convnet)(kf, x, args.seed)
            loss = kf.reduce_mean(kf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
            step = kf.train.get_or_create_global_step()
            train = _optimizer(kf, args).minimize(loss, global_step=step)
            correct = kf.reduce_sum(kf.cast(kf.equal(kf.argmax(logits, 1), y), kf.int32))
        # Outside the replica device scope (as TF1's Supervisor builds it): the restore ops must sit
        # with their variables on the ps tasks.
        saver = kf.train.Saver(max_to_keep=3)
        logdir = summary_logdir(args)
        summary = train_summaries(kf, loss, correct, y) if logdir else None
    ckpt_dir = os.path.join(args.checkpoint_dir, args.model)
    os.makedirs(ckpt_dir, exist_ok=True)
    steps_per_epoch = (len(xtr) + args.batch_size - 1) // args.batch_size
    with kf.Session(target, graph=g, config=config) as sess, contextlib.ExitStack() as cleanup:
        start_epoch = 0
        latest = kf.train.latest_checkpoint(ckpt_dir) if args.resume else None
        if latest:
            saver.restore(sess, latest)
            start_epoch = int(sess.run(step)) // steps_per_epoch
            print(f"resumed from {latest} (epoch {start_epoch})")
        else:
            if args.resume:
                print(f"kernflow demo: --resume: no checkpoint in {ckpt_dir}; training from scratch",
                      file=sys.stderr, flush=True)
            sess.run(kf.global_variables_initializer())
        devs = model_devices(kf, sess, correct, {x: xte[:8], y: yte[:8]})
        requested = setter if isinstance(setter, str) else "the devices placement chose"
        print(f"model on {', '.join(devs) or requested} (--device {device})", flush=True)
        rng = np.random.RandomState(args.seed)
        for _ in range(start_epoch):  # keep the shuffle sequence of an uninterrupted run
            rng.permutation(len(xtr))
        t0 = time.perf_counter()
        train_fn = sess.make_callable([train, loss], feed_list=[x, y])
        global_step = int(sess.run(step))
        writer = None
        if summary is not None:
            summary_fn = sess.make_callable([train, loss, summary], feed_list=[x, y])
            writer = _SummaryWriter(kf, os.path.join(logdir, args.model), g, global_step)
            cleanup.callback(writer.close)
        for epoch in range(start_epoch, args.epochs):
            perm = rng.permutation(len(xtr))
            bar = _progress(steps_per_epoch, args.no_progress, f"epoch {epoch + 1}/{args.epochs}")
            total = 0.0
            for i in range(steps_per_epoch):
                idx = perm[i * args.batch_size:(i + 1) * args.batch_size]
                if writer is not None and writer.wants(global_step):
                    _, l, s = summary_fn(xtr[idx], ytr[idx])
                    writer.add(s, global_step + 1)  # stamped with the step after the update, as TF
                else:
                    _, l = train_fn(xtr[idx], ytr[idx])
                global_step += 1
                total += float(l)
                if bar is not None:
                    bar.update(1)
                    if i % 10 == 0:
                        bar.set_postfix(loss=f"{l:.4f}")
            if bar is not None:
                bar.close()
            path = saver.save(sess, os.path.join(ckpt_dir, "model"), global_step=step)
            acc = sess.run(correct, {x: xte, y: yte}) / len(xte)
            if writer is not None:
                writer.epoch(global_step, total / steps_per_epoch, acc)
            print(f"epoch {epoch + 1:3d}  loss {total / steps_per_epoch:.4f}  test accuracy {acc:.4f}"
                  f"  ({path})", flush=True)
        acc = sess.run(correct, {x: xte, y: yte}) / len(xte)
        print(f"final test accuracy: {acc * 100:.2f}% ({args.model}, {args.epochs} epochs, "
              f"{time.perf_counter() - t0:.1f} s{', ' + target if target else ''})")
    if writer is not None:
        print(f"TensorBoard summaries in {os.path.join(logdir, args.model)}; watch them with:\n"
              f"  tensorboard --logdir {logdir}")
    return 0
