"""kernflow.core.client.timeline and the RunMetadata a traced step fills (step stats, cost graph)."""

from __future__ import annotations

import collections
import json
import re

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.client import timeline
from kernflow.core.protobuf import step_stats_pb2

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
CPU1 = "/job:localhost/replica:0/task:0/device:CPU:1"
_TRANSFER = re.compile(r"(?:\[[^\]]*\] )*(\S+) = (_Send|_Recv)\((\S+) @(\S+)\)$")


def _traced_step(fetch_fn, feeds_fn=None, trace_level=None):
    """Builds a graph over two CPU devices with `fetch_fn`, runs one traced step, returns
    (graph, fetched value, RunMetadata)."""
    g = kf.Graph()
    with g.as_default():
        fetch, feeds = fetch_fn()
        with kf.Session(config=kf.ConfigProto(device_count={"CPU": 2})) as sess:
            sess.run(kf.global_variables_initializer())
            md = kf.RunMetadata()
            level = kf.RunOptions.FULL_TRACE if trace_level is None else trace_level
            value = sess.run(fetch, feeds, options=kf.RunOptions(trace_level=level), run_metadata=md)
    return g, value, md


def _two_device_graph():
    with kf.device("/cpu:0"):
        x = kf.placeholder(kf.float32, [None, 32], name="x")
        w = kf.Variable(kf.fill([32, 16], 0.5), name="w")
        h = kf.matmul(x, w, name="h")
    with kf.device("/cpu:1"):
        y = kf.reduce_sum(kf.nn.relu(h + 1.0), name="y")
    return y, {x: np.ones((64, 32), np.float32)}


@pytest.fixture(scope="module")
def traced():
    return _traced_step(_two_device_graph)


def _events(trace_json):
    trace = json.loads(trace_json)
    return trace["traceEvents"]


def _process_names(events):
    return {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}


def _transfers(step_stats):
    """[(op, tensor, own device, peer device)] of every _Send/_Recv execution."""
    found = []
    for ds in step_stats.dev_stats:
        for ns in ds.node_stats:
            m = _TRANSFER.match(ns.timeline_label)
            if m:
                found.append((m.group(2), m.group(3), ds.device, m.group(4)))
    return found


def test_timeline_is_importable_with_tf_names():
    from kernflow.core.client.timeline import AllocationMaximum, StepStatsAnalysis, Timeline  # noqa: F401
    assert timeline.__all__ == ["AllocationMaximum", "StepStatsAnalysis", "Timeline"]
    assert "tl = timeline.Timeline(run_metadata.step_stats)" in timeline.__doc__


def test_full_trace_gives_a_valid_chrome_trace_with_a_process_per_device(traced):
    _, value, md = traced
    assert value == pytest.approx(64 * 16 * 17.0)
    events = _events(timeline.Timeline(md.step_stats).generate_chrome_trace_format())
    for e in events:
        assert {"ph", "pid", "tid", "ts"} <= set(e), e
    ops = [e for e in events if e["ph"] == "X"]
    assert ops and all(e["dur"] >= 0 for e in ops)
    assert len(ops) == sum(len(ds.node_stats) for ds in md.step_stats.dev_stats)
    names = _process_names(events)
    assert {f"{CPU0} Compute", f"{CPU1} Compute"} <= set(names.values())
    by_name = {e["args"]["name"]: e for e in ops}
    assert by_name["h"]["name"] == "MatMul" and by_name["h"]["args"]["op"] == "MatMul"
    assert names[by_name["h"]["pid"]] == f"{CPU0} Compute"
    assert by_name["h"]["args"]["input1"] == "w/read"
    assert names[by_name["y"]["pid"]] == f"{CPU1} Compute"


def test_every_send_recv_pair_gets_a_flow_arrow(traced):
    _, _, md = traced
    transfers = _transfers(md.step_stats)
    sends = [t for t in transfers if t[0] == "_Send"]
    assert sends and len(sends) == len(transfers) - len(sends)
    events = _events(timeline.Timeline(md.step_stats).generate_chrome_trace_format(show_dataflow=True))
    names = _process_names(events)
    flows = {}
    for e in events:
        if e["ph"] in "sf":
            flows.setdefault(e["id"], {})[e["ph"]] = e
    for _, tensor, src, dst in sends:
        pairs = [f for f in flows.values() if f.get("s", {}).get("name") == tensor
                 and names[f["s"]["pid"]] == f"{src} Compute" and "f" in f
                 and names[f["f"]["pid"]] == f"{dst} Compute"]
        assert len(pairs) == 1, (tensor, flows)
        assert pairs[0]["f"]["bp"] == "e"
    no_flows = _events(timeline.Timeline(md.step_stats).generate_chrome_trace_format(show_dataflow=False))
    assert not [e for e in no_flows if e["ph"] in "sf"]


