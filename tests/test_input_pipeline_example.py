"""examples/input_pipeline.py: queue-fed training learns the digits, and when the readers keep up
the training loop hardly waits for its input."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "input_pipeline.py")


def _run(*args):
    r = subprocess.run([sys.executable, EXAMPLE, *args], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_queue_fed_training_learns_and_readers_keep_up():
    rep = _run("--steps", "800", "--min-after-dequeue", "200", "--capacity", "1000")
    assert rep["test_accuracy"] > 0.9, rep
    assert rep["dequeue_wait_fraction"] < 0.05, rep
    assert rep["steps_that_waited"] < 0.05 * rep["steps"], rep
    sizes = [s for _, s in rep["queue_size_over_time"]]
    assert len(sizes) >= 10 and max(sizes) <= 1000
    assert rep["mean_queue_size"] > 264  # kept above batch_size + min_after_dequeue on average
