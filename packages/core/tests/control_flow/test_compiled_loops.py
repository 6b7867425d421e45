"""Compiled while loops (runtime/loops.py): which loops compile, and that they compute what the frames
executor computes. Every test runs twice (conftest: compiled and frames), so the values are checked
against both executors."""

import threading
import time

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors
from kernflow.core.runtime import loops

# Loops compile on the CPU (a GPU plugin, when installed, would place their bodies on the GPU).
CPU = kf.ConfigProto(device_count={"GPU": 0})


def _traced_ops(sess, fetches, feed=None):
    md = kf.RunMetadata()
    out = sess.run(fetches, feed, options=kf.RunOptions(trace_level=kf.RunOptions.FULL_TRACE),
                   run_metadata=md)
    ops = [(ns.node_name, ns.op_type) for d in md.step_stats.dev_stats for ns in d.node_stats]
    return out, ops


def _compiled_loops(ops):
    return sorted(name for name, op in ops if op == "_CompiledLoop")


def test_simple_loop_is_one_node_and_traces_its_members():
    n = kf.placeholder(kf.int32, [])
    out = kf.while_loop(lambda i, a: i < n, lambda i, a: (i + 1, kf.add(a, 2.0, name="acc")),
                        [kf.constant(0), kf.constant(0.0)], name="count")
    with kf.Session(config=CPU) as s:
        got, ops = _traced_ops(s, out, {n: 7})
        assert tuple(got) == (7, 14.0)
        assert tuple(s.run(out, {n: 0})) == (0, 0.0)
    names = [name for name, _ in ops]
    assert names.count("count/acc") in (7, 8)    # the frames executor records the dead last one too
    assert _compiled_loops(ops) == (["count"] if loops.ENABLED else [])


def test_lstm_forward_and_gradient_loops_compile_and_match_numpy():
    rng = np.random.RandomState(3)
    xs = rng.randn(4, 6, 5).astype(np.float64)
    cell = kf.nn.rnn_cell.MultiRNNCell([kf.nn.rnn_cell.BasicLSTMCell(8) for _ in range(2)])
    x = kf.placeholder(kf.float64, [4, 6, 5])
    out, state = kf.nn.dynamic_rnn(cell, x, dtype=kf.float64)
    loss = kf.reduce_sum(out * out)
    kernel = [v for v in kf.trainable_variables() if "cell_0" in v.name and "kernel" in v.name][0]
    grad, = kf.gradients(loss, [kernel])
    with kf.Session(config=CPU) as s:
        s.run(kf.global_variables_initializer())
        (o, gv), ops = _traced_ops(s, [out, grad], {x: xs})
        ws = s.run([v for v in kf.trainable_variables()])
    # The forward pass by hand.
    h = [np.zeros((4, 8)), np.zeros((4, 8))]
    c = [np.zeros((4, 8)), np.zeros((4, 8))]
    sig = lambda z: 1 / (1 + np.exp(-z))  # noqa: E731
    expect = []
    for t in range(6):
        inp = xs[:, t]
        for layer in range(2):
            z = np.concatenate([inp, h[layer]], 1) @ ws[2 * layer] + ws[2 * layer + 1]
            i, j, f, oo = np.split(z, 4, axis=1)
            c[layer] = c[layer] * sig(f + 1.0) + sig(i) * np.tanh(j)
            h[layer] = np.tanh(c[layer]) * sig(oo)
            inp = h[layer]
        expect.append(inp)
    np.testing.assert_allclose(o, np.stack(expect, 1), rtol=1e-10)
    assert gv.shape == (13, 32) and np.isfinite(gv).all()
    if loops.ENABLED:
        compiled = _compiled_loops(ops)
        assert len(compiled) == 2 and any("grad" in nm for nm in compiled), compiled


