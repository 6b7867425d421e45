"""Loops and conditionals whose nodes sit on two devices (runtime/partition_control_flow.py)."""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors
from kernflow.core.ops import control_flow_ops as cf
from kernflow.core.runtime import partition_control_flow
from kernflow.core.runtime.partition import partition

TWO_CPUS = kf.ConfigProto(device_count={"CPU": 2})
CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
CPU1 = "/job:localhost/replica:0/task:0/device:CPU:1"


@pytest.fixture
def g():
    graph = kf.Graph()
    with graph.as_default():
        yield graph


def _while(name, cond, body, loop_vars, devices, invariants=(), inv_devices=None, cond_device=None,
           parallel_iterations=10, enter_devices=None, next_devices=None):
    """A raw while loop: loop variable k's Enter/Merge/Switch/Exit sit on devices[k].

    `cond(*vars, *invariants)` is built on `cond_device`; `body(*vars, *invariants)` places its own
    ops. Returns the Exit tensors.
    """
    enter_devices = enter_devices or devices
    next_devices = next_devices or devices
    merges = []
    for v, d, ed in zip(loop_vars, devices, enter_devices):
        with kf.device(ed):
            e = cf.enter(v, name, parallel_iterations=parallel_iterations)
        with kf.device(d):
            merges.append(cf.merge([e, e])[0])
    invs = []
    for t, d in zip(invariants, inv_devices or [devices[0]] * len(invariants)):
        with kf.device(d):
            invs.append(cf.enter(t, name, is_constant=True, parallel_iterations=parallel_iterations))
    with kf.device(cond_device or devices[0]):
        pred = cf.loop_cond(cond(*merges, *invs))
    exits, ids = [], []
    for m, d in zip(merges, devices):
        with kf.device(d):
            f, t = cf.switch(m, pred)
            ids.append(kf.identity(t))
            exits.append(cf.exit(f))
    new = body(*ids, *invs)
    for m, v, d in zip(merges, new, next_devices):
        with kf.device(d):
            m.op._update_input(1, cf.next_iteration(v))
    return exits


def _partitions(sess, fetches, feeds):
    md = kf.RunMetadata()
    out = sess.run(fetches, feeds, options=kf.RunOptions(output_partition_graphs=True), run_metadata=md)
    return out, {p.node[0].device: p for p in md.partition_graphs}


def _counter_inputs(other: str):
    """Feeds n and `other` and the counter's start on cpu:0; the accumulator's start on cpu:1."""
    with kf.device("/cpu:0"):
        n = kf.placeholder(kf.int32, [], name="n")
        k = kf.placeholder(kf.int32, [], name=other)
        i0 = kf.constant(0)
    with kf.device("/cpu:1"):
        acc0 = kf.constant(0)
    return n, k, i0, acc0


def _split_counter_and_accumulator(parallel_iterations=10, **kw):
    """i counts to n on cpu:0; acc += i * k on cpu:1, with the invariant k entered on cpu:0."""
    n, k, i0, acc0 = _counter_inputs("k")

    def body(i, acc, n_, k_):
        with kf.device("/cpu:0"):
            i1 = i + kf.constant(1)
        with kf.device("/cpu:1"):
            acc1 = acc + i1 * k_
        return [i1, acc1]

    out = _while("split", lambda i, acc, n_, k_: kf.less(i, n_), body, [i0, acc0], ["/cpu:0", "/cpu:1"],
                 invariants=[n, k], inv_devices=["/cpu:0", "/cpu:0"],
                 parallel_iterations=parallel_iterations, **kw)
    return n, k, out