def test_show_memory_adds_counters_per_allocator(traced):
    _, _, md = traced
    tl = timeline.Timeline(md.step_stats)
    events = _events(tl.generate_chrome_trace_format(show_memory=True))
    counters = [e for e in events if e["ph"] == "C"]
    assert counters and {e["name"] for e in counters} == {"cpu"}
    assert all(e["args"]["cpu"] >= 0 for e in counters)
    assert counters[-1]["args"]["cpu"] == 0            # every tensor is released by the end
    assert "Allocators" in _process_names(events).values()
    assert [e for e in events if e["ph"] == "N"] and [e for e in events if e["ph"] == "D"]
    maximum = tl.analyze_step_stats(show_memory=True).allocator_maximums["cpu"]
    assert maximum.num_bytes >= 64 * 16 * 4 and maximum.tensors and maximum.timestamp > 0
    assert not [e for e in _events(tl.generate_chrome_trace_format()) if e["ph"] == "C"]


def test_node_exec_stats_carry_tf_fields(traced):
    _, _, md = traced
    stats = {ns.node_name: (ds, ns) for ds in md.step_stats.dev_stats for ns in ds.node_stats}
    ds, h = stats["h"]
    assert h.timeline_label.endswith("h = MatMul(_arg_x_0_0, w/read)")
    assert h.all_start_micros > 0
    assert 0 <= h.op_start_rel_micros <= h.op_end_rel_micros <= h.all_end_rel_micros
    assert h.thread_id in ds.thread_names
    assert [(m.allocator_name, m.total_bytes, m.peak_bytes) for m in h.memory] == [("cpu", 4096, 4096)]
    (out,) = h.output
    td = out.tensor_description
    assert (out.slot, td.dtype, [d.size for d in td.shape.dim]) == (0, kf.float32.as_datatype_enum, [64, 16])
    alloc = td.allocation_description
    assert (alloc.requested_bytes, alloc.allocated_bytes, alloc.allocator_name) == (4096, 4096, "cpu")
    _, w = stats["w"]
    assert w.memory_stats.persistent_memory_size == 32 * 16 * 4 and w.memory[0].total_bytes == 0
    transfers = _transfers(md.step_stats)
    assert ("_Send", "h:0", CPU0, CPU1) in transfers and ("_Recv", "h:0", CPU1, CPU0) in transfers


def test_step_stats_parse_as_tf_bytes(traced):
    _, _, md = traced
    again = step_stats_pb2.StepStats.FromString(md.step_stats.SerializeToString())
    assert again == md.step_stats
    # TF's NodeOutput.tensor_description is field 3 and NodeExecStats.memory_stats field 12.
    assert step_stats_pb2.NodeOutput.DESCRIPTOR.fields_by_name["tensor_description"].number == 3
    assert step_stats_pb2.NodeExecStats.DESCRIPTOR.fields_by_name["memory_stats"].number == 12


def test_cost_graph_has_a_node_per_partition_node_with_measured_costs(traced):
    _, _, md = traced
    cg = md.cost_graph
    ids = {n.id: n for n in cg.node}
    assert len(ids) == len(cg.node) > 0
    for n in cg.node:
        assert n.device in (CPU0, CPU1)
        for ii in n.input_info:
            assert ii.preceding_node in ids and ii.preceding_port < len(ids[ii.preceding_node].output_info)
        assert all(c in ids for c in n.control_input)
    by_name = {n.name: n for n in cg.node}
    h = by_name["h"]
    assert [_source(ids, ii) for ii in h.input_info] == [("_arg_x_0_0", 0), ("w/read", 0)]
    assert h.compute_cost > 0 and h.compute_time >= h.compute_cost and not h.inaccurate
    (oi,) = h.output_info
    assert (oi.size, [d.size for d in oi.shape.dim], oi.dtype, oi.alias_input_port) == \
        (64 * 16 * 4, [64, 16], kf.float32.as_datatype_enum, -1)
    assert by_name["w/read"].output_info[0].alias_input_port == 0       # Identity forwards
    assert by_name["w"].persistent_memory_size == 32 * 16 * 4
    executed = {ns.node_name for ds in md.step_stats.dev_stats for ns in ds.node_stats}
    assert executed <= set(by_name)


def _source(ids, input_info):
    return ids[input_info.preceding_node].name, input_info.preceding_port


def test_untraced_steps_leave_run_metadata_empty():
    _, _, md = _traced_step(_two_device_graph, trace_level=kf.RunOptions.NO_TRACE)
    assert not md.step_stats.dev_stats and not md.cost_graph.node


