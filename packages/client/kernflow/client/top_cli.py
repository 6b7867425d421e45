"""`kernflow top`: a live terminal view of a cluster found through etcd.

::

    kernflow top --etcd HOST:PORT --cluster NAME      (or --target etcd://HOST:PORT/NAME)
    kernflow top                                      (the cluster `kernflow cluster up` started)
    kernflow top ... --once                           (one snapshot, for scripts and tests)

Every `--interval` seconds (default 1) it reads the cluster's registrations in etcd and asks each
registered task for its status (the worker's GetStatus RPC, `--timeout` seconds at most), then shows
one row per task: its address, whether it answers (up/down), its devices, the steps it runs per
second (RunGraph calls finished since the previous sample), its steps and failed steps since it
started, its uptime, and its last error (for a task that is down: why). `--once` takes two samples
`--interval` apart, prints the table and exits with 0 when every task is up, 1 when one is down or
none is registered, 2 when etcd cannot be read.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import sys
import time

__all__ = ["configure", "run", "TaskStatus", "Sampler", "render", "resolve_target"]

DEFAULT_INTERVAL_S = 1.0
DEFAULT_TIMEOUT_S = 2.0
_ERROR_CHARS = 120


def configure(parser) -> None:
    """Adds the `kernflow top` options to an argparse parser."""
    from kernflow.client.discovery import DEFAULT_CLUSTER
    parser.add_argument("--etcd", default=None, metavar="HOST:PORT", help="the etcd the cluster registers in")
    parser.add_argument("--cluster", default=None, metavar="NAME",
                        help=f"the cluster's name in etcd (with --etcd; default: {DEFAULT_CLUSTER!r})")
    parser.add_argument("--target", default=None, metavar="etcd://HOST:PORT/NAME",
                        help="the cluster as a session target (instead of --etcd and --cluster)")
    parser.add_argument("--state-dir", default=None, metavar="DIR",
                        help="without --etcd or --target: the cluster `kernflow cluster up` recorded "
                             "in DIR (default: $XDG_STATE_HOME/kernflow/cluster)")
    parser.add_argument("--interval", type=float, default=DEFAULT_INTERVAL_S, metavar="SECONDS",
                        help=f"seconds between refreshes (default: {DEFAULT_INTERVAL_S:g})")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                        help="deadline of each etcd read and GetStatus call "
                             f"(default: {DEFAULT_TIMEOUT_S:g})")
    parser.add_argument("--once", action="store_true",
                        help="print one snapshot and exit (0: all tasks up, 1: one is down or none is "
                             "registered, 2: etcd unreadable)")


# ---------------------------------------------------------------------------- where the cluster is
def resolve_target(etcd: str | None, cluster: str | None, target: str | None,
                   state_dir: str | None = None) -> tuple[str, str]:
    """The (etcd endpoint, cluster name) to watch, from the options.

    Raises:
        ValueError: contradicting or missing options, or an unreadable cluster state file.
        InvalidArgumentError: a malformed target or endpoint.
    """
    from kernflow.client import discovery
    if target and (etcd or cluster):
        raise ValueError("give either --target or --etcd/--cluster, not both")
    if target:
        return discovery.parse_etcd_target(target)
    if etcd:
        return discovery.parse_endpoint(etcd), cluster or discovery.DEFAULT_CLUSTER
    if cluster:
        raise ValueError("--cluster needs --etcd HOST:PORT")
    from kernflow.client import cluster_cli
    state = cluster_cli.read_state(state_dir)
    if not state or not state.get("target"):
        raise ValueError("no cluster given: use --etcd HOST:PORT --cluster NAME or --target "
                         "etcd://HOST:PORT/NAME (no cluster started by `kernflow cluster up` was found)")
    return discovery.parse_etcd_target(state["target"])


# ---------------------------------------------------------------------------- samples
@dataclasses.dataclass
class TaskStatus:
    """One task as one sample saw it."""

    task: str
    address: str
    up: bool = False
    devices: tuple[str, ...] = ()
    steps: int = 0
    failed: int = 0
    steps_per_s: float | None = None
    last_error: str = ""
    last_error_time_ms: int = 0
    start_time_ms: int = 0
    down_reason: str = ""


def _short_device(name: str) -> str:
    """"/job:w/replica:0/task:1/device:CPU:0" -> "CPU:0"."""
    return name.rsplit("/device:", 1)[-1]


def _get_status(task: str, address: str, timeout_s: float) -> TaskStatus:
    from kernflow.client.worker_client import GrpcWorkerClient
    from kernflow.core.framework import errors
    row = TaskStatus(task, address)
    try:
        resp = GrpcWorkerClient(address, task).get_status(timeout=timeout_s)
    except (errors.OpError, ValueError) as e:
        row.down_reason = f"{type(e).__name__}: {getattr(e, 'message', e)}"
        return row
    row.up = True
    row.devices = tuple(_short_device(d.name) for d in resp.device_attributes)
    row.steps, row.failed = resp.graph_runs, resp.graph_runs_failed
    row.last_error, row.last_error_time_ms = resp.last_error, resp.last_error_time_ms
    row.start_time_ms = resp.start_time_ms
    return row


class Sampler:
    """Samples a cluster's tasks; a task's steps/s is the change of its step count since the previous
    sample (None on its first sample, or after it restarted).

    Args:
        endpoint: etcd "host:port".
        cluster: the cluster name.
        timeout_s: deadline of the etcd read and of each GetStatus.
    """

    def __init__(self, endpoint: str, cluster: str, timeout_s: float = DEFAULT_TIMEOUT_S):
        self.endpoint, self.cluster, self.timeout_s = endpoint, cluster, float(timeout_s)
        self.master: str | None = None
        self._previous: dict[str, tuple[float, int, int]] = {}   # task -> (time, start, steps)
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=16, thread_name_prefix="kernflow-top")

    def sample(self) -> list[TaskStatus]:
        """Reads etcd and every registered task once; rows sorted by task name.

        Raises:
            UnavailableError: etcd does not answer.
        """
        from kernflow.client import discovery
        view = discovery.list_cluster(self.endpoint, self.cluster, timeout_s=self.timeout_s)
        self.master = (view["master"] or {}).get("address")
        tasks = sorted(view["workers"].items(), key=lambda kv: _task_order(kv[0]))
        futures = [self._pool.submit(_get_status, task, value["address"], self.timeout_s)
                   for task, value in tasks]
        now = time.monotonic()
        rows = [f.result() for f in futures]
        for row in rows:
            self._rate(row, now)
        return rows

    def _rate(self, row: TaskStatus, now: float) -> None:
        prev = self._previous.get(row.task)
        if not row.up:
            return
        if prev is not None and prev[1] == row.start_time_ms and now > prev[0] and row.steps >= prev[2]:
            row.steps_per_s = (row.steps - prev[2]) / (now - prev[0])
        self._previous[row.task] = (now, row.start_time_ms, row.steps)

    def close(self) -> None:
        """Stops the sampling threads."""
        self._pool.shutdown(wait=False)


def _task_order(task: str):
    """Sorts "/job:ps/.../task:10" after ".../task:9"."""
    head, _, index = task.rpartition("/task:")
    return (head, int(index) if index.isdigit() else 0)


# ---------------------------------------------------------------------------- the table
def _age(ms: int, now_s: float) -> str:
    s = max(0.0, now_s - ms / 1000.0)
    if s < 90:
        return f"{s:.0f}s"
    if s < 90 * 60:
        return f"{s / 60:.0f}m"
    return f"{s / 3600:.1f}h"


def _error_cell(row: TaskStatus, now_s: float) -> str:
    if not row.up:
        return f"[red]{_escape(row.down_reason[:_ERROR_CHARS])}[/red]"
    if not row.last_error:
        return ""
    age = _age(row.last_error_time_ms, now_s)
    return f"[yellow]{age} ago:[/yellow] {_escape(row.last_error[:_ERROR_CHARS])}"


def _escape(text: str) -> str:
    from rich.markup import escape
    return escape(text)


def render(rows: list[TaskStatus], endpoint: str, cluster: str, master: str | None = None):
    """The rich `Table` of one sample."""
    from rich.table import Table
    now_s = time.time()
    up = sum(r.up for r in rows)
    title = (f"kernflow cluster {cluster!r} (etcd {endpoint}, master {master or 'not registered'}): "
             f"{up}/{len(rows)} tasks up")
    table = Table(title=title, title_justify="left", expand=False)
    for name, kw in (("TASK", {}), ("ADDRESS", {}), ("STATE", {}), ("DEVICES", {}),
                     ("STEPS/S", {"justify": "right"}), ("STEPS", {"justify": "right"}),
                     ("FAILED", {"justify": "right"}), ("UPTIME", {"justify": "right"}),
                     ("LAST ERROR", {"overflow": "fold"})):
        table.add_column(name, **kw)
    for r in rows:
        rate = "" if r.steps_per_s is None else f"{r.steps_per_s:.1f}"
        table.add_row(r.task, r.address, "[green]up[/green]" if r.up else "[red]down[/red]",
                      ",".join(r.devices), rate, str(r.steps) if r.up else "",
                      str(r.failed) if r.up else "",
                      _age(r.start_time_ms, now_s) if r.up and r.start_time_ms else "",
                      _error_cell(r, now_s))
    if not rows:
        table.caption = "no task is registered"
    return table


# ---------------------------------------------------------------------------- the command
def run(args) -> int:
    """Runs `kernflow top`; returns the exit status."""
    from kernflow.core.framework import errors
    try:
        endpoint, cluster = resolve_target(args.etcd, args.cluster, args.target, args.state_dir)
    except (ValueError, errors.OpError) as e:
        print(f"kernflow top: {getattr(e, 'message', e)}", file=sys.stderr)
        return 2
    if not args.interval > 0 or not args.timeout > 0:
        print("kernflow top: --interval and --timeout must be positive", file=sys.stderr)
        return 2
    sampler = Sampler(endpoint, cluster, args.timeout)
    try:
        return _once(sampler, args.interval) if args.once else _live(sampler, args.interval)
    except errors.OpError as e:
        print(f"kernflow top: {e.message}", file=sys.stderr)
        return 2
    finally:
        sampler.close()


def _once(sampler: Sampler, interval_s: float) -> int:
    from rich.console import Console
    sampler.sample()
    time.sleep(interval_s)
    rows = sampler.sample()
    console = Console() if sys.stdout.isatty() else Console(width=200)   # no wrapping in a pipe
    console.print(render(rows, sampler.endpoint, sampler.cluster, sampler.master))
    return 0 if rows and all(r.up for r in rows) else 1


def _live(sampler: Sampler, interval_s: float) -> int:
    from rich.live import Live
    from kernflow.core.framework import errors
    with Live(render(sampler.sample(), sampler.endpoint, sampler.cluster, sampler.master),
              auto_refresh=False, screen=False) as live:
        try:
            while True:
                time.sleep(interval_s)
                try:
                    table = render(sampler.sample(), sampler.endpoint, sampler.cluster, sampler.master)
                except errors.UnavailableError as e:   # etcd went away: say so, keep trying
                    table = f"[red]etcd {sampler.endpoint} unavailable: {_escape(e.message)}[/red]"
                live.update(table, refresh=True)
        except KeyboardInterrupt:
            return 0