@pytest.mark.parametrize("parallel_iterations", [1, 10])
def test_loop_body_split_over_two_devices(g, parallel_iterations):
    n, k, (i_out, acc_out) = _split_counter_and_accumulator(parallel_iterations)
    with kf.Session(config=TWO_CPUS) as s:
        for nv, kv in [(10, 1), (7, 3), (1, 2), (200, 2)]:
            out, parts = _partitions(s, [i_out, acc_out], {n: nv, k: kv})
            assert out == [nv, kv * sum(range(1, nv + 1))]
    assert set(parts) == {CPU0, CPU1}
    # Every Recv of a loop tensor is gated by its device's control-loop Merge; feeds entering the
    # loop are sent once, before their Enter (which moved to its consumer's device).
    for dev, p in parts.items():
        for nd in p.node:
            if nd.op == "_Recv":
                gates = [i for i in nd.input if i.startswith("^")]
                if nd.attr["tensor_name"].s.startswith(b"_arg_"):
                    assert gates == [], nd
                else:
                    assert len(gates) == 1 and gates[0].startswith("^_loop_split_") and \
                        gates[0].endswith("/Merge"), (dev, nd)
        loops = [nd for nd in p.node if nd.name.startswith("_loop_split_")]
        assert sorted(nd.op for nd in loops) == sorted(
            ["Enter", "Merge", "Switch", "Identity", "NextIteration", "Exit"])
        enter = next(nd for nd in loops if nd.op == "Enter")
        assert enter.attr["parallel_iterations"].i == parallel_iterations
        assert enter.attr["frame_name"].s == b"split"


def test_loop_running_zero_iterations(g):
    n, k, (i_out, acc_out) = _split_counter_and_accumulator()
    with kf.Session(config=TWO_CPUS) as s:
        assert s.run([i_out, acc_out], {n: 0, k: 5}) == [0, 0]
        assert s.run([i_out, acc_out], {n: -3, k: 5}) == [0, 0]
        assert s.run([i_out, acc_out], {n: 4, k: 5}) == [4, 50]


def test_predicate_on_the_accumulators_device(g):
    """The LoopCond sits on cpu:1; the counter on cpu:0 learns of each iteration by Recv."""
    with kf.device("/cpu:0"):
        x0 = kf.placeholder(kf.float32, [3], name="x0")
    with kf.device("/cpu:1"):
        limit = kf.placeholder(kf.float32, [], name="limit")

    def body(x, step, limit_):
        with kf.device("/cpu:0"):
            x1 = x * 2.0 + 1.0
        with kf.device("/cpu:1"):
            step1 = step + 1
        return [x1, step1]

    def cond(x, step, limit_):
        with kf.device("/cpu:1"):
            return kf.less(kf.reduce_sum(x), limit_)

    with kf.device("/cpu:1"):
        step0 = kf.constant(0)
    x_out, steps = _while("pred_elsewhere", cond, body, [x0, step0], ["/cpu:0", "/cpu:1"],
                          invariants=[limit], inv_devices=["/cpu:1"], cond_device="/cpu:1")
    x = np.array([0.5, -1.0, 2.0], np.float32)
    with kf.Session(config=TWO_CPUS) as s:
        got_x, got_steps = s.run([x_out, steps], {x0: x, limit: 1000.0})
    ref, count = x.copy(), 0
    while ref.sum() < 1000.0:
        ref, count = ref * 2 + 1, count + 1
    np.testing.assert_allclose(got_x, ref)
    assert got_steps == count


def test_loop_nodes_placed_apart_from_their_merge(g):
    """Enters, NextIterations and a body constant sit on the other device than their consumers."""
    with kf.device("/cpu:0"):
        n = kf.placeholder(kf.int32, [], name="n")
        i0 = kf.constant(0)
        one = kf.constant(1, name="one")
        acc0 = kf.constant(10)

    def body(i, acc, n_):
        with kf.device("/cpu:1"):
            i1 = i + one            # a Const on cpu:0 read inside the loop on cpu:1
            acc1 = acc + i1
        return [i1, acc1]

    i_out, acc_out = _while("apart", lambda i, acc, n_: kf.less(i, n_), body, [i0, acc0],
                            ["/cpu:0", "/cpu:0"], invariants=[n], inv_devices=["/cpu:1"],
                            enter_devices=["/cpu:1", "/cpu:1"], next_devices=["/cpu:1", "/cpu:1"])
    with kf.Session(config=TWO_CPUS) as s:
        assert s.run([i_out, acc_out], {n: 6}) == [6, 10 + 21]
        assert s.run([i_out, acc_out], {n: 0}) == [0, 10]