def test_control_flow_steps_are_traced():
    def loop():
        i = kf.constant(0)
        with kf.device("/cpu:0"):
            out = kf.while_loop(lambda i: i < 5, lambda i: i + 1, [i])
        return out, None
    _, value, md = _traced_step(loop)
    assert value == 5
    names = [ns.node_name for ds in md.step_stats.dev_stats for ns in ds.node_stats]
    assert any("Merge" in n for n in names)
    events = _events(timeline.Timeline(md.step_stats).generate_chrome_trace_format(show_memory=True))
    assert all(e.get("dur", 0) >= 0 for e in events)


def _stats(*nodes):
    """A StepStats of one device from (name, label, start, duration) tuples."""
    ss = step_stats_pb2.StepStats()
    ds = ss.dev_stats.add(device=CPU0)
    for name, label, start, dur in nodes:
        ds.node_stats.add(node_name=name, timeline_label=label, all_start_micros=start,
                          all_end_rel_micros=dur, op_end_rel_micros=dur)
    return ss


def test_overlapping_executions_get_separate_lanes_and_the_input_is_untouched():
    ss = _stats(("a", "a = Const()", 100, 50), ("b", "b = Const()", 120, 10), ("c", "c = Add(a, b)", 200, 5))
    before = ss.SerializeToString()
    ops = {e["args"]["name"]: e for e in _events(timeline.Timeline(ss).generate_chrome_trace_format())
           if e["ph"] == "X"}
    assert ops["a"]["tid"] != ops["b"]["tid"] and ops["c"]["tid"] == ops["a"]["tid"]
    assert ss.SerializeToString() == before


def test_dataflow_arrows_join_producers_and_consumers_on_other_lanes():
    ss = _stats(("a", "a = Const()", 100, 50), ("b", "b = Const()", 120, 10), ("c", "c = Add(a, b)", 200, 5))
    for ns in ss.dev_stats[0].node_stats:
        ns.output.add(slot=0).tensor_description.allocation_description.requested_bytes = 8
    events = _events(timeline.Timeline(ss).generate_chrome_trace_format())
    flows = [e for e in events if e["ph"] in "sf"]
    assert [(e["ph"], e["name"]) for e in flows] == [("s", "b:0"), ("f", "b:0")]   # a is on c's lane
    assert flows[0]["id"] == flows[1]["id"]


def test_graph_gives_op_and_inputs_when_labels_lack_them():
    g = kf.Graph()
    with g.as_default():
        a = kf.constant(1.0, name="a")
        kf.add(a, a, name="c")
    ss = _stats(("c", "", 10, 1))
    (op,) = [e for e in _events(timeline.Timeline(ss, graph=g).generate_chrome_trace_format())
             if e["ph"] == "X"]
    assert (op["name"], op["args"]["input0"], op["args"]["input1"]) == ("AddV2", "a", "a")
    (op,) = [e for e in _events(timeline.Timeline(ss).generate_chrome_trace_format()) if e["ph"] == "X"]
    assert op["name"] == "unknown"


def test_unknown_op_time_is_rejected():
    with pytest.raises(ValueError, match="op_time"):
        timeline.Timeline(_stats()).generate_chrome_trace_format(op_time="wall")


def test_sends_and_recvs_of_a_loop_pair_once_per_iteration():
    def loop():
        with kf.device("/cpu:0"):
            i0, x0 = kf.constant(0), kf.constant(1.0)

        def body(i, x):
            with kf.device("/cpu:1"):
                y = x * 1.5
            with kf.device("/cpu:0"):
                return i + 1, y + 1.0
        with kf.device("/cpu:0"):
            return kf.while_loop(lambda i, x: i < 4, body, [i0, x0]), None
    _, value, md = _traced_step(loop)
    assert value[1] == pytest.approx(13.1875)
    transfers = _transfers(md.step_stats)
    sends = collections.Counter((t, src, dst) for op, t, src, dst in transfers if op == "_Send")
    recvs = collections.Counter((t, src, dst) for op, t, dst, src in transfers if op == "_Recv")
    assert sends == recvs and min(sends.values()) >= 4
    events = _events(timeline.Timeline(md.step_stats).generate_chrome_trace_format())
    names = _process_names(events)
    heads = {e["id"]: e for e in events if e["ph"] == "f"}
    crossing = collections.Counter()
    for s in (e for e in events if e["ph"] == "s"):
        f = heads[s["id"]]
        if f["pid"] != s["pid"]:
            crossing[(s["name"], names[s["pid"]][:-len(" Compute")], names[f["pid"]][:-len(" Compute")])] += 1
    assert crossing == sends
