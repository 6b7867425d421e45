"""`GrpcSession`: the session implementation behind ``kf.Session("grpc://host:port")``.

The client keeps no runtime of its own: it ships the graph to a master and asks it to run steps,
as TF's GrpcSession does. The first step creates a session on the master with the whole GraphDef;
later steps first send the ops added to the graph since (`ExtendSession`, the whitepaper's Extend,
tracked with `Graph.version`). Feeds and fetched values travel as raw tensor bytes
(`kernflow.client.codec`), and the master's errors come back as the same TF error classes.

``kf.Session("grpcs://host:port")`` is the same session, refused unless this process has TLS
configured (`kernflow.client.security`: with TLS configured, ``grpc://`` targets use it too).

``kf.Session("etcd://host:port/cluster")`` reads the cluster's master address from etcd once
(``/kernflow/<cluster>/master``, see `kernflow.client.discovery`) and is then a GrpcSession to it.

Deadlines: RunStep waits `RunOptions.timeout_in_ms`, else `ConfigProto.operation_timeout_in_ms`
(plus a grace period so the master's own message wins), else without a deadline; every other call
has one (see `GrpcMasterClient`).

Large fetches: a step expected to fetch at least `STREAM_FETCH_BYTES` (from the fetches' static
shapes; else from what they took last time, in proportion to what the step feeds then and now;
else, the first time, as much as it feeds) uses RunStepPull, where the client pulls each value from
the task that produced it (the master relays the values the client cannot reach; with
``KERNFLOW_DIRECT_FETCH=0`` it relays every value: RunStepStream), in 1 MiB chunks written straight
into the result array (`kernflow.client.fetch_stream`); other steps use the unary RunStep (one round
trip, lowest latency), whose large values stay in the received bytes until decoded
(`tensor_requests.split`). A unary call holds its request until its response has arrived, so a
step that both feeds and fetches a lot must stream to stay within a few copies of its values.

Protocol: the first CreateSession's response carries the master's protocol version; a master of
another version is refused (`kernflow.client.protocol`).
"""

from __future__ import annotations

import logging
import threading

from kernflow.core.framework import dtypes
from kernflow.core.framework import errors
from kernflow.client import codec
from kernflow.client import fetch_stream
from kernflow.client import limits
from kernflow.client import local_master
from kernflow.client import security
from kernflow.client.master_client import GrpcMasterClient
from kernflow.client.protocol import check_peer
from kernflow.client.protobuf import master_pb2
from kernflow.client.tensor_requests import SplitMessage, split_contents

__all__ = ["GrpcSession", "parse_target", "grpc_session_factory", "reset", "etcd_session_factory",
           "etcd_reset"]

_log = logging.getLogger(__name__)
SCHEME = "grpc://"
TLS_SCHEME = "grpcs://"   # the same, refusing to run without TLS configured (`security.require_tls`)
# How long CreateSession may wait for tasks that are not up yet when the config sets no operation
# timeout (MonitoredTrainingSession's default max_wait_secs).
CREATE_SESSION_TIMEOUT_S = 7200.0
# Steps expected to fetch at least this many bytes stream their fetches (RunStepStream).
STREAM_FETCH_BYTES = 1 << 20
_MAX_REMEMBERED = 1024   # fetch lists whose result size is remembered
# A fetched string tensor of this many elements counts as large (`_nbytes`).
_STRINGS_COUNTED = STREAM_FETCH_BYTES // 8
_NONE = [None]