def test_loop_invariant_entered_on_one_device_read_on_both(g):
    with kf.device("/cpu:1"):
        scale = kf.placeholder(kf.float32, [], name="scale")
        n = kf.placeholder(kf.int32, [], name="n")
    with kf.device("/cpu:0"):
        i0 = kf.constant(0)
        a0 = kf.constant(1.0)
    with kf.device("/cpu:1"):
        b0 = kf.constant(0.0)

    def body(i, a, b, scale_, n_):
        with kf.device("/cpu:0"):
            i1 = i + 1
            a1 = a * scale_
        with kf.device("/cpu:1"):
            b1 = b + scale_
        return [i1, a1, b1]

    outs = _while("inv", lambda i, a, b, s_, n_: kf.less(i, n_), body, [i0, a0, b0],
                  ["/cpu:0", "/cpu:0", "/cpu:1"], invariants=[scale, n], inv_devices=["/cpu:1", "/cpu:1"])
    with kf.Session(config=TWO_CPUS) as s:
        got = s.run(outs, {scale: 1.5, n: 5})
    np.testing.assert_allclose(got, [5, 1.5 ** 5, 7.5])


def test_control_dependency_across_devices_inside_a_loop(g):
    with kf.device("/cpu:0"):
        n = kf.placeholder(kf.int32, [], name="n")
        i0 = kf.constant(0)
    with kf.device("/cpu:1"):
        t0 = kf.constant(0.0)

    def body(i, t, n_):
        with kf.device("/cpu:0"):
            i1 = i + 1
        with kf.device("/cpu:1"), kf.control_dependencies([i1]):
            t1 = t + 0.5
        return [i1, t1]

    outs = _while("ctrl", lambda i, t, n_: kf.less(i, n_), body, [i0, t0], ["/cpu:0", "/cpu:1"],
                  invariants=[n])
    with kf.Session(config=TWO_CPUS) as s:
        assert s.run(outs, {n: 8}) == [8, 4.0]


@pytest.mark.parametrize("parallel_iterations", [1, 10])
def test_nested_loops_spanning_devices(g, parallel_iterations):
    """for i < n (cpu:0): s = 0; for j < i (counter on cpu:1): s += j * w (cpu:0); acc += s (cpu:1)."""
    n, w, i0, acc0 = _counter_inputs("w")

    def outer_body(i, acc, n_, w_):
        with kf.device("/cpu:1"):
            j0 = i * 0
        with kf.device("/cpu:0"):
            s0 = i * 0

        def inner_body(j, s, i_, w2):
            with kf.device("/cpu:1"):
                j1 = j + 1
            with kf.device("/cpu:0"):
                s1 = s + j * w2
            return [j1, s1]

        def inner_cond(j, s, i_, w2):
            with kf.device("/cpu:1"):
                return kf.less(j, i_)

        _, s_out = _while("inner", inner_cond, inner_body, [j0, s0], ["/cpu:1", "/cpu:0"],
                          invariants=[i, w_], inv_devices=["/cpu:1", "/cpu:0"], cond_device="/cpu:1",
                          parallel_iterations=parallel_iterations)
        with kf.device("/cpu:0"):
            i1 = i + 1
        with kf.device("/cpu:1"):
            acc1 = acc + s_out
        return [i1, acc1]

    i_out, acc_out = _while("outer", lambda i, acc, n_, w_: kf.less(i, n_), outer_body, [i0, acc0],
                            ["/cpu:0", "/cpu:1"], invariants=[n, w],
                            parallel_iterations=parallel_iterations)
    with kf.Session(config=TWO_CPUS) as s:
        for nv, wv in [(0, 1), (1, 1), (6, 2), (15, 3)]:
            expect = wv * sum(j for i in range(nv) for j in range(i))
            assert s.run([i_out, acc_out], {n: nv, w: wv}) == [nv, expect]


