"""Test support for the graph rewrites (arithmetic simplification, summary fusion, ...): run one
step and see which ops its partition graphs ran, with the rewrites on or off."""

from __future__ import annotations

import kernflow.core as kf

__all__ = ["CPU", "rewrites_off", "run_step"]

CPU = kf.ConfigProto(device_count={"GPU": 0})


def rewrites_off():
    """A CPU-only ConfigProto with `global_jit_level=OFF`: no graph rewrite runs."""
    return kf.ConfigProto(device_count={"GPU": 0}, graph_options=kf.GraphOptions(
        optimizer_options=kf.OptimizerOptions(global_jit_level=kf.OptimizerOptions.OFF)))


def run_step(graph, fetches, feeds=None, config=None, init=None):
    """(the fetched values, the op types of the partition graphs that ran) of one step of `graph` in
    a new session (`config`: CPU only by default), after running `init` when given."""
    with kf.Session(graph=graph, config=config or CPU) as s:
        if init is not None:
            s.run(init)
        meta = kf.RunMetadata()
        out = s.run(fetches, feeds, options=kf.RunOptions(output_partition_graphs=True),
                    run_metadata=meta)
    return out, [nd.op for g in meta.partition_graphs for nd in g.node]
