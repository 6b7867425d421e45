"""Peak memory of a large feed or fetch: how many copies of the payload each process holds at once.

For each scenario and transport a fresh cluster runs on loopback, every part in its own process: a
worker (``kernflow worker``, /job:worker/task:0), a master (``kernflow master``) and the client (this
file with a hidden flag), whose one measured ``Session.run`` moves a payload of --mib MiB through the
master to an op on the worker, or back. The client first builds the graph and its payload and runs a
small warm-up step; then each process's baseline (VmRSS) is read and its peak reset (``5`` written to
/proc/PID/clear_refs), the step runs, and the peak (VmHWM) is read. A row reports each process's
growth, (peak - baseline) / payload, as ``client_x``, ``master_x`` and ``worker_x``, and the step's
wall time in ``seconds``. Linux only (/proc).

Scenarios:
  str1    feed one string of N MiB; the worker returns the sum of the string lengths
  strN    feed N Ki strings of 1 KiB each; the same sum
  f32     feed N MiB of float32; the worker returns their sum
  str1rt  feed one string of N MiB and fetch it back (identity on the worker)
  f32op   fetch fill([n], 1.5), N MiB of float32 computed on the worker, whose size the master
          cannot know before the step (the warm-up step fetched 4 elements)
  f32var  fetch an N MiB float32 variable living on the worker (static shape; no warm-up fetch)

Transports: ``local`` (the default: processes on one host talk over the same-host channel where
they can) and ``grpc`` (KERNFLOW_LOCAL_CHANNEL=0 in every process's environment: gRPC throughout).

Prints one JSON object; its "results" hold one row per scenario and transport.

Usage: python tools/bench_message_memory.py [--mib 256] [--scenarios str1 strN f32 str1rt f32op f32var]
                                            [--transport local|grpc|both] [--timeout 600]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import subprocess
import sys
import threading
import time

SCENARIOS = ("str1", "strN", "f32", "str1rt", "f32op", "f32var")
TRANSPORTS = ("local", "grpc")


# ---------------------------------------------------------------------------- /proc
def _status_bytes(pid: int, key: str) -> int:
    """A ``kB`` field of /proc/PID/status (VmRSS, VmHWM), in bytes."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


def _reset_peak(pid: int) -> None:
    """Resets the process's VmHWM to its current RSS."""
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")


# ---------------------------------------------------------------------------- child processes
_deferring = False      # a SIGTERM now is deferred: it would orphan a child being started or stopped
_term_pending = False


def _on_sigterm(*_) -> None:
    """Unwinds through measure's cleanup (it stops the cluster), or marks the signal for later."""
    global _term_pending
    if _deferring:
        _term_pending = True
    else:
        sys.exit(143)


class Child:
    """A child process whose stdout and stderr (merged) a thread collects, to wait for a line.
    It appends itself to `registry` (the list the caller stops) before a SIGTERM can interrupt."""

    def __init__(self, registry: list, args: list[str], env: dict, stdin=None):
        global _deferring
        _deferring = True
        try:
            self.p = subprocess.Popen(args, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True, env=env)
            registry.append(self)
        finally:
            _deferring = False
        if _term_pending:
            sys.exit(143)
        self.pid = self.p.pid
        self.lines: list[str] = []
        self._seen = 0
        self._cond = threading.Condition()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.p.stdout:
            with self._cond:
                self.lines.append(line)
                self._cond.notify_all()

    def wait_for(self, pattern: str, timeout: float) -> re.Match:
        """The first match of `pattern` in a line not yet matched; raises if the child exits first."""
        end = time.monotonic() + timeout
        with self._cond:
            while True:
                for i in range(self._seen, len(self.lines)):
                    m = re.search(pattern, self.lines[i])
                    if m:
                        self._seen = i + 1
                        return m
                left = end - time.monotonic()
                if left <= 0 or self.p.poll() is not None:
                    what = "timed out" if left <= 0 else f"exited {self.p.returncode}"
                    tail = "".join(self.lines)[-3000:]
                    raise RuntimeError(f"{self.p.args[2:5]} {what} waiting for {pattern!r}:\n{tail}")
                self._cond.wait(min(left, 1.0))

    def stop(self) -> None:
        """SIGTERM (the servers shut down cleanly), then SIGKILL if it is still there after 10 s."""
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