def test_cond_with_branches_on_different_devices(g):
    with kf.device("/cpu:0"):
        x = kf.placeholder(kf.float32, [2], name="x")
        p = kf.placeholder(kf.bool, [], name="p")
        f, t = cf.switch(x, p)
    with kf.device("/cpu:1"):
        a = t * 2.0             # true branch on cpu:1
    with kf.device("/cpu:0"):
        b = f + 100.0           # false branch on cpu:0
    with kf.device("/cpu:1"):
        m, idx = cf.merge([b, a])
        a_only = a + 1.0
    xv = np.array([1.0, -2.0], np.float32)
    with kf.Session(config=TWO_CPUS) as s:
        got, i = s.run([m, idx], {x: xv, p: True})
        np.testing.assert_allclose(got, xv * 2)
        assert i == 1
        got, i = s.run([m, idx], {x: xv, p: False})
        np.testing.assert_allclose(got, xv + 100)
        assert i == 0
        np.testing.assert_allclose(s.run(a_only, {x: xv, p: True}), xv * 2 + 1)
        with pytest.raises(errors.InvalidArgumentError, match="does not have value"):
            s.run(a_only, {x: xv, p: False})


def test_cond_branch_sent_through_a_third_partition(g):
    """A dead tensor crosses a partition without control-flow ops and comes back."""
    with kf.device("/cpu:0"):
        x = kf.placeholder(kf.float32, [], name="x")
        p = kf.placeholder(kf.bool, [], name="p")
        f, t = cf.switch(x, p)
    with kf.device("/cpu:1"):
        a = kf.square(t)
    with kf.device("/cpu:0"):
        m, _ = cf.merge([f - 1.0, a + 1.0])
    with kf.Session(config=TWO_CPUS) as s:
        _, parts = _partitions(s, m, {x: 3.0, p: True})
        assert s.run(m, {x: 3.0, p: True}) == 10.0
        assert s.run(m, {x: 3.0, p: False}) == 2.0
        assert s.run(a, {x: 3.0, p: True}) == 9.0
        with pytest.raises(errors.InvalidArgumentError, match="does not have value"):
            s.run(a, {x: 3.0, p: False})
    assert [nd.op for nd in parts[CPU1].node if nd.op == "ControlTrigger"] == ["ControlTrigger"]


def test_cond_builder_with_branches_on_two_devices(g):
    x = kf.placeholder(kf.float32, [3], name="x")

    def true_fn():
        with kf.device("/cpu:1"):
            return kf.reduce_sum(x * x)

    def false_fn():
        with kf.device("/cpu:0"):
            return kf.reduce_max(x) - 1.0

    with kf.device("/cpu:0"):
        out = kf.cond(kf.reduce_sum(x) > 0.0, true_fn, false_fn)
    with kf.Session(config=TWO_CPUS) as s:
        assert s.run(out, {x: [1.0, 2.0, 3.0]}) == 14.0
        assert s.run(out, {x: [-1.0, -2.0, 0.5]}) == -0.5


def test_cond_inside_a_loop_across_devices(g):
    """acc += i if i is even else -i, the Switch on cpu:1 and the branches on cpu:0."""
    with kf.device("/cpu:0"):
        n = kf.placeholder(kf.int32, [], name="n")
        i0 = kf.constant(0)
    with kf.device("/cpu:1"):
        acc0 = kf.constant(0)

    def body(i, acc, n_):
        with kf.device("/cpu:1"):
            even = kf.equal(kf.floormod(i, 2), 0)
            f, t = cf.switch(i, even)
        with kf.device("/cpu:0"):
            pos, neg = t * 1, f * -1
        with kf.device("/cpu:1"):
            v, _ = cf.merge([neg, pos])
            acc1 = acc + v
        with kf.device("/cpu:0"):
            i1 = i + 1
        return [i1, acc1]

    outs = _while("loopcond", lambda i, acc, n_: kf.less(i, n_), body, [i0, acc0], ["/cpu:0", "/cpu:1"],
                  invariants=[n])
    with kf.Session(config=TWO_CPUS) as s:
        for nv in (0, 1, 9):
            assert s.run(outs, {n: nv}) == [nv, sum(i if i % 2 == 0 else -i for i in range(nv))]


