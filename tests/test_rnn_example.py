"""examples/rnn_sequences.py: a GRU over variable-length sequences in a dynamic while_loop learns
its task, runs each batch to the batch's own longest sequence, and padding does not change a
sequence's result."""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np

import kernflow.core as kf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "rnn_sequences.py")


def _load_example():
    spec = importlib.util.spec_from_file_location("rnn_sequences_example", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_training_halves_the_loss():
    r = subprocess.run([sys.executable, EXAMPLE, "--steps", "80", "--log-every", "20"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [json.loads(line) for line in r.stdout.strip().splitlines()]
    assert [rec["step"] for rec in lines[:-1]] == [20, 40, 60, 80]
    summary = lines[-1]
    assert summary["final_loss"] <= summary["initial_loss"] / 2, summary
    assert summary["accuracy"] > summary["initial_accuracy"], summary
    assert summary["seconds"] > 0


def test_loop_runs_to_the_batch_max_and_padding_is_masked():
    mod = _load_example()
    args = mod.parse_args(["--batch-size", "4", "--hidden", "8", "--min-len", "3",
                           "--max-len", "9"])
    rng = np.random.RandomState(1)
    with kf.Graph().as_default():
        model = mod.build_model(args)
        tokens, lengths, labels = mod.make_batch(rng, args)
        assert tokens.shape == (4, lengths.max()) and np.all(tokens[:, :lengths.min()] > 0)
        with kf.Session() as sess:
            sess.run(kf.global_variables_initializer())

            def run(tok, lens, lab):
                feed = {model["tokens"]: tok, model["lengths"]: lens, model["labels"]: lab}
                return sess.run([model["steps_run"], model["logits"]], feed)
            steps, logits = run(tokens, lengths, labels)
            assert steps == lengths.max()
            for b, n in enumerate(lengths):
                # The sequence alone, unpadded, and with extra padding beyond the batch's max.
                alone_steps, alone = run(tokens[b:b + 1, :n], lengths[b:b + 1], labels[b:b + 1])
                assert alone_steps == n
                np.testing.assert_allclose(alone[0], logits[b], rtol=1e-5, atol=1e-6)
                padded = np.pad(tokens[b:b + 1, :n], [(0, 0), (0, 3)])
                padded_steps, padded_out = run(padded, lengths[b:b + 1], labels[b:b + 1])
                assert padded_steps == n
                np.testing.assert_allclose(padded_out[0], logits[b], rtol=1e-5, atol=1e-6)
                # Pads are tokens too: counting them as part of the sequence changes the result.
                _, longer = run(padded, lengths[b:b + 1] + 3, labels[b:b + 1])
                assert not np.allclose(longer[0], logits[b], atol=1e-6)


def test_logdir_gets_tensorboard_summaries(tmp_path):
    import glob
    r = subprocess.run([sys.executable, EXAMPLE, "--steps", "40", "--log-every", "20",
                        "--logdir", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"tensorboard --logdir {tmp_path}" in r.stderr
    (path,) = glob.glob(os.path.join(str(tmp_path), "events.out.tfevents.*"))
    events = list(kf.train.summary_iterator(path))
    assert any(e.graph_def for e in events)
    scalars = {(e.step, v.tag) for e in events if e.HasField("summary") for v in e.summary.value}
    assert {(20, "train/loss"), (40, "train/loss"), (0, "eval/accuracy"), (40, "eval/loss")} <= scalars
