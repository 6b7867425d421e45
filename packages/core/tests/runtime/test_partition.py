"""`partition`: per-device GraphDefs joined by _Send/_Recv pairs, named uniquely across a step."""

import kernflow.core as kf
from kernflow.core.runtime.partition import device_label, partition

SRC = "/job:w/replica:0/task:0/device:CPU:0"
# Two destinations that differ only in their replica, and one in another job.
DSTS = ("/job:w/replica:0/task:1/device:CPU:0", "/job:w/replica:1/task:1/device:CPU:0",
        "/job:ps/replica:0/task:1/device:CPU:0")


def test_send_and_recv_names_are_unique_across_all_partitions():
    g = kf.Graph()
    with g.as_default():
        x = kf.constant(1.0, name="x")
        k = kf.no_op(name="k")
        for i in range(len(DSTS)):
            with kf.control_dependencies([k]):
                kf.identity(x, name=f"y{i}")
    gd = g.as_graph_def()
    for nd in gd.node:
        nd.device = DSTS[int(nd.name[1:])] if nd.name.startswith("y") else SRC
    parts = partition(gd, {})
    names = [nd.name for p in parts.values() for nd in p.node]
    assert len(names) == len(set(names)), sorted(names)
    sends = [nd for nd in parts[SRC].node if nd.op == "_Send"]
    assert len(sends) == 2 * len(DSTS)   # the tensor and the control edge, to each destination
    assert all(nd.name.endswith(device_label(nd.attr["recv_device"].s.decode())) for nd in sends)


def test_device_label_keeps_every_part_of_the_name():
    assert device_label("/job:w/replica:1/task:2/device:GPU:0") == "job_w_replica_1_task_2_device_GPU_0"
