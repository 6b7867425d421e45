"""Where a step's feeds and fetches live: decided once, on the pruned placed graph, before partitioning.

Prune puts every `_Arg` (feed) and `_Retval` (fetch) on the client device. Left there, a feed read on
another device travels client device -> consumer by Send/Recv, and a fetch produced elsewhere
travels back, and in a cluster the client task must take part in every step. `place_feeds_and_fetches`
moves them where the values are used or made, so the caller hands a feed straight to each device
that reads it and takes a fetch from the device that produced it:

* **Feeds.** Each `_Arg` goes to the devices of its consumers (data and control): one `_Arg` per
  consuming device, all with the feed's ``index``. An `_Arg` that nothing reads, or that is read only
  on the client device, stays there; a fed tensor that is also fetched keeps a copy on the client
  device for its `_Retval`. A worker takes one value per distinct `_Arg` index
  (`RunGraphRequest.send`) and gives it to each `_Arg` of that index on its devices.
* **Fetches.** Each `_Retval` goes to its producer's device.
* **Pulled fetches.** With ``pull_device`` (the master's RunStepStream / RunStepPull steps) each
  `_Retval` becomes, on its producer's device, a `_Send` to `pull_device` (a device of no task):
  the value waits in the producing task's rendezvous until the caller pulls it by the `_Send`'s
  rendezvous key. The `_Send` keeps the `_Retval`'s name and its ``index`` attr (the fetch's
  position), and is ``client_terminated`` (TF's mark of a transfer whose other end is the caller).

Any device may hold an `_Arg` or `_Retval`: they run no kernel, they are the plan's feed and fetch
slots. A device with its own memory (a GPU) gets a fed value uploaded once where every reader
reads it there (`partition_runner.feed_mover`), and its fetched device arrays are copied to the host
(`ExecutorPlan.fetch_to_host`); a `_Send` from it copies to the host what leaves the task. Callers
find a step's feeds and fetches by reading the partitions: the same feed index may sit in several
partitions (`Partition.of` takes each plan's `arg_indices`).
"""

from __future__ import annotations

import collections

from kernflow.core.framework import attr_value
from kernflow.core.framework import dtypes
from kernflow.core.framework.node_def_util import parse_input
from kernflow.core.runtime.partition import device_label

__all__ = ["place_feeds_and_fetches"]


def place_feeds_and_fetches(graph_def, client_device: str, pull_device: str | None = None,
                            incarnations: dict | None = None) -> None:
    """Moves the `_Arg` and `_Retval` nodes of a pruned, placed graph in place (module docstring).

    Args:
        graph_def: what `prune` returned (every node placed; `_Arg`/`_Retval` on `client_device`).
        client_device: where prune put the `_Arg`/`_Retval` nodes.
        pull_device: None, or the device that pulls every fetch (each `_Retval` becomes a `_Send`
            to it).
        incarnations: device name -> incarnation, for the rendezvous keys of those `_Send`s.
    """
    consumers = _consumers(graph_def)
    for arg in [nd for nd in graph_def.node if nd.op == "_Arg"]:
        _place_arg(graph_def, arg, consumers.get(arg.name, ()), client_device)
    devices = {nd.name: nd.device for nd in graph_def.node}
    for nd in graph_def.node:
        if nd.op != "_Retval":
            continue
        name, _, _ = parse_input(nd.input[0])
        nd.device = devices.get(name) or nd.device
        if pull_device is not None:
            _to_send(nd, pull_device, (incarnations or {}).get(nd.device, 0))


def _consumers(graph_def) -> dict:
    """node name -> [(consumer NodeDef, input position)]."""
    out = collections.defaultdict(list)
    for nd in graph_def.node:
        for k, inp in enumerate(nd.input):
            name, _, _ = parse_input(inp)
            out[name].append((nd, k))
    return out


def _place_arg(graph_def, arg, users, client_device: str) -> None:
    """Puts `arg` (and copies of it) on the devices of `users`, rewiring each user to its copy."""
    by_dev = collections.defaultdict(list)
    for user, k in users:
        by_dev[user.device].append((user, k))
    if not by_dev or set(by_dev) == {client_device}:
        return
    for i, dev in enumerate(sorted(by_dev)):
        if i == 0:   # the first keeps the node (and its name)
            arg.device, name = dev, arg.name
        else:
            copy = graph_def.node.add()
            copy.CopyFrom(arg)
            copy.name = name = f"{arg.name}/_on_{device_label(dev)}"
            copy.device = dev
        for user, k in by_dev[dev]:
            user.input[k] = "^" + name if user.input[k].startswith("^") else name


def _to_send(ret, recv_device: str, incarnation: int) -> None:
    """Turns `_Retval` `ret` into a `_Send` of its input to `recv_device` (it keeps its ``index``)."""
    base = dtypes.as_dtype(ret.attr["T"].type).base_dtype
    index = ret.attr["index"].i
    ret.op = "_Send"
    ret.ClearField("attr")
    for key, value, typ in (("T", base, "type"), ("tensor_name", f"{ret.name}:0", "string"),
                            ("send_device", ret.device, "string"),
                            ("send_device_incarnation", incarnation, "int"),
                            ("recv_device", recv_device, "string"), ("client_terminated", True, "bool"),
                            ("index", index, "int")):
        ret.attr[key].CopyFrom(attr_value.to_proto(value, typ))
