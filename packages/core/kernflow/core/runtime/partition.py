"""Partition: split a placed GraphDef into one GraphDef per device, joined by _Send/_Recv pairs.

Each data edge whose ends sit on different devices becomes a `_Send` on the producer's device and a
`_Recv` on the consumer's, named by a rendezvous key; there is one `_Recv` per (tensor, destination
device), however many consumers it feeds (TF graph_partition.cc). Both are named after the tensor and
the full destination device, so node names are unique across all partitions of a step (a caller may
merge partitions, as the master does per task). A `_Send` already in the graph (a fetch the caller
pulls, `feeds_fetches.py`) sits on its input's device and is kept like any other node. A control
edge across devices becomes a tiny constant sent after the source ran, and the destination waits on
its `_Recv`.
Loops spanning devices first get a control loop per device (partition_control_flow.py), whose
Merge gates every `_Recv` of a tensor that lives in the loop.
"""

from __future__ import annotations

import numpy as np

from kernflow.core.framework import dtypes
from kernflow.core.runtime import partition_control_flow
from kernflow.core.runtime.partition_control_flow import _set
from kernflow.core.runtime.executor import parse_input
from kernflow.core.runtime.prune import output_dtypes_of

__all__ = ["device_label", "partition"]


def device_label(device: str) -> str:
    """A node-name-safe form of a full device name, unique per device (job, replica, task, device)."""
    return "_".join(p.replace(":", "_") for p in device.strip("/").split("/"))


def partition(graph_def, incarnations: dict[str, int]) -> dict:
    """Returns {device name: GraphDef} for a placed graph.

    Args:
        graph_def: every node has a full device name.
        incarnations: device name -> incarnation, for rendezvous keys.
    """
    from kernflow.core.protobuf import graph_pb2
    cf = partition_control_flow.prepare(graph_def)
    if cf is not None:
        graph_def = cf.graph_def
    nodes = {nd.name: nd for nd in graph_def.node}
    parts: dict[str, graph_pb2.GraphDef] = {}

    def part(dev):
        p = parts.get(dev)
        if p is None:
            p = parts[dev] = graph_pb2.GraphDef()
            p.versions.CopyFrom(graph_def.versions)
        return p

    recvs: dict[tuple[str, str], str] = {}   # (tensor or ^node, dst device) -> recv node name
    dtype_cache = {}
    tokens: set[str] = set()

    def out_dtype(name, idx):
        if name not in dtype_cache:
            dtype_cache[name] = output_dtypes_of(nodes[name])
        return dtype_cache[name][idx].base_dtype

    def add_pair(src, src_dev, dst_dev, tensor, dtype, send_input):
        key = (tensor, dst_dev)
        if key in recvs:
            return recvs[key]
        safe = tensor.replace(":", "_").replace("^", "ctrl_")
        suffix = f"{safe}_to_{device_label(dst_dev)}"
        send = part(src_dev).node.add(name=f"_send_{suffix}", op="_Send", device=src_dev,
                                      input=[send_input])
        recv = part(dst_dev).node.add(name=f"_recv_{suffix}", op="_Recv", device=dst_dev)
        if cf is not None:
            recv.input.extend(cf.recv_control_inputs(src, dst_dev))
        for nd in (send, recv):
            _set(nd, "T", dtype, "type")
            _set(nd, "tensor_name", tensor, "string")
            _set(nd, "send_device", src_dev, "string")
            _set(nd, "send_device_incarnation", incarnations.get(src_dev, 0), "int")
            _set(nd, "recv_device", dst_dev, "string")
            _set(nd, "client_terminated", False, "bool")
        recvs[key] = recv.name
        return recv.name

    for nd in graph_def.node:
        dst_dev = nd.device
        new = part(dst_dev).node.add()
        new.CopyFrom(nd)
        del new.input[:]
        for inp in nd.input:
            name, idx, ctrl = parse_input(inp)
            src_dev = nodes[name].device
            if src_dev == dst_dev:
                new.input.append(inp)
            elif ctrl:
                token = f"_ctrl_{name}_on_{device_label(src_dev)}"
                if token not in tokens:
                    tokens.add(token)
                    c = part(src_dev).node.add(name=token, op="Const", device=src_dev, input=["^" + name])
                    _set(c, "dtype", dtypes.float32, "type")
                    _set(c, "value", np.zeros((), np.float32), "tensor")
                r = add_pair(name, src_dev, dst_dev, "^" + name, dtypes.float32, token)
                new.input.append("^" + r)
            else:
                r = add_pair(name, src_dev, dst_dev, f"{name}:{idx}", out_dtype(name, idx),
                             f"{name}:{idx}")
                new.input.append(r)
    # Control inputs must follow data inputs in a NodeDef.
    for p in parts.values():
        for nd in p.node:
            data = [i for i in nd.input if not i.startswith("^")]
            ctrl = [i for i in nd.input if i.startswith("^")]
            del nd.input[:]
            nd.input.extend(data + ctrl)
    if cf is not None:
        cf.finish(parts)
    return parts
