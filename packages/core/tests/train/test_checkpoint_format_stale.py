"""`checkpoint_format.remove_stale_files`: what killed saves leave behind is removed, nothing else."""

import os
import subprocess
import sys

import numpy as np

from kernflow.core.train import checkpoint_format as cf


def _touch(path):
    with open(path, "wb") as f:
        f.write(b"x" * 10)


def test_removes_files_of_dead_writers_and_keeps_live_ones_and_checkpoints(tmp_path, monkeypatch):
    d = str(tmp_path)
    cf.write_bundle(os.path.join(d, "model-1"), {"w": np.ones(3, np.float32)})
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    dead_pid = int(dead.stdout)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        host = cf._HOST
        files = {
            "dead": f"model-2.data-00000-of-00001{cf.TEMP_MARKER}-{host}-{dead_pid}-00ff",
            "dead_index": f"model-2.index{cf.TEMP_MARKER}-{host}-{dead_pid}-01ff",
            "live": f"model-3.data-00000-of-00001{cf.TEMP_MARKER}-{host}-{live.pid}-02ff",
            "other_host": f"model-4.index{cf.TEMP_MARKER}-elsewhere-{dead_pid}-03ff",
            "old_format": f"model-5.index{cf.TEMP_MARKER}0123456789abcdef",
            "no_index": "model-6.data-00000-of-00001",
        }
        for name in files.values():
            _touch(os.path.join(d, name))
        removed = {os.path.basename(p) for p in cf.remove_stale_files(d, force=True)}
        assert removed == {files["dead"], files["dead_index"]}
        # Untouched for longer than STALE_AFTER_S: another host's, an old name's and an index-less
        # data file go too; the live writer's and the complete checkpoint stay.
        monkeypatch.setattr(cf, "STALE_AFTER_S", -1.0)
        removed = {os.path.basename(p) for p in cf.remove_stale_files(d, force=True)}
        assert removed == {files["other_host"], files["old_format"], files["no_index"]}
        assert sorted(os.listdir(d)) == sorted(["model-1.index", "model-1.data-00000-of-00001",
                                                files["live"]])
        assert cf.BundleReader(os.path.join(d, "model-1")).read("w").tolist() == [1.0, 1.0, 1.0]
    finally:
        live.kill()
        live.wait()


def test_a_save_scans_its_directory_at_most_every_interval(tmp_path):
    d = str(tmp_path)
    cf.remove_stale_files(d, force=True)
    _touch(os.path.join(d, f"x.index{cf.TEMP_MARKER}-{cf._HOST}-999999999-aa"))   # no such pid
    assert cf.remove_stale_files(d) == []           # scanned a moment ago
    cf.write_bundle(os.path.join(d, "y"), {"v": np.zeros(1)})
    assert os.path.exists(os.path.join(d, f"x.index{cf.TEMP_MARKER}-{cf._HOST}-999999999-aa"))
    assert len(cf.remove_stale_files(d, force=True)) == 1