def parse_target(target: str) -> str:
    """Returns "host:port" of a ``grpc://host:port`` or ``grpcs://host:port`` target.

    Whether the channel uses TLS is the process's setting (`kernflow.client.security`) for both
    schemes; ``grpcs://`` only makes sure that it does.

    Raises:
        InvalidArgumentError: if the target is not of that form.
        FailedPreconditionError: a ``grpcs://`` target in a process without TLS configured.
    """
    scheme = TLS_SCHEME if target.startswith(TLS_SCHEME) else SCHEME
    if not target.startswith(scheme):
        raise errors.InvalidArgumentError(None, None, f"not a grpc target: {target!r} (expected "
                                          f"'grpc://host:port' or 'grpcs://host:port')")
    address = target[len(scheme):].rstrip("/")
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise errors.InvalidArgumentError(None, None, f"grpc target {target!r} needs a host and a port, "
                                          f"e.g. '{scheme}localhost:2222'")
    if scheme == TLS_SCHEME:
        security.require_tls(target)
    return address


class GrpcSession:
    """Runs steps of `graph` on the master at `target`.

    Args:
        target: "grpc://host:port" of a master.
        graph: the `kf.Graph` whose ops the steps run.
        config: an optional `ConfigProto`, sent with CreateSession; its `operation_timeout_in_ms`
            is the default step deadline.
    """

    def __init__(self, target: str, graph, config=None):
        self.target = target
        self.address = parse_target(target)
        self.graph = graph
        self.config = config
        # A master served by this very process is called directly (`local_master`).
        self._master = local_master.lookup(self.address) or GrpcMasterClient(self.address)
        self._lock = threading.Lock()
        self._handle: str | None = None
        self._sent_ops = 0          # the local graph.version the master's graph reflects
        self._master_version = 0    # the master's graph version, for ExtendSession
        self._closed = False
        self._timeout_ms = config.operation_timeout_in_ms if config is not None else 0
        # Per fetch list: (bytes fetched, bytes fed) in its last step, and its static size.
        self._fetch_bytes: dict[tuple, tuple] = {}
        self._static_sizes: dict[tuple, int | None] = {}

    @property
    def handle(self) -> str | None:
        """The master's session handle (None until the first step)."""
        return self._handle

    # ------------------------------------------------------------------ graph
    def _sync_graph(self) -> None:
        """Creates the master's session, or sends it the ops added since the last step."""
        if self._handle is not None and self.graph.version == self._sent_ops:
            return
        with self._lock:
            if self._closed:
                raise RuntimeError("Attempted to use a closed Session.")
            if self._handle is None:
                gd = self.graph.as_graph_def(add_shapes=True)
                req = master_pb2.CreateSessionRequest(graph_def=gd, target=self.target)
                if self.config is not None:
                    req.config.CopyFrom(self.config)
                # The master waits for tasks not up yet (as TF's CreateSession): as long as the
                # config's operation timeout, else up to CREATE_SESSION_TIMEOUT_S.
                wait_s = (self._timeout_ms / 1000.0 + 5.0 if self._timeout_ms > 0
                          else CREATE_SESSION_TIMEOUT_S)
                resp = self._master.create_session(req, timeout=wait_s)
                check_peer(resp.protocol_version, f"master at {self.address}")
                if not resp.session_handle:
                    raise errors.InternalError(None, None, f"master at {self.address} returned an "
                                               f"empty session handle")
                self._handle = resp.session_handle
                self._master_version = resp.graph_version
                self._sent_ops = gd.version
                return
            if self.graph.version == self._sent_ops:
                return
            delta = self.graph.as_graph_def(from_version=self._sent_ops, add_shapes=True)
            req = master_pb2.ExtendSessionRequest(session_handle=self._handle, graph_def=delta,
                                                  current_graph_version=self._master_version)
            resp = self._master.extend_session(req)
            self._master_version = resp.new_graph_version
            self._sent_ops = delta.version

    # ------------------------------------------------------------------ run
    def run(self, feeds, feed_values, fetches, targets, options=None, run_metadata=None):
        """Runs one step on the master.

        Args:
            feeds: names of the fed tensors ("x:0").
            feed_values: their values (numpy arrays), in the same order.
            fetches: names of the tensors to fetch.
            targets: names of the ops to run without fetching.
            options: an optional `RunOptions` (trace level, timeout).
            run_metadata: an optional `RunMetadata` to fill from the master's.

        Returns:
            The fetched values (numpy arrays), in the order of `fetches`.

        Raises:
            OpError: the master's error, as the TF class of its status code.
        """
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")
        self._sync_graph()
        # The feeds are encoded straight from the arrays' memory (`tensor_requests`), and checked
        # against the message-size limit before anything is sent.
        req = SplitMessage(master_pb2.RunStepRequest(session_handle=self._handle, fetch=fetches,
                                                     target=targets), ("feed",))
        for name, value in zip(feeds, feed_values):
            req.add(name, value)
        if req.entries:
            limits.check_request(req, f"RunStep on master at {self.address}")
        if options is not None:
            req.options.CopyFrom(options)
        if req.options.timeout_in_ms <= 0 and self._timeout_ms > 0:
            req.options.timeout_in_ms = self._timeout_ms
        key = tuple(fetches)
        fed = sum(req.sizes)
        if fetches and self._streams(key, fed) and not getattr(self._master, "in_process", False):
            out, metadata = self._run_streamed(req, fetches)
            if self._static(key) is None:
                self._remember(key, sum(map(_nbytes, out)), fed)
            if run_metadata is not None and metadata is not None:
                run_metadata.MergeFrom(metadata)
            return out
        resp = self._master.run_step(req)
        tensors = resp.tensor
        if len(tensors) != len(fetches):
            raise errors.InternalError(None, None, f"master at {self.address} returned {len(tensors)} "
                                       f"tensors for {len(fetches)} fetches")
        out = []
        # (a large value's bytes are where they were received: `tensor_requests.split`)
        contents = split_contents(resp, "tensor") if type(resp) is SplitMessage else _NONE * len(tensors)
        for want, nt, content in zip(fetches, tensors, contents):
            if nt.name and nt.name != want:
                raise errors.InternalError(None, None, f"master at {self.address} returned tensor "
                                           f"{nt.name!r} where {want!r} was fetched")
            out.append(codec.proto_to_tensor(nt.tensor, content))
        if run_metadata is not None and resp.HasField("metadata"):
            run_metadata.MergeFrom(resp.metadata)
        if fetches and self._static(key) is None:   # (what the response took, strings included)
            self._remember(key, sum(resp.sizes) if isinstance(resp, SplitMessage) else
                           sum(map(_nbytes, out)), fed)
        return out

    def _run_streamed(self, req, fetches):
        """(values, metadata) of a step with large fetches: pulled (RunStepPull), or relayed by
        the master (RunStepStream) when direct pulls are turned off (`fetch_stream.enabled`)."""
        if fetch_stream.enabled():
            return fetch_stream.pull_step(self._master, req, fetches, self.address)
        return fetch_stream.read_stream(self._master.run_step_stream(req), fetches, self.address)

    def _streams(self, key: tuple, fed: int) -> bool:
        """Whether a step that feeds `fed` bytes fetches `key` through the streamed path
        (`_run_streamed`): its fetches are expected to take `STREAM_FETCH_BYTES` or more."""
        return self._expected_bytes(key, fed) >= STREAM_FETCH_BYTES

    def _expected_bytes(self, key: tuple, fed: int) -> float:
        """The bytes the fetches `key` are expected to take in a step that feeds `fed` bytes: their
        static size; else what they took last time, in proportion to the bytes fed then and now
        (an identity of a feed grows with it, a batch's predictions stay small); else, the first
        time, as many as the step feeds (a unary call would hold the request while it receives
        fetches as large: the client's peak memory would be the request and three times them)."""
        static = self._static(key)
        if static is not None:
            return static
        seen = self._fetch_bytes.get(key)
        if seen is None:
            return fed
        fetched, fed_then = seen
        return fetched * max(fed, 1) / max(fed_then, 1)

    def _static(self, key: tuple) -> int | None:
        """The fetches' static size (`_static_bytes`), remembered per fetch list."""
        n = self._static_sizes.get(key, -1)
        if n == -1:
            n = _static_bytes(self.graph, key)
            if len(self._static_sizes) < _MAX_REMEMBERED:
                self._static_sizes[key] = n
        return n

    def _remember(self, key: tuple, fetched: int, fed: int) -> None:
        """Notes that the fetches `key` took `fetched` bytes in a step that fed `fed`."""
        if key in self._fetch_bytes or len(self._fetch_bytes) < _MAX_REMEMBERED:
            self._fetch_bytes[key] = (fetched, fed)

    # ------------------------------------------------------------------ management
    def list_devices(self):
        """Returns the cluster's devices as dicts (name, device_type, memory_limit_bytes, incarnation)."""
        resp = self._master.list_devices(master_pb2.ListDevicesRequest(session_handle=self._handle or ""))
        return [{"name": d.name, "device_type": d.device_type, "memory_limit_bytes": d.memory_limit,
                 "incarnation": d.incarnation}
                for d in list(resp.local_device) + list(resp.remote_device)]

    def close(self) -> None:
        """Closes the master's session; a master that is gone (UNAVAILABLE) is not an error."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            handle, self._handle = self._handle, None
        if handle is None:
            return
        try:
            self._master.close_session(master_pb2.CloseSessionRequest(session_handle=handle))
        except (errors.UnavailableError, errors.DeadlineExceededError) as e:
            _log.warning("could not close session %s on master %s: %s", handle, self.address, e)


def _nbytes(value) -> int:
    """The bytes a fetched value takes on the wire, near enough to choose how to fetch it: a string
    tensor's are its strings' (numpy's `nbytes` counts a pointer per element), except that one of
    `_STRINGS_COUNTED` elements or more counts as large without summing them."""
    n = getattr(value, "nbytes", 0)
    if getattr(value, "dtype", None) != object or value.size >= _STRINGS_COUNTED:
        return n
    return sum(len(v) for v in value.reshape(-1).tolist() if isinstance(v, (bytes, str)))


def _static_bytes(graph, fetches) -> int | None:
    """Total bytes of `fetches` from their static shapes and dtypes, or None if any is unknown."""
    total = 0
    for name in fetches:
        try:
            t = graph.get_tensor_by_name(name)
            n = t.shape.num_elements()
            dtype = t.dtype.base_dtype
            size = 0 if dtype == dtypes.string else dtype.size
        except Exception:  # noqa: BLE001 - not a tensor of this graph, unknown shapes...
            return None
        if n is None or not size:   # (a string's size is not known before it exists)
            return None
        total += n * size
    return total


def grpc_session_factory(target: str, graph, config=None) -> GrpcSession:
    """The ``grpc`` and ``grpcs`` session factory: ``kf.Session("grpc://host:port")``."""
    return GrpcSession(target, graph, config)


def reset(target: str, containers=None, config=None) -> None:
    """``kf.Session.reset("grpc://host:port", containers)``: clears containers on every worker
    (``grpcs://`` as well)."""
    master = GrpcMasterClient(parse_target(target))
    master.reset(master_pb2.ResetRequest(container=list(containers or ())))


grpc_session_factory.reset = reset


def etcd_session_factory(target: str, graph, config=None) -> GrpcSession:
    """The ``etcd`` session factory: ``kf.Session("etcd://host:port/cluster")``.

    Raises:
        UnavailableError: etcd does not answer, or no master of the cluster is registered.
    """
    from kernflow.client.discovery import resolve_master_target
    session = GrpcSession(resolve_master_target(target), graph, config)
    session.etcd_target = target
    return session


def etcd_reset(target: str, containers=None, config=None) -> None:
    """``kf.Session.reset("etcd://host:port/cluster", containers)``, through the registered master."""
    from kernflow.client.discovery import resolve_master_target
    reset(resolve_master_target(target), containers, config)


etcd_session_factory.reset = etcd_reset
