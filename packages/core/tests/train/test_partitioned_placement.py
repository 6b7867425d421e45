"""replica_device_setter over the parts of partitioned variables (train/device_setter.py)."""

import pytest

import kernflow.core as kf


@pytest.mark.parametrize("ps_tasks", [2, 3])
def test_parts_round_robin_over_ps_tasks(ps_tasks):
    g = kf.Graph()
    with g.as_default(), kf.device(kf.train.replica_device_setter(ps_tasks=ps_tasks)):
        w = kf.get_variable("w", shape=[10, 4], partitioner=kf.fixed_size_partitioner(5))
        b = kf.get_variable("b", shape=[4])
    devices = [v.device for v in w] + [b.device]
    assert devices == [f"/job:ps/task:{i % ps_tasks}" for i in range(6)]
    assert all(op.device == v.device for v in w for op in [v.initializer])


def test_greedy_load_balancing_by_bytes():
    strategy = kf.train.GreedyLoadBalancingStrategy(2, kf.train.byte_size_load_fn)
    g = kf.Graph()
    with g.as_default(), kf.device(kf.train.replica_device_setter(ps_tasks=2,
                                                                  ps_strategy=strategy)):
        big = kf.get_variable("big", shape=[100, 10], partitioner=kf.fixed_size_partitioner(2))
        small = [kf.get_variable(f"s{i}", shape=[10]) for i in range(3)]
    assert [v.device for v in big] == ["/job:ps/task:0", "/job:ps/task:1"]
    # Every small variable goes to the least loaded task; the loads stay within one variable.
    assert [v.device for v in small] == ["/job:ps/task:0", "/job:ps/task:1", "/job:ps/task:0"]
    assert strategy.loads == [2000 + 80, 2000 + 40]


def test_greedy_balances_unequal_parts_better_than_round_robin():
    def loads(strategy):
        g = kf.Graph()
        with g.as_default(), kf.device(kf.train.replica_device_setter(ps_tasks=2,
                                                                      ps_strategy=strategy)):
            kf.get_variable("a", shape=[1000, 8])
            kf.get_variable("b", shape=[10, 8])
            kf.get_variable("c", shape=[1000, 8])
        by_task = {}
        for op in g.get_operations():
            if op.type == "VariableV2":
                by_task[op.device] = by_task.get(op.device, 0) + kf.train.byte_size_load_fn(op)
        return sorted(by_task.values())
    assert loads(kf.train.GreedyLoadBalancingStrategy(2, kf.train.byte_size_load_fn)) == \
        [32000, 32320]
    assert loads(None) == [320, 64000]


def test_byte_size_load_fn_rejects_multi_output_ops():
    g = kf.Graph()
    with g.as_default():
        parts = kf.dynamic_partition([1, 2], [0, 1], 2)
        with pytest.raises(ValueError, match="single output"):
            kf.train.byte_size_load_fn(parts[0].op)
