"""A GRU trained on variable-length sequences with one dynamic `kf.while_loop` per batch.

The task (synthetic, generated with numpy): each sequence holds 5 to 40 tokens from a vocabulary
of `--vocab` symbols; its class is the symbol among 1..`--classes` that occurs most often (ties
are redrawn). The network reads the sequence with a GRU cell written from kf.matmul / sigmoid /
tanh on kf.Variables and classifies its last state with a softmax layer.

Batches are padded only to their own longest sequence, and the recurrence is a `kf.while_loop`
that runs `reduce_max(lengths)` iterations, a tensor computed from the fed lengths: not a loop
unrolled to the longest sequence of the data set, nor to the width of the token matrix. Once
step t passes a sequence's length, its state is held (`kf.where` on the mask ``t < length``), so
the final state of every sequence is the one after its last token. Gradients flow back through
the loop: `optimizer.minimize` builds the backprop loop.

Prints one JSON line per `--log-every` steps ({"step", "loss"}: the mean over those steps) and a
final summary {"initial_loss", "final_loss", "accuracy", "seconds", ...}.

Usage: python examples/rnn_sequences.py [--steps 200] [--batch-size 32] [--hidden 32]
       [--min-len 5] [--max-len 40] [--lr 0.01] [--seed 0] [--device /gpu:0]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

import kernflow.core as kf


# ---------------------------------------------------------------------------- data
def make_batch(rng, args):
    """One padded batch: tokens [B, T] (0 pads), lengths [B] and labels [B].

    T is the batch's own longest length; label c means symbol c + 1 occurs most often among the
    symbols 1..classes.
    """
    lengths = rng.randint(args.min_len, args.max_len + 1, size=args.batch_size)
    tokens = np.zeros((args.batch_size, lengths.max()), np.int32)
    labels = np.zeros(args.batch_size, np.int32)
    for b, n in enumerate(lengths):
        while True:
            seq = rng.randint(1, args.vocab, size=n)
            counts = np.bincount(seq, minlength=args.vocab)[1:args.classes + 1]
            if (counts == counts.max()).sum() == 1:
                break
        tokens[b, :n] = seq
        labels[b] = int(np.argmax(counts))
    return tokens, lengths.astype(np.int32), labels


# ---------------------------------------------------------------------------- model
def glorot(shape, seed):
    limit = np.sqrt(6.0 / (shape[0] + shape[-1]))
    return kf.random_uniform(shape, -limit, limit, seed=seed)


def build_model(args):
    """Builds the GRU classifier.

    Returns:
        A dict of tensors and ops: the placeholders "tokens" [B, T], "lengths" [B] and "labels"
        [B]; "steps_run" (the loop's iteration count), "logits", "loss", "accuracy" and
        "train_op".
    """
    h_dim = args.hidden
    tokens = kf.placeholder(kf.int32, [None, None], name="tokens")     # [B, T], T = batch max
    lengths = kf.placeholder(kf.int32, [None], name="lengths")
    labels = kf.placeholder(kf.int32, [None], name="labels")
    embed = kf.Variable(glorot([args.vocab, h_dim], args.seed), name="embed")
    w_in = kf.Variable(glorot([h_dim, 3 * h_dim], args.seed + 1), name="w_in")    # z | r | h
    b_in = kf.Variable(kf.zeros([3 * h_dim]), name="b_in")
    u_zr = kf.Variable(glorot([h_dim, 2 * h_dim], args.seed + 2), name="u_zr")
    u_h = kf.Variable(glorot([h_dim, h_dim], args.seed + 3), name="u_h")
    w_out = kf.Variable(glorot([h_dim, args.classes], args.seed + 4), name="w_out")
    b_out = kf.Variable(kf.zeros([args.classes]), name="b_out")

    batch, width = kf.unstack(kf.shape(tokens))
    max_len = kf.reduce_max(lengths)
    # The input projections of every step in one matmul, time-major: [T, B, 3H].
    x = kf.gather(embed, kf.transpose(tokens))
    x_proj = kf.reshape(kf.matmul(kf.reshape(x, [-1, h_dim]), w_in) + b_in,
                        kf.stack([width, batch, 3 * h_dim]))
    inputs = kf.TensorArray(kf.float32, size=width).unstack(x_proj)

    def step(t, h):
        xz, xr, xh = kf.split(inputs.read(t), 3, axis=1)
        hz, hr = kf.split(kf.matmul(h, u_zr), 2, axis=1)
        z = kf.sigmoid(xz + hz)
        r = kf.sigmoid(xr + hr)
        candidate = kf.tanh(xh + kf.matmul(r * h, u_h))
        h_new = h + z * (candidate - h)
        return t + 1, kf.where(t < lengths, h_new, h)   # finished sequences keep their state

    h0 = kf.zeros(kf.stack([batch, h_dim]))
    steps_run, h_last = kf.while_loop(lambda t, h: t < max_len, step, [kf.constant(0), h0],
                              shape_invariants=[kf.TensorShape([]),
                                                kf.TensorShape([None, h_dim])])
    logits = kf.matmul(h_last, w_out) + b_out
    loss = kf.reduce_mean(kf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                         logits=logits))
    correct = kf.equal(kf.argmax(logits, 1, output_type=kf.int32), labels)
    accuracy = kf.reduce_mean(kf.cast(correct, kf.float32))
    train_op = kf.train.AdamOptimizer(args.lr).minimize(loss)
    return {"tokens": tokens, "lengths": lengths, "labels": labels, "steps_run": steps_run,
            "logits": logits, "loss": loss, "accuracy": accuracy, "train_op": train_op}


# ---------------------------------------------------------------------------- main
def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--vocab", type=int, default=6, help="symbols 1..vocab-1; 0 pads")
    p.add_argument("--classes", type=int, default=3)
    p.add_argument("--min-len", type=int, default=5)
    p.add_argument("--max-len", type=int, default=40)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--log-every", type=int, default=20)
    p.add_argument("--eval-batches", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--logdir", default=None,
                   help="write TensorBoard summaries here (the graph, the training loss every "
                        "--log-every steps, the evaluation loss and accuracy)")
    p.add_argument("--device", default=None,
                   help="pin the model to a device, e.g. /gpu:0 (default: placement decides)")
    args = p.parse_args(argv)
    if not 1 <= args.classes < args.vocab:
        p.error("--classes must be in [1, vocab)")
    if not 1 <= args.min_len <= args.max_len:
        p.error("need 1 <= --min-len <= --max-len")
    return args


def _write(writer, step, scalars):
    """Adds one Summary of `scalars` ({tag: value}) at `step` (TF1's hand-built summary idiom)."""
    if writer is not None:
        writer.add_summary(kf.Summary(value=[kf.Summary.Value(tag=t, simple_value=v)
                                             for t, v in scalars.items()]), step)


def main(argv=None):
    args = parse_args(argv)
    rng = np.random.RandomState(args.seed)
    with kf.Graph().as_default():
        kf.set_random_seed(args.seed)
        with kf.device(args.device):
            model = build_model(args)
        feeds = [model["tokens"], model["lengths"], model["labels"]]
        loss, accuracy = model["loss"], model["accuracy"]
        eval_data = [make_batch(rng, args) for _ in range(args.eval_batches)]
        config = kf.ConfigProto(allow_soft_placement=True)   # TensorArrays live on the host
        with kf.Session(config=config) as sess:
            sess.run(kf.global_variables_initializer())
            writer = kf.summary.FileWriter(args.logdir, sess.graph) if args.logdir else None

            def evaluate():
                out = [sess.run([loss, accuracy], dict(zip(feeds, b))) for b in eval_data]
                return [float(v) for v in np.mean(out, axis=0)]

            initial_loss, initial_acc = evaluate()
            _write(writer, 0, {"eval/loss": initial_loss, "eval/accuracy": initial_acc})
            start = time.time()
            window = []
            for step in range(1, args.steps + 1):
                batch = dict(zip(feeds, make_batch(rng, args)))
                _, value = sess.run([model["train_op"], loss], batch)
                window.append(value)
                if step % args.log_every == 0 or step == args.steps:
                    print(json.dumps({"step": step, "loss": round(float(np.mean(window)), 4)}),
                          flush=True)
                    _write(writer, step, {"train/loss": float(np.mean(window))})
                    window = []
            seconds = time.time() - start
            final_loss, final_acc = evaluate()
            _write(writer, args.steps, {"eval/loss": final_loss, "eval/accuracy": final_acc})
    if writer is not None:
        writer.close()
        print(f"TensorBoard summaries in {args.logdir}: tensorboard --logdir {args.logdir}",
              file=sys.stderr)
    summary = {"initial_loss": round(initial_loss, 4), "final_loss": round(final_loss, 4),
               "initial_accuracy": round(initial_acc, 4), "accuracy": round(final_acc, 4),
               "steps": args.steps, "seconds": round(seconds, 2),
               "steps_per_second": round(args.steps / seconds, 2)}
    print(json.dumps(summary), flush=True)
    return summary


if __name__ == "__main__":
    main(sys.argv[1:])
