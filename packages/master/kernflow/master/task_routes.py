"""Which task of a step takes which feeds, and returns or sends which fetches: read off its graphs.

Core decides where feeds and fetches live before partitioning (`feeds_fetches.py`): a feed goes
straight to every device that reads it (a task with several gets it once), a fetch
comes from the task that produced it, and in a pulled step (RunStepStream, RunStepPull) each fetch
is a `_Send` to `CLIENT_DEVICE` that the master (or the client) pulls with RecvTensor. `read_routes`
only reads where those nodes landed in the per-task graphs; it rewrites nothing.
"""

from __future__ import annotations

import dataclasses

from kernflow.client.protocol import CLIENT_DEVICE
from kernflow.core.runtime.rendezvous import create_key

__all__ = ["CLIENT_DEVICE", "Routes", "read_routes"]


@dataclasses.dataclass
class Routes:
    """How a step's feeds and fetches map onto its tasks.

    Attributes:
        feeds: task -> indices into the step's feeds, in the order of that task's `_Arg` indices
            (the order RunGraphRequest.send must follow); one feed may go to several tasks.
        fetches: task -> indices into the step's fetches returned by that task's RunGraph, in the
            order of its `_Retval` indices.
        pulls: fetch index -> (task, rendezvous key) of the fetches the master pulls.
    """
    feeds: dict
    fetches: dict
    pulls: dict


def _s(nd, key: str) -> str:
    v = nd.attr[key].s
    return v.decode() if isinstance(v, bytes) else v


def read_routes(graphs: dict) -> Routes:
    """The `Routes` of a step's graphs (task -> GraphDef, as `graph_util.group_by_task` made them)."""
    feeds: dict[str, list] = {}
    fetches: dict[str, list] = {}
    pulls: dict[int, tuple] = {}
    for task, g in graphs.items():
        args, rets = [], []
        for nd in g.node:
            if nd.op == "_Arg":
                args.append(nd.attr["index"].i)
            elif nd.op == "_Retval":
                rets.append(nd.attr["index"].i)
            elif nd.op == "_Send" and _s(nd, "recv_device") == CLIENT_DEVICE:
                pulls[nd.attr["index"].i] = (task, create_key(
                    _s(nd, "send_device"), nd.attr["send_device_incarnation"].i, CLIENT_DEVICE,
                    _s(nd, "tensor_name")))
        if args:
            feeds[task] = sorted(set(args))   # (one feed may enter several devices of the task)
        if rets:
            fetches[task] = sorted(rets)
    return Routes(feeds, fetches, pulls)
