"""An input pipeline with queues: reader threads fill a RandomShuffleQueue while training dequeues.

Reader ops draw `--reader-chunk` random training examples from the in-memory digits data
(sklearn's load_digits, no download) and enqueue them into a RandomShuffleQueue; a QueueRunner
runs `--readers` of them in threads. The training loop dequeues a batch and runs one step of a
digits MLP (64-128-10, ReLU, softmax cross-entropy, SGD) on it, then reports on the test set.

The loop measures how long training waited for input: each step runs the dequeue on its own
(``sess.run(batch)``, then the train op with the batch fed), after sampling the queue size. A
dequeue that found fewer than ``batch_size + min_after_dequeue`` elements may have blocked; the
whole time of those dequeues counts as waiting (an upper bound on the time blocked). When the
readers keep up, the queue stays full and training hardly waits; with ``--reader-chunk 1`` the
readers run one Session.run per example and cannot keep up.

Prints one JSON line: accuracy, steps/s, dequeue wait (total and fraction of the loop's time),
the queue size over time, and the time spent running dequeues at all.

Usage: python examples/input_pipeline.py [--steps 3000] [--batch-size 64] [--readers 2]
       [--reader-chunk 64] [--capacity 2000] [--min-after-dequeue 500] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

import kernflow.core as kf
from kernflow.core.demo import load_digits  # digits 8x8 in [0, 1], split 80/20


def build_input(xtr, ytr, args):
    """The RandomShuffleQueue, its QueueRunner of reader ops, and the dequeued batch."""
    queue = kf.RandomShuffleQueue(args.capacity, args.min_after_dequeue, [kf.float32, kf.int64],
                                  shapes=[[64], []], seed=args.seed, name="examples")
    data_x = kf.constant(xtr, name="train_x")
    data_y = kf.constant(ytr, name="train_y")
    readers = []
    for i in range(args.readers):
        with kf.name_scope(f"reader_{i}"):
            idx = kf.random_uniform([args.reader_chunk], 0, len(xtr), dtype=kf.int32,
                                    seed=args.seed + i)
            readers.append(queue.enqueue_many([kf.gather(data_x, idx), kf.gather(data_y, idx)]))
    kf.train.add_queue_runner(kf.train.QueueRunner(queue, readers))
    xb, yb = queue.dequeue_many(args.batch_size)
    return queue, xb, yb


def build_model(args):
    """Placeholders, logits, the train op and the accuracy of a 64-128-10 MLP."""
    x = kf.placeholder(kf.float32, [None, 64], name="x")
    y = kf.placeholder(kf.int64, [None], name="y")
    w1 = kf.Variable(kf.random_normal([64, 128], stddev=(2.0 / 64) ** 0.5, seed=args.seed), name="w1")
    b1 = kf.Variable(kf.zeros([128]), name="b1")
    w2 = kf.Variable(kf.random_normal([128, 10], stddev=(2.0 / 128) ** 0.5, seed=args.seed + 1),
                     name="w2")
    b2 = kf.Variable(kf.zeros([10]), name="b2")
    logits = kf.matmul(kf.nn.relu(kf.matmul(x, w1) + b1), w2) + b2
    loss = kf.reduce_mean(kf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    train = kf.train.GradientDescentOptimizer(args.learning_rate).minimize(loss)
    correct = kf.equal(kf.argmax(logits, 1), y)
    accuracy = kf.reduce_mean(kf.cast(correct, kf.float32))
    return x, y, loss, train, accuracy


def run(args) -> dict:
    """Trains with the queue pipeline; returns the report."""
    (xtr, ytr), (xte, yte) = load_digits(args.seed)
    g = kf.Graph()
    with g.as_default():
        kf.set_random_seed(args.seed)
        queue, xb, yb = build_input(xtr, ytr, args)
        size = queue.size()
        x, y, loss, train, accuracy = build_model(args)
        init = kf.global_variables_initializer()
    full = args.batch_size + args.min_after_dequeue
    with kf.Session(graph=g) as sess:
        sess.run(init)
        coord = kf.train.Coordinator()
        threads = kf.train.start_queue_runners(sess, coord)
        sizes, dequeue_s, wait_s, waited_steps = [], 0.0, 0.0, 0
        sample_every = max(1, args.steps // 50)
        start = time.perf_counter()
        try:
            for step in range(args.steps):
                n = int(sess.run(size))
                t0 = time.perf_counter()
                bx, by = sess.run([xb, yb])
                dt = time.perf_counter() - t0
                dequeue_s += dt
                if n < full:
                    wait_s += dt
                    waited_steps += 1
                if step % sample_every == 0:
                    sizes.append([round(t0 - start, 4), n])
                sess.run(train, {x: bx, y: by})
        finally:
            elapsed = time.perf_counter() - start
            coord.request_stop()
            coord.join(threads, stop_grace_period_secs=10)
        test_acc = float(sess.run(accuracy, {x: xte, y: yte}))
        train_loss = float(sess.run(loss, {x: xtr, y: ytr}))
    return {
        "example": "input_pipeline", "steps": args.steps, "batch_size": args.batch_size,
        "readers": args.readers, "reader_chunk": args.reader_chunk, "capacity": args.capacity,
        "min_after_dequeue": args.min_after_dequeue,
        "test_accuracy": round(test_acc, 4), "train_loss": round(train_loss, 4),
        "seconds": round(elapsed, 3), "steps_per_s": round(args.steps / elapsed, 1),
        "dequeue_wait_s": round(wait_s, 4), "dequeue_wait_fraction": round(wait_s / elapsed, 4),
        "steps_that_waited": waited_steps,
        "dequeue_total_s": round(dequeue_s, 4),
        "dequeue_total_fraction": round(dequeue_s / elapsed, 4),
        "queue_size_over_time": sizes,
        "mean_queue_size": round(float(np.mean([s for _, s in sizes])), 1) if sizes else 0.0,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--readers", type=int, default=2, help="reader threads (enqueue ops)")
    p.add_argument("--reader-chunk", type=int, default=64, help="examples per reader Session.run")
    p.add_argument("--capacity", type=int, default=2000)
    p.add_argument("--min-after-dequeue", type=int, default=500)
    p.add_argument("--learning-rate", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    print(json.dumps(run(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
