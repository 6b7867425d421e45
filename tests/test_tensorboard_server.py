"""A real TensorBoard server (the `tensorboard` test dependency) serves a kernflow run: its scalars
through the scalars plugin's HTTP data API and its graph through the graphs plugin, with the Python
loader and with the Rust data server (``--load_fast``), which checks every record's CRC."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

import kernflow.core as kf

_DEADLINE_S = 90
_URL_LINE = "TensorBoard "  # "TensorBoard 2.x at http://127.0.0.1:PORT/ (Press CTRL+C to quit)"


def _write_run(logdir, steps=10):
    g = kf.Graph()
    with g.as_default():
        v = kf.placeholder(kf.float32, [], name="value")
        merged = kf.summary.merge([kf.summary.scalar("loss", v)])
    values = [1.0 / (step + 1) for step in range(steps)]
    with kf.Session(graph=g) as sess, kf.summary.FileWriter(str(logdir), g) as writer:
        for step, value in enumerate(values):
            writer.add_summary(sess.run(merged, {v: value}), global_step=step)
    return values


class _TensorBoard:
    """`tensorboard --logdir DIR --host 127.0.0.1 --port 0` in its own process group."""

    def __init__(self, logdir, load_fast):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), "--host", "127.0.0.1",
             "--port", "0", f"--load_fast={load_fast}", "--reload_interval", "1"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self.lines = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line)

    def url(self, deadline):
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if line.startswith(_URL_LINE) and " at http://" in line:
                    return line.split(" at ", 1)[1].split()[0].rstrip("/")
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"tensorboard did not start (exit {self.proc.poll()}): {''.join(self.lines)}")

    def kill(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self._reader.join(5)


def _get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read()


def _poll_json(url, ready, deadline, tb):
    """GETs `url` until `ready(json)` holds; fails at the deadline with what was last seen."""
    last = None
    while time.monotonic() < deadline:
        try:
            last = json.loads(_get(url))
            if ready(last):
                return last
        except (urllib.error.URLError, ConnectionError, ValueError) as e:
            last = e
        assert tb.proc.poll() is None, "tensorboard exited: " + "".join(tb.lines)
        time.sleep(0.25)
    raise AssertionError(f"{url} not ready after {_DEADLINE_S} s; last answer: {last}; "
                         f"tensorboard said: {''.join(tb.lines)}")


@pytest.mark.slow
@pytest.mark.parametrize("load_fast", ["false", "true"])
def test_tensorboard_serves_kernflow_scalars_and_graph(tmp_path, load_fast):
    values = _write_run(tmp_path)
    tb = _TensorBoard(tmp_path, load_fast)
    try:
        deadline = time.monotonic() + _DEADLINE_S
        base = tb.url(deadline)
        assert base.startswith("http://127.0.0.1:")
        query = urllib.parse.urlencode({"run": ".", "tag": "loss"})
        points = _poll_json(f"{base}/data/plugin/scalars/scalars?{query}",
                            lambda p: isinstance(p, list) and len(p) == len(values), deadline, tb)
        assert [step for _, step, _ in points] == list(range(len(values)))
        assert [value for _, _, value in points] == pytest.approx(values, rel=1e-6)
        assert all(wall_time > 1.6e9 for wall_time, _, _ in points)
        tags = json.loads(_get(f"{base}/data/plugin/scalars/tags"))
        assert list(tags) == ["."] and list(tags["."]) == ["loss"]
        graph = _get(f"{base}/data/plugin/graphs/graph?" + urllib.parse.urlencode({"run": "."})).decode()
        assert 'name: "value"' in graph and 'op: "ScalarSummary"' in graph
    finally:
        tb.kill()
    assert tb.proc.returncode is not None
