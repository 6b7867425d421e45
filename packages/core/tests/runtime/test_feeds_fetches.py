"""Where a step's feeds and fetches live (`feeds_fetches.place_feeds_and_fetches`), decided before
partitioning, and what the embedded session's partitions look like for it."""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.runtime.feeds_fetches import place_feeds_and_fetches
from kernflow.core.runtime.partition import partition
from kernflow.core.runtime.prune import prune

TWO_CPUS = kf.ConfigProto(device_count={"CPU": 2})
T0 = "/job:w/replica:0/task:0"
T1 = "/job:w/replica:0/task:1"
CPU0, CPU1 = f"{T0}/device:CPU:0", f"{T0}/device:CPU:1"
PULL = "/job:puller/replica:0/task:0/device:CPU:0"


def _pruned(devices: dict, feeds, fetches, client=CPU0):
    """The graph of x -> a = x + 1, b = x * 3, c = a + b, placed by `devices` (node -> device, else
    the client device), pruned for `feeds` and `fetches`."""
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [], name="x")
        a = kf.add(x, 1.0, name="a")
        b = kf.multiply(x, kf.constant(3.0, name="b/y"), name="b")
        kf.add(a, b, name="c")
    gd = g.as_graph_def()
    for nd in gd.node:
        nd.device = devices.get(nd.name, client)
    return prune(gd, feeds, fetches, (), client_device=client)


def _ops(gd, op):
    return sorted((nd.device, nd.attr["index"].i) for nd in gd.node if nd.op == op)


def test_a_feed_goes_to_each_device_that_reads_it_and_a_fetch_to_its_producer():
    gd = _pruned({"a": CPU1, "a/y": CPU1, "b": f"{T1}/device:CPU:0", "b/y": f"{T1}/device:CPU:0"},
                 ["x:0"], ["a:0", "b:0"])
    place_feeds_and_fetches(gd, CPU0)
    assert _ops(gd, "_Arg") == [(CPU1, 0), (f"{T1}/device:CPU:0", 0)]
    assert _ops(gd, "_Retval") == [(CPU1, 0), (f"{T1}/device:CPU:0", 1)]
    # Each reader reads the `_Arg` on its own device: no edge crosses devices.
    devs = {nd.name: nd.device for nd in gd.node}
    for nd in gd.node:
        for inp in nd.input:
            assert devs[inp.lstrip("^").split(":")[0]] == nd.device, (nd.name, inp)
    parts = partition(gd, {})
    assert not [nd for p in parts.values() for nd in p.node if nd.op in ("_Send", "_Recv")]


def test_feeds_read_or_fetched_only_on_the_client_device_stay_there():
    gd = _pruned({"c": CPU1}, ["x:0", "a:0"], ["x:0", "b:0"])   # a fed but read by nobody
    place_feeds_and_fetches(gd, CPU0)
    assert _ops(gd, "_Arg") == [(CPU0, 0), (CPU0, 1)]
    assert _ops(gd, "_Retval") == [(CPU0, 0), (CPU0, 1)]


def test_a_fed_tensor_also_fetched_keeps_its_client_copy_for_the_fetch():
    gd = _pruned({"b": CPU1, "b/y": CPU1}, ["x:0"], ["x:0", "b:0"])
    place_feeds_and_fetches(gd, CPU0)
    assert _ops(gd, "_Arg") == [(CPU0, 0), (CPU1, 0)]
    assert _ops(gd, "_Retval") == [(CPU0, 0), (CPU1, 1)]


def test_a_feed_read_on_two_devices_of_a_task_gets_an_arg_on_each():
    t1 = {"a": f"{T1}/device:CPU:1", "a/y": f"{T1}/device:CPU:1", "b": f"{T1}/device:CPU:0",
          "b/y": f"{T1}/device:CPU:0"}
    gd = _pruned(t1, ["x:0"], ["a:0", "b:0"])
    place_feeds_and_fetches(gd, CPU0)
    assert _ops(gd, "_Arg") == [(f"{T1}/device:CPU:0", 0), (f"{T1}/device:CPU:1", 0)]
    assert not [nd for p in partition(gd, {}).values() for nd in p.node if nd.op == "_Send"]


def test_pulled_fetches_become_sends_to_the_pull_device_on_their_producers():
    gd = _pruned({"b": CPU1, "b/y": CPU1}, ["x:0"], ["b:0", "x:0"])
    place_feeds_and_fetches(gd, CPU0, pull_device=PULL, incarnations={CPU1: 7})
    assert not _ops(gd, "_Retval")
    sends = {nd.attr["index"].i: nd for nd in gd.node if nd.op == "_Send"}
    assert {i: nd.device for i, nd in sends.items()} == {0: CPU1, 1: CPU0}
    s = sends[0]
    assert s.attr["recv_device"].s.decode() == PULL and s.attr["send_device"].s.decode() == CPU1
    assert s.attr["send_device_incarnation"].i == 7 and s.attr["client_terminated"].b
    assert s.attr["tensor_name"].s.decode() == f"{s.name}:0"
    assert s.attr["T"].type == kf.float32.as_datatype_enum
    # Partition keeps them where they are: their inputs are local.
    parts = partition(gd, {CPU1: 7})
    assert sorted(nd.name for p in parts.values() for nd in p.node if nd.op == "_Send") == \
        sorted(nd.name for nd in sends.values())


# ------------------------------------------------------------------ the embedded session
def _partition_ops(md):
    return {p.node[0].device: sorted(nd.op for nd in p.node if nd.op.startswith("_"))
            for p in md.partition_graphs}


@pytest.mark.parametrize("fetch_x", [False, True])
def test_in_process_feeds_and_fetches_need_no_send_recv(fetch_x):
    local0, local1 = (f"/job:localhost/replica:0/task:0/device:CPU:{i}" for i in (0, 1))
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [2], name="x")
        with kf.device("/cpu:1"):
            y = x * 2.0
        with kf.device("/cpu:0"):
            z = x + 1.0
    md = kf.RunMetadata()
    fetches = [y, z, x] if fetch_x else [y]
    with kf.Session(graph=g, config=TWO_CPUS) as s:
        out = s.run(fetches, {x: [1.0, 2.0]}, options=kf.RunOptions(output_partition_graphs=True),
                    run_metadata=md)
        np.testing.assert_array_equal(out[0], [2.0, 4.0])
        if fetch_x:
            np.testing.assert_array_equal(out[1], [2.0, 3.0])
            np.testing.assert_array_equal(out[2], [1.0, 2.0])
        # The same again, through the cached step.
        np.testing.assert_array_equal(s.run(fetches, {x: [0.0, 1.0]})[0], [0.0, 2.0])
    if fetch_x:   # x read on both devices: an _Arg on each, the same index
        assert _partition_ops(md) == {local0: ["_Arg", "_Retval", "_Retval"], local1: ["_Arg", "_Retval"]}
    else:         # only CPU:1 takes part
        assert _partition_ops(md) == {local1: ["_Arg", "_Retval"]}