def test_loop_in_an_untaken_branch_across_devices(g):
    """A whole two-device loop runs on dead values when its cond branch is not taken."""
    with kf.device("/cpu:0"):
        n = kf.placeholder(kf.int32, [], name="n")
        p = kf.placeholder(kf.bool, [], name="p")
        n_f, n_t = cf.switch(n, p)
        i0 = n_t * 0
    with kf.device("/cpu:1"):
        acc0 = n_t * 0

    def body(i, acc, n_):
        with kf.device("/cpu:0"):
            i1 = i + 1
        with kf.device("/cpu:1"):
            acc1 = acc + i1
        return [i1, acc1]

    _, acc_out = _while("in_branch", lambda i, acc, n_: kf.less(i, n_), body, [i0, acc0],
                        ["/cpu:0", "/cpu:1"], invariants=[n_t])
    with kf.device("/cpu:1"):
        m, idx = cf.merge([n_f * -1, acc_out])
    with kf.Session(config=TWO_CPUS) as s:
        assert s.run([m, idx], {n: 4, p: True}) == [10, 1]
        assert s.run([m, idx], {n: 4, p: False}) == [-4, 0]


def test_while_loop_builder_across_devices(g):
    """kf.while_loop with its body ops on two devices matches the one-device run."""
    n = kf.placeholder(kf.int32, [], name="n")

    def body(i, x):
        with kf.device("/cpu:1"):
            x1 = x * 1.5 + kf.cast(i, kf.float32)
        with kf.device("/cpu:0"):
            i1 = i + 1
        return i1, x1

    with kf.device("/cpu:0"):
        out = kf.while_loop(lambda i, x: i < n, body, [kf.constant(0), kf.constant(1.0)])
    ref = 1.0
    for i in range(12):
        ref = ref * 1.5 + i
    with kf.Session(config=TWO_CPUS) as s:
        got = s.run(out, {n: 12})
    assert got[0] == 12
    np.testing.assert_allclose(got[1], ref, rtol=1e-6)


def test_graph_without_control_flow_is_left_alone(g):
    with kf.device("/cpu:0"):
        x = kf.placeholder(kf.float32, [])
    with kf.device("/cpu:1"):
        x * 2.0
    gd = g.as_graph_def()
    assert partition_control_flow.prepare(gd) is None
    for nd in gd.node:
        nd.device = CPU0 if nd.name == x.op.name else CPU1
    parts = partition(gd, {})
    assert sorted(nd.op for nd in parts[CPU1].node) == ["Const", "Mul", "_Recv"]
    assert [i for nd in parts[CPU1].node for i in nd.input if i.startswith("^")] == []


def test_loop_on_one_device_gets_no_control_loop(g):
    """Only the loop's input and output cross devices: they are sent once, outside the frame."""
    n, k, (i_out, acc_out) = _split_counter_and_accumulator()
    with kf.device("/cpu:1"):
        doubled = acc_out * 2
    gd = g.as_graph_def()
    for nd in gd.node:
        nd.device = CPU1 if nd.name in (doubled.op.name, n.op.name) else CPU0
    parts = partition(gd, {})
    assert sorted(parts) == [CPU0, CPU1]
    names = [nd.name for p in parts.values() for nd in p.node]
    assert not [nm for nm in names if nm.startswith("_loop_")]
    assert all(not nd.input for p in parts.values() for nd in p.node if nd.op == "_Recv")
    with kf.Session(config=TWO_CPUS) as s:
        assert s.run(doubled, {n: 4, k: 1}) == 20


def test_error_inside_a_loop_on_one_device_ends_the_step(g):
    with kf.device("/cpu:0"):
        n = kf.placeholder(kf.int32, [], name="n")
        i0 = kf.constant(0)
    with kf.device("/cpu:1"):
        table = kf.constant([1, 2, 3])
        acc0 = kf.constant(0)

    def body(i, acc, n_):
        with kf.device("/cpu:0"):
            i1 = i + 1
        with kf.device("/cpu:1"):
            acc1 = acc + kf.gather(table, i)      # out of range once i reaches 3
        return [i1, acc1]

    outs = _while("failing", lambda i, acc, n_: kf.less(i, n_), body, [i0, acc0], ["/cpu:0", "/cpu:1"],
                  invariants=[n])
    with kf.Session(config=TWO_CPUS) as s:
        with pytest.raises(errors.InvalidArgumentError):
            s.run(outs, {n: 50})
        assert s.run(outs, {n: 3}) == [3, 6]
