"""`kernflow demo`: train a network on scikit-learn's bundled digits.

The MLP (64-128-128-10, ReLU) is the README's main job; ``--model convnet`` trains a small
convolutional network (conv2d + max_pool). The run saves a checkpoint every epoch and ``--resume``
continues from the latest one.

By default the demo runs in the embedded runtime. ``--target grpc://host:port`` (or any target a
session plugin serves, such as ``etcd://...``) runs the same graph on a cluster: the demo asks the
target's master for the cluster's devices and, when the cluster has a ``ps`` job, builds the graph
under ``kf.train.replica_device_setter`` (variables round robin on the ps tasks, the computation on
the master's own task). Checkpoints are written by the task that runs the save op, so on a cluster
of several machines ``--checkpoint-dir`` must be a path every task can reach.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time

OPTIMIZERS = {"sgd": "GradientDescent", "momentum": "Momentum", "adagrad": "Adagrad",
              "rmsprop": "RMSProp", "adam": "Adam"}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", choices=["mlp", "convnet"], default="mlp")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--optimizer", choices=sorted(OPTIMIZERS) + ["plugin:NAME"], default=None,
                        help="sgd, momentum (default for the MLP: 0.9, lr 0.02), adagrad, rmsprop, adam "
                             "(default for the convnet), or any registered optimizer as plugin:NAME")
    parser.add_argument("--learning-rate", type=float, default=None)
    parser.add_argument("--checkpoint-dir", default=os.path.join(os.getcwd(), "kernflow-demo-ckpt"))
    parser.add_argument("--resume", action="store_true", help="continue from the latest checkpoint")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--target", default="",
                        help="session target: empty for the embedded runtime (default), or a cluster's "
                             "master, e.g. grpc://localhost:2222")


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


def _optimizer(kf, args):
    name = args.optimizer or ("momentum" if args.model == "mlp" else "adam")
    lr = args.learning_rate
    if name.startswith("plugin:"):
        cls = kf.train.get_optimizer(name.split(":", 1)[1])
        return cls(lr or 0.01)
    defaults = {"sgd": 0.1, "momentum": 0.02, "adagrad": 0.1, "rmsprop": 0.001, "adam": 0.003}
    lr = lr if lr is not None else defaults[name]
    cls = kf.train.get_optimizer(OPTIMIZERS[name])
    if name == "momentum":
        return cls(lr, 0.9)
    return cls(lr)


def _progress(total, disabled, desc):
    try:
        from tqdm import tqdm
    except ImportError:  # the progress bar is optional
        return None
    return tqdm(total=total, disable=disabled, desc=desc, unit="step", leave=False)


def cluster_device_setter(kf, target: str):
    """Returns (device function or None, description) for running the demo's graph on `target`.

    Asks the target's master for the cluster's devices. With a ``ps`` job, variables go to the ps
    tasks and everything else to the master's own task (its devices come first in the list);
    without one the master places the graph itself.
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
    # The master's own task (listed first), else the first task that is not a ps.
    own = next((s for s in specs if s.job != "ps"), None)
    if not ps_tasks or own is None:
        return None, where
    worker = f"/job:{own.job}/task:{own.task}"
    setter = kf.train.replica_device_setter(ps_tasks=ps_tasks, worker_device=worker)
    return setter, f"{where}; variables on {ps_tasks} ps task(s), computation on {worker}"


def run(args) -> int:
    import numpy as np
    import kernflow.core as kf
    (xtr, ytr), (xte, yte) = load_digits()
    target = getattr(args, "target", "") or ""
    setter = None
    if target:
        setter, where = cluster_device_setter(kf, target)
        print(f"training on {where}", flush=True)
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
    ckpt_dir = os.path.join(args.checkpoint_dir, args.model)
    os.makedirs(ckpt_dir, exist_ok=True)
    steps_per_epoch = (len(xtr) + args.batch_size - 1) // args.batch_size
    with kf.Session(target, graph=g) as sess:
        start_epoch = 0
        latest = kf.train.latest_checkpoint(ckpt_dir) if args.resume else None
        if latest:
            saver.restore(sess, latest)
            start_epoch = int(sess.run(step)) // steps_per_epoch
            print(f"resumed from {latest} (epoch {start_epoch})")
        else:
            sess.run(kf.global_variables_initializer())
        rng = np.random.RandomState(args.seed)
        for _ in range(start_epoch):  # keep the shuffle sequence of an uninterrupted run
            rng.permutation(len(xtr))
        t0 = time.perf_counter()
        train_fn = sess.make_callable([train, loss], feed_list=[x, y])
        for epoch in range(start_epoch, args.epochs):
            perm = rng.permutation(len(xtr))
            bar = _progress(steps_per_epoch, args.no_progress, f"epoch {epoch + 1}/{args.epochs}")
            total = 0.0
            for i in range(steps_per_epoch):
                idx = perm[i * args.batch_size:(i + 1) * args.batch_size]
                _, l = train_fn(xtr[idx], ytr[idx])
                total += float(l)
                if bar is not None:
                    bar.update(1)
                    if i % 10 == 0:
                        bar.set_postfix(loss=f"{l:.4f}")
            if bar is not None:
                bar.close()
            path = saver.save(sess, os.path.join(ckpt_dir, "model"), global_step=step)
            acc = sess.run(correct, {x: xte, y: yte}) / len(xte)
            print(f"epoch {epoch + 1:3d}  loss {total / steps_per_epoch:.4f}  test accuracy {acc:.4f}"
                  f"  ({path})", flush=True)
        acc = sess.run(correct, {x: xte, y: yte}) / len(xte)
        print(f"final test accuracy: {acc * 100:.2f}% ({args.model}, {args.epochs} epochs, "
              f"{time.perf_counter() - t0:.1f} s{', ' + target if target else ''})")
    return 0
