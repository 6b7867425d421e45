"""examples/word2vec.py --quick: a skip-gram model sharded over the 2 ps tasks of an in-process
cluster trains on the standard library's docstrings (the loss falls), prints where its shards
live and the nearest neighbours of its query words, and exits (its servers stopped)."""

import os
import re
import subprocess
import sys

import pytest

from kernflow.core.testing.processes import have_distributed

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "word2vec.py")

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not have_distributed(),
                                 reason="kernflow-client, -master and -worker are not installed")]


def test_quick_run_shards_over_two_ps_and_learns(tmp_path):
    r = subprocess.run([sys.executable, EXAMPLE, "--quick", "--data-dir", str(tmp_path)],
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert (tmp_path / "word2vec_corpus.txt").stat().st_size > 100_000     # the cached corpus
    shards = re.findall(r"^shard (\S+)\s.* on (\S+)$", out, re.M)
    for table in ("embeddings", "nce_weights", "nce_biases"):
        placed = {device for name, device in shards if name.startswith(table + "/part_")}
        assert placed == {"/job:ps/task:0", "/job:ps/task:1"}, (table, shards)
    losses = [float(v) for v in re.findall(r"^step\s+\d+\s+loss\s+(\S+)", out, re.M)]
    assert len(losses) >= 3 and losses[-1] < losses[0], out
    assert re.search(r"\d+ pairs/s", out)
    neighbours = re.findall(r"^\s+(\w+): (.+)$", out.split("nearest neighbours", 1)[1], re.M)
    assert len(neighbours) >= 5, out
    assert all(len(near.split(", ")) == 8 for _, near in neighbours), neighbours
