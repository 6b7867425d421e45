"""Fixtures for the worker tests: in-process clusters and graphs partitioned over their tasks."""

from __future__ import annotations

import pytest

from kernflow.core.plugins import registries
from kernflow.core.protobuf import graph_pb2
from kernflow.core.runtime.partition import partition
from kernflow.core.runtime.placer import PlacementOptions, place
from kernflow.core.runtime.prune import prune


def split_by_task(graph, workers, feeds=(), fetches=(), targets=(), client=0):
    """Places, prunes and partitions `graph` over the devices of `workers`.

    Returns:
        {task_name: GraphDef} holding every device partition of each task (tasks with no nodes
        get an empty GraphDef); _Arg/_Retval sit on the CPU of ``workers[client]``.
    """
    devices = [d for w in workers for d in w.devices]
    client_device = workers[client].devices[0].name
    gd = graph.as_graph_def(add_shapes=True)
    placed = place(gd, devices, registries().kernels, PlacementOptions(client_device=client_device))
    pruned = prune(placed, list(feeds), list(fetches), list(targets), client_device=client_device)
    parts = partition(pruned, {d.name: d.incarnation for d in devices})
    out = {}
    for w in workers:
        g = graph_pb2.GraphDef()
        for dev, p in parts.items():
            if w.is_local_device(dev):
                g.versions.CopyFrom(p.versions)
                g.node.extend(p.node)
        out[w.task_name] = g
    return out


@pytest.fixture
def split():
    return split_by_task


@pytest.fixture
def wait_on_task1_graph():
    """A function building ``b = (1 + 1) * 2`` with the add on task 1 and the multiply on task 0, so task 0's partition
    waits in a Recv for task 1 (a step to abort, time out or refuse); it returns (graph, b)."""
    return _wait_on_task1_graph


def _wait_on_task1_graph():
    import kernflow.core as kf
    g = kf.Graph()
    with g.as_default():
        with kf.device("/job:worker/replica:0/task:1"):
            a = kf.constant(1.0) + 1.0
        with kf.device("/job:worker/replica:0/task:0"):
            b = a * 2.0
    return g, b