def test_gradient_of_compiled_loop_matches_finite_differences():
    x = kf.placeholder(kf.float64, [3])
    w = kf.constant(np.array([[0.5, -0.2, 0.1], [0.3, 0.8, -0.4], [0.0, 0.2, 0.6]]))

    def body(i, h):
        return i + 1, kf.tanh(kf.squeeze(kf.matmul(kf.expand_dims(h, 0), w), [0]) + x)
    _, y = kf.while_loop(lambda i, h: i < 5, body, [kf.constant(0), kf.zeros([3], kf.float64)])
    loss = kf.reduce_sum(y * y)
    g, = kf.gradients(loss, [x])
    x0 = np.array([0.3, -0.1, 0.7])
    with kf.Session(config=CPU) as s:
        got = s.run(g, {x: x0})
        eps = 1e-6
        fd = [(s.run(loss, {x: x0 + eps * e}) - s.run(loss, {x: x0 - eps * e})) / (2 * eps)
              for e in np.eye(3)]
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-9)


def test_nested_loops_compile_inner_first_then_outer():
    def outer_body(i, acc):
        inner = kf.while_loop(lambda j, a: j < i, lambda j, a: (j + 1, a + kf.cast(j, kf.float32)),
                              [kf.constant(0), kf.constant(0.0)], name="inner")[1]
        return i + 1, acc + inner
    out = kf.while_loop(lambda i, acc: i < 5, outer_body, [kf.constant(0), kf.constant(0.0)],
                        name="outer")
    with kf.Session(config=CPU) as s:
        got, ops = _traced_ops(s, out)
    # sum over i < 5 of sum(range(i)) = 0 + 0 + 1 + 3 + 6
    assert tuple(got) == (5, 10.0)
    if loops.ENABLED:   # the inner loop is a node of the outer one's body: one run per iteration
        assert _compiled_loops(ops) == ["outer"] + ["outer/inner"] * 5


def test_loop_with_a_cond_in_its_body_stays_on_the_frames_executor():
    def body(i, a):
        return i + 1, kf.cond(kf.equal(i % 2, 0), lambda: a + 1.0, lambda: a * 2.0)
    out = kf.while_loop(lambda i, a: i < 6, body, [kf.constant(0), kf.constant(1.0)])
    with kf.Session(config=CPU) as s:
        got, ops = _traced_ops(s, out)
    a = 1.0
    for i in range(6):
        a = a + 1.0 if i % 2 == 0 else a * 2.0
    assert got[1] == a
    assert _compiled_loops(ops) == []


def test_stateful_body_op_runs_once_per_iteration():
    v = kf.Variable(0, name="counter")

    def body(i):
        with kf.control_dependencies([kf.assign_add(v, 1)]):
            return i + 1
    out = kf.while_loop(lambda i: i < 9, body, [kf.constant(0)])
    with kf.Session(config=CPU) as s:
        s.run(v.initializer)
        assert s.run(out) == 9
        assert s.run(v) == 9
        assert s.run(out) == 9
        assert s.run(v) == 18


def test_loop_reading_a_feed_and_a_variable():
    x = kf.placeholder(kf.float32, [2])
    v = kf.Variable([1.0, 2.0])
    out = kf.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a * x + v), [0, kf.zeros([2])])[1]
    with kf.Session(config=CPU) as s:
        s.run(v.initializer)
        got = s.run(out, {x: [2.0, 0.5]})
    a = np.zeros(2)
    for _ in range(3):
        a = a * np.array([2.0, 0.5]) + np.array([1.0, 2.0])
    np.testing.assert_allclose(got, a)


def test_two_independent_loops_both_compile():
    a = kf.while_loop(lambda i: i < 100, lambda i: i + 1, [kf.constant(0)], name="up")
    b = kf.while_loop(lambda i: i > -50, lambda i: i - 1, [kf.constant(0)], name="down")
    with kf.Session(config=CPU) as s:
        got, ops = _traced_ops(s, [a, b])
    assert got == [100, -50]
    assert _compiled_loops(ops) == (["down", "up"] if loops.ENABLED else [])


