"""How large a message kernflow sends or accepts, and the errors that say so before anything is sent.

One limit, ``KERNFLOW_MAX_MESSAGE_BYTES`` (bytes; ``KiB``/``MiB``/``GiB`` suffixes accepted), bounds
every gRPC message a kernflow process sends or receives: clients, masters and workers build their
channels and servers with it (`channel_options`), so a peer's oversized message is refused by gRPC
before it is parsed. The default and the most it may be is `HARD_MAX_BYTES` (2 GiB - 1): gRPC's
message length is a signed 32-bit integer, and protobuf parses nothing larger. Set the same value
on every process of a cluster; lower it where careless clients can reach a master (each request
costs the master up to three times its size in memory while it is received and forwarded).

What the limit covers: a step's feeds travel in one message (RunStep to the master, RunGraph from
the master to each task), so they must fit; a client checks its request before sending it
(`check_request`), and the master the RunGraph requests that forward them. Fetched values travel
in one message too (RunGraph's response to the master, RunStep's to the client), unless the step is
expected to fetch 1 MiB or more (from static shapes, or what the same fetches took before for what
was fed, or the first time as much as is fed: `grpc_session`): then they stream in 1 MiB chunks
(RunStepPull), as RecvTensor does between tasks, a string larger than a chunk included, and no
limit applies to them. A worker and a master check each response before sending it
(`check_response`), and a client that receives one over its own limit gets gRPC's refusal with
this variable named (`explain_grpc_limit`). The errors (ResourceExhaustedError, gRPC's code for an
oversized message) name the largest tensors, the sizes, the limit and the variable that raises it
(`check_tensor` for a single value).
"""

from __future__ import annotations

import re

from kernflow.core.framework import errors
from kernflow.core.runtime.env import EnvVar

__all__ = ["ENV", "HARD_MAX_BYTES", "DEFAULT_MAX_BYTES", "HEADROOM_BYTES", "max_message_bytes",
           "parse_bytes", "channel_options", "check_request", "check_response", "check_tensor",
           "describe_bytes", "explain_grpc_limit"]

ENV = "KERNFLOW_MAX_MESSAGE_BYTES"
HARD_MAX_BYTES = (1 << 31) - 1
DEFAULT_MAX_BYTES = HARD_MAX_BYTES
# What a client keeps below the limit, so the master's RunGraph requests, which forward its feeds
# under a slightly different header (graph handle, step id), fit too.
HEADROOM_BYTES = 4096

_UNITS = {"": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "k": 1 << 10, "m": 1 << 20,
          "g": 1 << 30}
_cache: tuple = ("", DEFAULT_MAX_BYTES)   # (raw value of ENV, "" when unset; parsed limit)
_ENV_VAR = EnvVar(ENV)


def parse_bytes(text: str, what: str = ENV) -> int:
    """Returns the byte count `text` ("1073741824", "512MiB", "1 GiB") names.

    Raises:
        InvalidArgumentError: naming `what`, the value and what is expected, when it is not a
            whole number of bytes from 1 to `HARD_MAX_BYTES`.
    """
    m = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", text or "")
    unit = _UNITS.get(m.group(2).lower()) if m else None
    n = int(m.group(1)) * unit if unit is not None else 0
    if not 1 <= n <= HARD_MAX_BYTES:
        raise errors.InvalidArgumentError(
            None, None, f"{what}={text!r}: expected a message size from 1 to {HARD_MAX_BYTES} bytes "
            f"(gRPC's bound), as a number of bytes or with a KiB, MiB or GiB suffix, e.g. 1073741824 or 1GiB")
    return n


def max_message_bytes() -> int:
    """The message-size limit of this process: ``$KERNFLOW_MAX_MESSAGE_BYTES``, else `DEFAULT_MAX_BYTES`.

    Raises:
        InvalidArgumentError: the variable is set to something that is not a valid size.
    """
    global _cache
    raw = _ENV_VAR.get()   # (read on every call's size check: `EnvVar`, not os.environ.get)
    if raw != _cache[0]:
        _cache = (raw, DEFAULT_MAX_BYTES if not raw.strip() else parse_bytes(raw))
    return _cache[1]


def channel_options(limit: int | None = None) -> tuple:
    """The gRPC options that bound the messages a channel or server sends and receives to `limit`
    (default: `max_message_bytes()`)."""
    n = max_message_bytes() if limit is None else int(limit)
    return (("grpc.max_send_message_length", n), ("grpc.max_receive_message_length", n))


