"""Where a step's feeds enter and its fetches leave: rewrites of the per-task partitions.

Core's `prune` puts every `_Arg` (feed) and `_Retval` (fetch) on the client device, so a feed used
on another task travels client task -> that task, and a fetch produced elsewhere travels back to the
client task, before the master sees it: extra RecvTensor hops, and a client task that must run in
every step. `route` removes those detours:

* A feed `_Arg` whose consumers are all `_Send`s to other tasks is handed by the master straight to
  those tasks: each matching `_Recv` there becomes an `_Arg` with the feed's index.
* Returned fetches (``pull=False``, RunStep): a `_Retval` fed only by a `_Recv` from another task
  moves to that task, replacing the matching `_Send`, so the value comes back in that task's
  RunGraph response.
* Pulled fetches (``pull=True``, RunStepStream): every fetch is left in the producing task's
  rendezvous and the master pulls it with RecvTensor (streamed in chunks). A `_Retval` fed by a
  `_Recv` from another task is dropped and the master pulls from the sender; any other `_Retval`
  becomes a `_Send` to `CLIENT_DEVICE`.

A task whose partition ends up empty takes no part in the step. Rewrites only apply where the
matched nodes have no other consumers; otherwise the partition is left as core made it.
"""

from __future__ import annotations

import dataclasses

from kernflow.core.framework import attr_value
from kernflow.core.framework import dtypes
from kernflow.core.runtime.executor import parse_input
from kernflow.core.runtime.rendezvous import create_key

from kernflow.master.devices import task_of

__all__ = ["CLIENT_DEVICE", "Routes", "route"]

# The receiving end of fetches the master pulls (a device of no task of the cluster).
CLIENT_DEVICE = "/job:kernflow_master/replica:0/task:0/device:CPU:0"


@dataclasses.dataclass
class Routes:
    """How a step's feeds and fetches map onto its tasks.

    Attributes:
        feeds: task -> indices into the step's feeds, in the order of that task's `_Arg` indices
            (the order RunGraphRequest.send must follow).
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


def _consumers(graph_def) -> dict:
    """node name -> [(consumer NodeDef, is_control)] within one GraphDef."""
    out: dict[str, list] = {}
    for nd in graph_def.node:
        for inp in nd.input:
            name, _, ctrl = parse_input(inp)
            out.setdefault(name, []).append((nd, ctrl))
    return out


def _pair_key(nd) -> tuple:
    return (_s(nd, "tensor_name"), _s(nd, "send_device"), _s(nd, "recv_device"))


def _find(graph_def, op: str, key: tuple):
    for nd in graph_def.node:
        if nd.op == op and _pair_key(nd) == key:
            return nd
    return None


def _remove(graph_def, names: set) -> None:
    keep = [nd for nd in graph_def.node if nd.name not in names]
    del graph_def.node[:]
    graph_def.node.extend(keep)


def _set_attrs(nd, dtype_attr, index: int) -> None:
    for k in list(nd.attr):
        del nd.attr[k]
    nd.attr["T"].CopyFrom(dtype_attr)
    nd.attr["index"].CopyFrom(attr_value.to_proto(index, "int"))


def _send_key(nd) -> str:
    return create_key(_s(nd, "send_device"), nd.attr["send_device_incarnation"].i, _s(nd, "recv_device"),
                      _s(nd, "tensor_name"))


def route(graphs: dict, client_task: str, pull: bool, incarnations: dict) -> tuple[dict, Routes]:
    """Rewrites the per-task partitions of a step (in place) and returns them with their `Routes`.

    Args:
        graphs: task -> GraphDef, from core's partition grouped by task; `_Arg`/`_Retval` nodes
            are on `client_task`.
        client_task: the task holding the `_Arg` and `_Retval` nodes.
        pull: True for a RunStepStream step (every fetch pulled), False for RunStep.
        incarnations: device name -> incarnation (for the keys of new `_Send`s).

    Returns:
        (graphs without empty tasks, routes).
    """
    client = graphs.get(client_task)
    pulls: dict[int, tuple] = {}
    if client is not None:
        _route_feeds(graphs, client_task, client)
        _route_fetches(graphs, client_task, client, pull, pulls, incarnations)
    graphs = {t: g for t, g in graphs.items() if len(g.node)}
    feeds: dict[str, list] = {}
    fetches: dict[str, list] = {}
    for task, g in graphs.items():
        args = sorted(nd.attr["index"].i for nd in g.node if nd.op == "_Arg")
        rets = sorted(nd.attr["index"].i for nd in g.node if nd.op == "_Retval")
        if args:
            feeds[task] = args
        if rets:
            fetches[task] = rets
    return graphs, Routes(feeds, fetches, pulls)


def _route_feeds(graphs, client_task, client) -> None:
    cons = _consumers(client)
    drop = set()
    for arg in [nd for nd in client.node if nd.op == "_Arg"]:
        users = cons.get(arg.name, [])
        if not users or any(ctrl or u.op != "_Send" or len(u.input) != 1 for u, ctrl in users):
            continue
        targets = []
        for send, _ in users:
            dst = task_of(_s(send, "recv_device"))
            recv = None
            if dst != client_task and dst in graphs:
                recv = _find(graphs[dst], "_Recv", _pair_key(send))
            if recv is None:
                break
            targets.append((send, recv))
        else:
            for send, recv in targets:   # the _Recv keeps its name: its consumers need no change
                recv.op = "_Arg"
                _set_attrs(recv, arg.attr["T"], arg.attr["index"].i)
                drop.add(send.name)
            drop.add(arg.name)
    _remove(client, drop)


def _route_fetches(graphs, client_task, client, pull, pulls, incarnations) -> None:
    cons = _consumers(client)
    by_name = {nd.name: nd for nd in client.node}
    drop = set()
    for ret in [nd for nd in client.node if nd.op == "_Retval"]:
        index = ret.attr["index"].i
        src, _, _ = parse_input(ret.input[0])
        recv = by_name.get(src)
        send = None
        if (recv is not None and recv.op == "_Recv" and len(ret.input) == 1
                and len(cons.get(recv.name, [])) == 1):
            origin = task_of(_s(recv, "send_device"))
            if origin != client_task and origin in graphs:
                send = _find(graphs[origin], "_Send", _pair_key(recv))
        if send is not None:
            drop.update((ret.name, recv.name))
            if pull:      # the sender's value stays in its rendezvous until the master pulls it
                pulls[index] = (origin, _send_key(send))
            else:         # the sender returns the value itself
                send.op = "_Retval"
                _set_attrs(send, ret.attr["T"], index)
            continue
        if pull:          # returned here: send it to the master instead
            ret.op = "_Send"
            base = dtypes.as_dtype(ret.attr["T"].type).base_dtype
            for k in list(ret.attr):
                del ret.attr[k]
            ret.attr["T"].CopyFrom(attr_value.to_proto(base, "type"))
            tensor = f"{ret.name}:0"
            for k, v, typ in (("tensor_name", tensor, "string"), ("send_device", ret.device, "string"),
                              ("send_device_incarnation", incarnations.get(ret.device, 0), "int"),
                              ("recv_device", CLIENT_DEVICE, "string"), ("client_terminated", False, "bool")):
                ret.attr[k].CopyFrom(attr_value.to_proto(v, typ))
            pulls[index] = (client_task, _send_key(ret))
    _remove(client, drop)