def test_body_error_names_the_node_in_the_loop():
    x = kf.placeholder(kf.float32, [None])

    def body(i, a):
        return i + 1, kf.reshape(a, [2, -1], name="bad_reshape")
    out = kf.while_loop(lambda i, a: i < 2, body, [kf.constant(0), x],
                        shape_invariants=[kf.TensorShape([]), kf.TensorShape(None)])
    with kf.Session(config=CPU) as s:
        with pytest.raises(errors.InvalidArgumentError, match="bad_reshape"):
            s.run(out, {x: np.zeros(3, np.float32)})


def test_endless_loop_stops_at_the_run_deadline():
    out = kf.while_loop(lambda i: i >= 0, lambda i: i + 1, [kf.constant(0)])
    with kf.Session(config=CPU) as s:
        t0 = time.monotonic()
        with pytest.raises(errors.DeadlineExceededError):
            s.run(out, options=kf.RunOptions(timeout_in_ms=300))
        assert time.monotonic() - t0 < 10


def test_endless_loop_stops_when_the_session_closes(in_thread):
    out = kf.while_loop(lambda i: i >= 0, lambda i: i + 1, [kf.constant(0)])
    s = kf.Session(config=CPU)
    started = threading.Event()
    t, box = in_thread(lambda: (started.set(), s.run(out)))
    started.wait(5)
    time.sleep(0.3)
    s.close()
    t.join(10)
    assert not t.is_alive(), "the loop kept running after Session.close"
    assert box and box[0][0] == "err" and isinstance(box[0][1], errors.OpError), box


def test_loop_in_an_untaken_cond_branch_does_not_run():
    p = kf.placeholder(kf.bool, [])
    v = kf.Variable(0)

    def looping():
        def body(i):
            with kf.control_dependencies([kf.assign_add(v, 1)]):
                return i + 1
        return kf.while_loop(lambda i: i < 4, body, [kf.constant(0)])
    out = kf.cond(p, looping, lambda: kf.constant(-1))
    with kf.Session(config=CPU) as s:
        s.run(v.initializer)
        assert s.run(out, {p: False}) == -1 and s.run(v) == 0
        assert s.run(out, {p: True}) == 4 and s.run(v) == 4


def test_jit_level_off_keeps_loops_on_the_frames_executor():
    out = kf.while_loop(lambda i: i < 3, lambda i: i + 1, [kf.constant(0)], name="plain")
    cfg = kf.ConfigProto()
    cfg.graph_options.optimizer_options.global_jit_level = kf.OptimizerOptions.OFF
    with kf.Session(config=cfg) as s:
        got, ops = _traced_ops(s, out)
    assert got == 3 and _compiled_loops(ops) == []


def _two_matmul_loop(a_val, b_val):
    a = kf.placeholder(kf.float64, None)
    b = kf.placeholder(kf.float64, None)

    def body(i, x, y):
        # Two independent matmuls per iteration: the first runs beside the second (loops.py).
        return i + 1, kf.matmul(a, x, name="first_mm"), kf.matmul(y, b, name="second_mm")
    out = kf.while_loop(lambda i, x, y: i < 3, body, [kf.constant(0), kf.eye(2, dtype=kf.float64),
                                                        kf.eye(2, dtype=kf.float64)],
                        shape_invariants=[kf.TensorShape([]), kf.TensorShape(None), kf.TensorShape(None)])
    with kf.Session(config=CPU) as s:
        return s.run(out, {a: a_val, b: b_val})


def test_independent_matmuls_of_an_iteration_give_the_sequential_result():
    rng = np.random.RandomState(0)
    av, bv = rng.randn(2, 2), rng.randn(2, 2)
    _, x, y = _two_matmul_loop(av, bv)
    np.testing.assert_allclose(x, np.linalg.matrix_power(av, 3), rtol=1e-12)
    np.testing.assert_allclose(y, np.linalg.matrix_power(bv, 3), rtol=1e-12)


def test_error_in_a_kernel_run_beside_another_names_it():
    with pytest.raises(errors.InvalidArgumentError, match="first_mm"):
        _two_matmul_loop(np.ones((3, 3)), np.ones((2, 2)))