def describe_bytes(n: int) -> str:
    """`n` bytes for people: "256.0 MiB (268435456 bytes)"."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit} ({n} bytes)"
    return f"{n} bytes"


def _advice(limit: int, instead: str) -> str:
    if limit >= HARD_MAX_BYTES:
        return f"{instead}: {HARD_MAX_BYTES} bytes is the most gRPC and protobuf allow"
    return (f"raise {ENV} (now {limit}; at most {HARD_MAX_BYTES}) on the client and on every master and "
            f"worker, or {instead}")


def _tensor_summary(request, field: str) -> str:
    """The largest tensors of a `SplitMessage`'s field: "'x:0' (a string tensor of shape [1], 256.0 MiB)"."""
    from kernflow.core.framework import dtypes
    tensors = getattr(request, field)
    order = sorted(range(len(request.sizes)), key=lambda i: -request.sizes[i])[:3]
    out = []
    for i in order:
        t = tensors[i].tensor
        try:
            dtype = dtypes.as_dtype(t.dtype).name
        except (TypeError, ValueError, KeyError):
            dtype = f"dtype {t.dtype}"
        out.append(f"{tensors[i].name!r} (a {dtype} tensor of shape {[d.size for d in t.tensor_shape.dim]}, "
                   f"{describe_bytes(request.sizes[i])})")
    more = len(request.sizes) - len(order)
    return ", ".join(out) + (f" and {more} more" if more > 0 else "")


def check_request(request, what: str, limit: int | None = None, headroom: int = HEADROOM_BYTES) -> None:
    """Checks that a request carrying tensors fits in one message, before it is sent.

    The request is measured (without serializing its large tensors) only when its tensors take
    more than half the limit: the rest of a request (names, options) is taken to be smaller.

    Args:
        request: a `tensor_requests.SplitMessage`.
        what: the call, for the message: "RunStep on master at host:2222".
        limit: the limit (default: `max_message_bytes()`).
        headroom: bytes kept free below the limit (`HEADROOM_BYTES`: a client's feeds must also
            fit in the RunGraph requests that forward them; 0 for those).

    Raises:
        ResourceExhaustedError: the request is larger than the limit less `headroom`; the message
            names the largest tensors, their sizes, the limit and how to raise it.
    """
    limit = max_message_bytes() if limit is None else int(limit)
    allowed = max(limit - headroom, 0)
    if sum(request.sizes) <= allowed // 2:
        return
    size = request.ByteSize()
    if size > allowed:
        field = request.path[-1]
        kind = {"feed": "feeds", "send": "tensors sent"}.get(field, field)
        inner = request
        while len(inner.path) > 1:
            inner = getattr(inner, inner.path[0])
        raise errors.ResourceExhaustedError(
            None, None, f"{what}: the request is {describe_bytes(size)}, over the message limit of "
            f"{describe_bytes(limit)}" + (f" less {headroom} bytes of headroom" if headroom else "")
            + f"; its largest {kind}: {_tensor_summary(inner, field)}. To send it, "
            + _advice(limit, "feed less per step (split the batch)"))


def check_tensor(name: str, nbytes: int, what: str, limit: int | None = None) -> None:
    """Checks that a tensor of `nbytes` fits in one message (e.g. a fetched value a response carries).

    Raises:
        ResourceExhaustedError: naming the tensor, its size, the limit and how to raise it.
    """
    limit = max_message_bytes() if limit is None else int(limit)
    if nbytes > limit:
        raise errors.ResourceExhaustedError(
            None, None, f"{what}: tensor {name!r} is {describe_bytes(nbytes)}, over the message limit of "
            f"{describe_bytes(limit)}. To send it, " + _advice(limit, "fetch less per step"))


def check_response(response, what: str, limit: int | None = None) -> None:
    """Checks that a response carrying tensors (a worker's RunGraph response, a master's RunStep
    response) fits in one message, before it is sent.

    Only a `tensor_requests.SplitMessage` is measured (a protobuf message holds only tensors under
    `tensor_requests.INLINE_BYTES`), and only when its tensors take more than half the limit.

    Args:
        response: the response.
        what: who sends it, for the message: "RunGraph on /job:worker/replica:0/task:0".
        limit: the limit (default: `max_message_bytes()`).

    Raises:
        ResourceExhaustedError: the response is larger than the limit; the message names the
            tensor over the limit (`check_tensor`), or else the largest tensors, their sizes, the
            limit and how to raise it.
    """
    sizes = getattr(response, "sizes", None)
    if not isinstance(sizes, list):
        return
    limit = max_message_bytes() if limit is None else int(limit)
    if sum(sizes) <= limit // 2:
        return
    size = response.ByteSize()
    if size <= limit:
        return
    field = response.path[-1]
    largest = max(range(len(sizes)), key=sizes.__getitem__)
    check_tensor(getattr(response, field)[largest].name, sizes[largest], f"{what}: a fetched value", limit)
    raise errors.ResourceExhaustedError(
        None, None, f"{what}: the response is {describe_bytes(size)}, over the message limit of "
        f"{describe_bytes(limit)}; its largest fetched values: {_tensor_summary(response, field)}. "
        "To send it, " + _advice(limit, "fetch less per step"))


def explain_grpc_limit(details: str) -> str:
    """gRPC's "Received message larger than max (N vs. M)" (or "Sent ...") with what sets the limit:
    `ENV`, its value here, and the most it may be; other details unchanged."""
    if "message larger than max" not in details:
        return details
    try:
        limit = max_message_bytes()
    except errors.InvalidArgumentError:
        limit = DEFAULT_MAX_BYTES
    return (f"{details}: a message over the limit that {ENV} sets on each process (here "
            f"{describe_bytes(limit)}). To send it, " + _advice(limit, "fetch (or feed) less per step"))
