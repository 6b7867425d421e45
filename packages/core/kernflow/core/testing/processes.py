"""Helpers for multi-process tests: free loopback ports and child processes read line by line."""

from __future__ import annotations

import errno
import os
import queue
import random
import socket
import subprocess
import threading
import time

__all__ = ["free_ports", "ChildProcess", "have_distributed", "spawn_script", "read_prefixed"]


def have_distributed() -> bool:
    """True when kernflow-client, -master and -worker are installed (servers can be started)."""
    import importlib.util
    return all(importlib.util.find_spec(m) is not None for m in
               ("kernflow.client.worker_client", "kernflow.master.master", "kernflow.worker.worker"))


def free_ports(n: int) -> list[int]:
    """Returns `n` distinct TCP ports free on the loopback addresses right now.

    They are drawn at random below the kernel's ephemeral port range (Linux: 32768 and up), so
    nothing else takes one before the caller binds it: a port the kernel handed out for a bind to
    port 0, then freed, goes to the next process that binds port 0 or connects anywhere, and tests
    running side by side (pytest -n) do that all the time. Where the range is unknown, the kernel
    picks them (bind to port 0), as before.
    """
    low = _ephemeral_low()
    if low is None or low <= _LOWEST + 1000:
        socks = [socket.socket() for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        ports = [s.getsockname()[1] for s in socks]
        for s in socks:
            s.close()
        return ports
    rng = random.SystemRandom()
    ports: list[int] = []
    for _ in range(1000 * n):
        p = rng.randrange(_LOWEST, low)
        if p not in ports and _free_on_loopback(p):
            ports.append(p)
            if len(ports) == n:
                return ports
    raise OSError(f"no {n} free ports found in [{_LOWEST}, {low})")


_LOWEST = 20000   # (below: well-known services' ports)


def _ephemeral_low() -> int | None:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _free_on_loopback(port: int) -> bool:
    """Whether a listening socket can be bound to `port` on 127.0.0.1 and (if this machine has it)
    ::1, as a server on "localhost:port" binds both."""
    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        try:
            s = socket.socket(family, socket.SOCK_STREAM)
        except OSError:
            continue
        with s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((host, port))
            except OSError as e:
                if family == socket.AF_INET6 and e.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
                    continue   # no IPv6 loopback here
                return False
    return True


class ChildProcess:
    """A child process whose stdout and stderr lines are read by two threads into one stream.

    The two pipes are read separately, so a log record written to stderr by one thread of the child
    never lands in the middle of a line another thread is printing (unbuffered `print` writes its
    arguments one by one).
    """

    def __init__(self, name: str, args, env=None):
        self.name = name
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=env or dict(os.environ, PYTHONUNBUFFERED="1"))
        self._lines: queue.Queue = queue.Queue()
        self._out: list[str] = []
        self._open = 2
        self._lock = threading.Lock()
        for pipe in (self.proc.stdout, self.proc.stderr):
            threading.Thread(target=self._pump, args=(pipe,), daemon=True).start()

    def _pump(self, pipe):
        for line in pipe:
            self._out.append(line)
            self._lines.put(line)
        with self._lock:
            self._open -= 1
            if self._open == 0:
                self._lines.put(None)

    def output(self) -> str:
        """The last few thousand characters the child printed."""
        return "".join(self._out)[-6000:]

    def expect(self, needle: str, timeout: float, prefix: bool = False) -> str:
        """Returns the next line containing (or, with `prefix`, starting with) `needle`.

        Raises:
            AssertionError: after `timeout` seconds, or if the child exits first (with its output).
        """
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{self.name}: no {needle!r} line within {timeout:g} s:\n"
                                     f"{self.output()}")
            try:
                line = self._lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError(f"{self.name} exited with {self.proc.wait()} before printing "
                                     f"{needle!r}:\n{self.output()}")
            if (line.startswith(needle) if prefix else needle in line):
                return line.rstrip("\n")

    def kill(self) -> None:
        """Kills the child (SIGKILL) if it still runs and waits for it (up to 10 s)."""
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:  # pragma: no cover - a process that survives SIGKILL
            pass


def spawn_script(path: str, args, python: str | None = None) -> subprocess.Popen:
    """Starts ``python path *args`` (unbuffered) with pipes for stdin and text stdout: how the
    benchmarks under tools/ start their own child roles (a closed stdin tells a child to stop).
    `python` is another interpreter (a TensorFlow virtual environment for side-by-side runs); this
    one by default."""
    import sys
    env = dict(os.environ, PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.Popen([python or sys.executable, path, *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env)


def read_prefixed(proc: subprocess.Popen, prefix: str, what: str) -> str:
    """The next line of `proc`'s stdout that starts with `prefix` (other lines are skipped).

    Raises:
        RuntimeError: the process exited first (`what` names it).
    """
    while True:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{what} exited ({proc.wait()}) before printing {prefix!r}")
        if line.startswith(prefix):
            return line
