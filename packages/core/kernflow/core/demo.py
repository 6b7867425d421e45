"""`kernflow demo`: a real computation on the embedded runtime (placeholder until training lands)."""

from __future__ import annotations


def configure(parser) -> None:
    parser.add_argument("--steps", type=int, default=100, help="number of steps to run")


def run(args) -> int:
    import numpy as np
    import kernflow.core as kf
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [None])
        acc = kf.Variable(kf.zeros([1]) if hasattr(kf, "zeros") else np.zeros([1], np.float32))
        upd = acc.assign_add(kf.constant(np.ones([1], np.float32)))
        y = x + 1.0
    with kf.Session(graph=g) as sess:
        sess.run(acc.initializer)
        for _ in range(args.steps):
            sess.run(upd)
        print("x + 1 =", sess.run(y, {x: np.arange(3, dtype=np.float32)}), "acc =", sess.run(acc))
    return 0