def client_main(scenario: str, mib: int, target: str) -> None:
    """The client process: builds the graph and payload, warms up, prints ``ready``, runs the measured
    step when a line arrives on stdin, checks the result and prints ``done SECONDS``; exits at EOF."""
    import numpy as np

    import kernflow.core as kf
    nbytes, n_f32 = mib << 20, mib << 18
    g = kf.Graph()
    init = None
    with g.as_default(), kf.device("/job:worker/task:0"):
        if scenario == "f32":
            x = kf.placeholder(kf.float32, [None], name="x")
            y = kf.reduce_sum(x)
            small, big = np.ones(4, np.float32), np.ones(n_f32, np.float32)
        elif scenario.startswith("str"):
            x = kf.placeholder(kf.string, [None], name="x")
            y = kf.identity(x) if scenario.endswith("rt") else kf.reduce_sum(kf.strings.length(x))
            small = np.array([b"ab"], dtype=object)
            if scenario.startswith("str1"):
                big = np.array([b"a" * nbytes], dtype=object)
            else:
                big = np.empty(mib << 10, dtype=object)
                big[:] = [b"%01024d" % i for i in range(mib << 10)]
        elif scenario == "f32op":
            x = kf.placeholder(kf.int32, [], name="n")
            y = kf.fill(kf.reshape(x, [1]), 1.5)
            small, big = 4, n_f32
        else:  # f32var
            x = None
            y = kf.Variable(kf.zeros([n_f32], kf.float32), name="v")
            init = kf.global_variables_initializer()
    with kf.Session(target, graph=g) as sess:
        if init is not None:
            sess.run(init)
        if x is not None:
            sess.run(y, {x: small})
        print("ready", flush=True)
        sys.stdin.readline()
        t = time.perf_counter()
        out = sess.run(y, {x: big} if x is not None else None)
        dt = time.perf_counter() - t
        if scenario.endswith("rt"):
            assert out.shape == big.shape and out[0] == big[0] and out[-1] == big[-1], "wrong round trip"
        elif scenario.startswith("str"):
            assert int(out) == nbytes, (int(out), nbytes)
        elif scenario == "f32":
            assert abs(float(out) - n_f32) <= 1e-3 * n_f32, float(out)   # float32 sum
        else:
            assert out.shape == (n_f32,) and out[0] == out[-1] == (1.5 if scenario == "f32op" else 0), out.shape
        del out
        print(f"done {dt:.6f}", flush=True)
        sys.stdin.read()


# ---------------------------------------------------------------------------- measurement
def measure(scenario: str, transport: str, mib: int, timeout: float) -> dict:
    """One fresh worker, master and client; the row of the measured step."""
    global _deferring
    from kernflow.core.testing.processes import free_ports
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("KERNFLOW_LOCAL_CHANNEL", None)
    if transport == "grpc":
        env["KERNFLOW_LOCAL_CHANNEL"] = "0"
    (port,) = free_ports(1)
    spec = json.dumps({"worker": [f"127.0.0.1:{port}"]})
    cli = [sys.executable, "-m", "kernflow.core.cli"]
    children: list[Child] = []
    try:
        worker = Child(children, cli + ["worker", "--job", "worker", "--task", "0", "--port", str(port),
                                        "--cluster-spec", spec], env)
        worker.wait_for("listening on", 60)
        master = Child(children, cli + ["master", "--port", "0", "--cluster-spec", spec], env)
        target = master.wait_for(r"(grpc://\S+)", 60).group(1)
        client = Child(children, [sys.executable, os.path.abspath(__file__), "--client", scenario,
                                  "--mib", str(mib), "--target", target], env, stdin=subprocess.PIPE)
        client.wait_for(r"^ready", timeout)
        pids = {"worker": worker.pid, "master": master.pid, "client": client.pid}
        base = {k: _status_bytes(pid, "VmRSS") for k, pid in pids.items()}
        for pid in pids.values():
            _reset_peak(pid)
        client.p.stdin.write("go\n")
        client.p.stdin.flush()
        seconds = float(client.wait_for(r"^done (\S+)", timeout).group(1))
        peak = {k: _status_bytes(pid, "VmHWM") for k, pid in pids.items()}
        client.p.stdin.close()
        client.p.wait(30)
    finally:
        _deferring = True
        for c in reversed(children):
            c.stop()
        _deferring = False
        if _term_pending:
            sys.exit(143)
    row = {"scenario": scenario, "transport": transport}
    for k in ("client", "master", "worker"):
        row[f"{k}_x"] = round((peak[k] - base[k]) / (mib << 20), 2)
    row["seconds"] = round(seconds, 3)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mib", type=int, default=256, help="payload size in MiB (default 256)")
    ap.add_argument("--scenarios", nargs="+", choices=SCENARIOS, default=list(SCENARIOS), metavar="S",
                    help=f"any of {' '.join(SCENARIOS)} (default all)")
    ap.add_argument("--transport", choices=TRANSPORTS + ("both",), default="both")
    ap.add_argument("--timeout", type=float, default=600, help="seconds allowed for each client phase")
    ap.add_argument("--client", choices=SCENARIOS, help=argparse.SUPPRESS)
    ap.add_argument("--target", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.client:
        client_main(args.client, args.mib, args.target)
        return 0
    signal.signal(signal.SIGTERM, _on_sigterm)
    transports = TRANSPORTS if args.transport == "both" else (args.transport,)
    results = []
    for scenario in args.scenarios:
        for transport in transports:
            row = measure(scenario, transport, args.mib, args.timeout)
            print(json.dumps(row), file=sys.stderr, flush=True)   # progress
            results.append(row)
    cmd = " ".join(argv if argv is not None else sys.argv[1:])
    out = {"command": f"python tools/bench_message_memory.py {cmd}".strip(), "mib": args.mib,
           "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                       "platform": platform.platform()},
           "results": results}
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
