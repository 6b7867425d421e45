"""The frame-aware dataflow executor (runtime/control_flow_executor.py): dead tensors through the
raw primitives, devices, tracing, concurrent steps, cancellation."""

import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors
from kernflow.core.ops import control_flow_ops as cf

TWO_CPUS = kf.ConfigProto(device_count={"CPU": 2, "GPU": 0})


def _run(fetches, feed=None, config=None):
    with kf.Session(config=config) as sess:
        return sess.run(fetches, feed)


def _run_script(body: str, timeout: float = 30.0) -> str:
    """Runs `body` in a fresh interpreter (a hang there cannot stall this suite); returns stdout."""
    code = "import kernflow.core as kf\nfrom kernflow.core.framework import errors\n" + \
        textwrap.dedent(body)
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return "TIMEOUT"
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip()


# ---------------------------------------------------------------------------- Switch and Merge
def test_switch_forwards_to_one_output_and_the_other_is_dead():
    p = kf.placeholder(kf.bool, [])
    x = kf.constant([1.0, 2.0])
    f, t = cf.switch(x, p)
    with kf.Session() as s:
        np.testing.assert_allclose(s.run(t, {p: True}), [1, 2])
        np.testing.assert_allclose(s.run(f, {p: False}), [1, 2])
        with pytest.raises(errors.InvalidArgumentError):
            s.run(f, {p: True})
        with pytest.raises(errors.InvalidArgumentError):
            s.run(t, {p: False})


def test_merge_forwards_the_live_input_and_its_index():
    p = kf.placeholder(kf.bool, [])
    f, t = cf.switch(kf.constant(5), p)
    out, idx = cf.merge([f * 10, t * 100])
    with kf.Session() as s:
        assert s.run([out, idx], {p: False}) == [50, 0]
        assert s.run([out, idx], {p: True}) == [500, 1]


def test_merge_of_three_inputs_one_live():
    p = kf.placeholder(kf.bool, [])
    q = kf.placeholder(kf.bool, [])
    pf, pt = cf.switch(kf.constant(1), p)
    qf, qt = cf.switch(kf.constant(2), q)
    out, idx = cf.merge([pt, qt, qf + pf * 0])   # third input: live only if both p and q are false
    with kf.Session() as s:
        assert s.run([out, idx], {p: True, q: False}) == [1, 0]
        assert s.run([out, idx], {p: False, q: True}) == [2, 1]
        assert s.run([out, idx], {p: False, q: False}) == [2, 2]


def test_merge_with_both_inputs_live_forwards_one_of_them():
    a, b = kf.constant(1), kf.constant(2)
    out, idx = cf.merge([a, b])
    v, i = _run([out, idx])
    assert (v, i) in ((1, 0), (2, 1))


def test_all_dead_merge_gives_a_dead_output():
    p = kf.placeholder(kf.bool, [])
    _, t1 = cf.switch(kf.constant(1.0), p)
    _, t2 = cf.switch(kf.constant(2.0), p)
    out, idx = cf.merge([t1, t2])
    downstream = out + 1.0
    v = kf.Variable(0)
    with kf.control_dependencies([downstream]):
        bump = kf.assign_add(v, 1)
    with kf.Session() as s:
        s.run(v.initializer)
        assert s.run(downstream, {p: True}) == 2.0
        with pytest.raises(errors.InvalidArgumentError):
            s.run(out, {p: False})
        with pytest.raises(errors.InvalidArgumentError):
            s.run(idx, {p: False})
        with pytest.raises(errors.InvalidArgumentError):
            s.run(downstream, {p: False})
        s.run(bump, {p: True})
        assert s.run(v) == 1
        s.run(bump.op, {p: False})          # a dead control input: the assign does not run
        assert s.run(v) == 1


def test_dead_value_propagates_through_a_chain():
    p = kf.placeholder(kf.bool, [])
    _, t = cf.switch(kf.constant(3.0), p)
    y = kf.square(kf.exp(t) * 2.0) + kf.constant(1.0)
    out, _ = cf.merge([y, kf.constant(-1.0) + kf.zeros([])])
    assert _run(out, {p: False}) == -1.0


def test_op_with_dead_control_input_does_not_run_but_control_trigger_does():
    p = kf.placeholder(kf.bool, [])
    _, t = cf.switch(kf.constant(0), p)
    v = kf.Variable(0)
    w = kf.Variable(0)
    dead_op = kf.identity(t).op      # (a control edge from the Switch itself is live, as in TF)
    with kf.control_dependencies([dead_op]):
        plain = kf.no_op()
    trigger = cf.control_trigger()
    trigger._add_control_input(dead_op)
    with kf.control_dependencies([plain]):
        bump_v = kf.assign_add(v, 1)
    with kf.control_dependencies([trigger]):
        bump_w = kf.assign_add(w, 1)
    with kf.Session() as s:
        s.run([v.initializer, w.initializer])
        s.run([bump_v.op, bump_w.op], {p: False})
        assert s.run([v, w]) == [0, 1]
        s.run([bump_v.op, bump_w.op], {p: True})
        assert s.run([v, w]) == [1, 2]


def test_switch_with_non_scalar_predicate_at_run_time():
    p = kf.placeholder(kf.bool)
    f, t = cf.switch(kf.constant(1), p)
    out, _ = cf.merge([f, t])
    assert _run(out, {p: True}) == 1
    with pytest.raises(errors.InvalidArgumentError, match="scalar"):
        _run(out, {p: [True, False]})


def test_switch_static_predicate_shape_checked():
    with pytest.raises(ValueError, match="scalar"):
        cf.switch(kf.constant(1), kf.constant([True, False]))


def test_ref_switch_on_a_variable():
    v = kf.Variable(4.0)
    p = kf.placeholder(kf.bool, [])
    f, t = cf.switch(v._ref() if hasattr(v, "_ref") else v, p)
    out, _ = cf.merge([f * 2.0, t * 3.0])
    with kf.Session() as s:
        s.run(v.initializer)
        assert s.run(out, {p: True}) == 12.0
        assert s.run(out, {p: False}) == 8.0


def test_exit_without_enter_is_rejected():
    x = kf.constant(1)
    e = cf.exit(x)
    with pytest.raises(errors.InvalidArgumentError, match="Exit"):
        _run(e)


# ---------------------------------------------------------------------------- two devices
def test_dead_tensor_crosses_devices():
    with kf.device("/cpu:0"):
        p = kf.placeholder(kf.bool, [])
        x = kf.constant(2.0)
        f, t = cf.switch(x, p)
    with kf.device("/cpu:1"):
        tf_ = t * 10.0          # dead when p is false: the deadness travels by Send/Recv
        ff = f - 1.0
        out, idx = cf.merge([ff, tf_])
    with kf.Session(config=TWO_CPUS) as s:
        assert s.run([out, idx], {p: True}) == [20.0, 1]
        assert s.run([out, idx], {p: False}) == [1.0, 0]
        with pytest.raises(errors.InvalidArgumentError):
            s.run(tf_, {p: False})


def test_all_dead_merge_on_the_other_device():
    with kf.device("/cpu:0"):
        p = kf.placeholder(kf.bool, [])
        _, t = cf.switch(kf.constant(1.0), p)
    with kf.device("/cpu:1"):
        out, _ = cf.merge([t * 2.0, t * 3.0])
    with kf.device("/cpu:0"):
        final, _ = cf.merge([out + 0.0, cf.switch(kf.constant(-5.0), p)[0]])
    with kf.Session(config=TWO_CPUS) as s:
        assert s.run(final, {p: True}) in (2.0, 3.0)
        assert s.run(final, {p: False}) == -5.0


def test_cond_side_effects_on_the_other_device():
    with kf.device("/cpu:0"):
        p = kf.placeholder(kf.bool, [])
        x = kf.constant(1)
    with kf.device("/cpu:1"):
        v = kf.Variable(0)

    def t():
        with kf.device("/cpu:1"):
            with kf.control_dependencies([kf.assign_add(v, 1)]):
                return x + 1

    def f():
        with kf.device("/cpu:1"):
            return x - 1
    out = kf.cond(p, t, f)
    with kf.Session(config=TWO_CPUS) as s:
        s.run(v.initializer)
        assert s.run(out, {p: False}) == 0
        assert s.run(v) == 0
        assert s.run(out, {p: True}) == 2
        assert s.run(v) == 1


def test_control_trigger_with_dead_input_from_the_other_device():
    with kf.device("/cpu:0"):
        p = kf.placeholder(kf.bool, [])
        _, t = cf.switch(kf.constant(0), p)
        dead_op = (t + 1).op
    with kf.device("/cpu:1"):
        w = kf.Variable(0)
        trigger = cf.control_trigger()
        trigger._add_control_input(dead_op)
        with kf.control_dependencies([trigger]):
            bump = kf.assign_add(w, 1)
    with kf.Session(config=TWO_CPUS) as s:
        s.run(w.initializer)
        s.run(bump.op, {p: False})
        s.run(bump.op, {p: True})
        assert s.run(w) == 2


def test_while_loop_body_on_the_other_device():
    with kf.device("/cpu:0"):
        n = kf.placeholder(kf.int32, [])
        x0 = kf.constant(1.0)

    def body(i, x):
        with kf.device("/cpu:1"):
            x = kf.cond(kf.equal(kf.mod(i, 3), 0), lambda: x * 2.0, lambda: x + 1.0)
        return i + 1, x
    _, x = kf.while_loop(lambda i, x: i < n, body, [kf.constant(0), x0])
    with kf.Session(config=TWO_CPUS) as s:
        for nv in (0, 1, 7):
            ref = 1.0
            for i in range(nv):
                ref = ref * 2.0 if i % 3 == 0 else ref + 1.0
            assert s.run(x, {n: nv}) == ref


# ---------------------------------------------------------------------------- tracing
def test_full_trace_on_a_step_with_a_loop():
    n = kf.placeholder(kf.int32, [])
    out = kf.while_loop(lambda i, a: i < n, lambda i, a: (i + 1, kf.add(a, 2.0, name="acc_add")),
                        [kf.constant(0), kf.constant(0.0)], name="traced")
    md = kf.RunMetadata()
    with kf.Session() as s:
        got = s.run(out, {n: 5}, options=kf.RunOptions(trace_level=kf.RunOptions.FULL_TRACE),
                    run_metadata=md)
    assert tuple(got) == (5, 10.0)
    assert len(md.step_stats.dev_stats) >= 1
    names = [ns.node_name for d in md.step_stats.dev_stats for ns in d.node_stats]
    # five live runs, plus (as TF records dead nodes too) possibly the dead last one
    assert names.count("traced/acc_add") in (5, 6)
    assert any(nm.startswith("traced/Merge") for nm in names)
    assert "traced/Exit" in names


def test_full_trace_on_a_loop_over_two_devices():
    with kf.device("/cpu:0"):
        n = kf.placeholder(kf.int32, [])

    def body(i, a):
        with kf.device("/cpu:1"):
            a = kf.add(a, 1.0, name="far_add")
        return i + 1, a
    out = kf.while_loop(lambda i, a: i < n, body, [kf.constant(0), kf.constant(0.0)], name="w2")
    md = kf.RunMetadata()
    with kf.Session(config=TWO_CPUS) as s:
        got = s.run(out, {n: 4}, options=kf.RunOptions(trace_level=kf.RunOptions.FULL_TRACE),
                    run_metadata=md)
    assert tuple(got) == (4, 4.0)
    devices = {d.device for d in md.step_stats.dev_stats if len(d.node_stats)}
    assert len(devices) == 2
    names = [ns.node_name for d in md.step_stats.dev_stats for ns in d.node_stats]
    assert names.count("w2/far_add") in (4, 5)


# ---------------------------------------------------------------------------- concurrency
def test_concurrent_steps_with_a_loop_from_many_threads():
    n = kf.placeholder(kf.int32, [])
    x = kf.placeholder(kf.float32, [])

    def body(i, acc):
        acc = kf.cond(kf.equal(kf.mod(i, 2), 0), lambda: acc + x, lambda: acc * 1.0)
        return i + 1, acc
    i_out, acc_out = kf.while_loop(lambda i, a: i < n, body, [kf.constant(0), kf.constant(0.0)],
                                   parallel_iterations=4)
    failures = []
    with kf.Session() as s:
        s.run([i_out, acc_out], {n: 1, x: 1.0})

        def worker(k):
            try:
                for r in range(20):
                    nv = (k * 7 + r) % 23
                    got = s.run([i_out, acc_out], {n: nv, x: float(k)})
                    want = [nv, float(k) * ((nv + 1) // 2)]
                    if got != want:
                        failures.append((k, r, got, want))
            except Exception as e:  # noqa: BLE001
                failures.append((k, repr(e)))
        threads = [threading.Thread(target=worker, args=(k,)) for k in range(10)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads)
    assert not failures, failures[:5]


def test_concurrent_steps_with_a_stateful_loop():
    v = kf.Variable(0)

    def body(i):
        with kf.control_dependencies([kf.assign_add(v, 1, use_locking=True)]):
            return i + 1
    out = kf.while_loop(lambda i: i < 5, body, [kf.constant(0)])
    with kf.Session() as s:
        s.run(v.initializer)
        threads = [threading.Thread(target=lambda: [s.run(out) for _ in range(10)]) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert s.run(v) == 4 * 10 * 5


# ---------------------------------------------------------------------------- errors and cancellation
def test_error_in_loop_on_the_other_device_ends_the_step():
    with kf.device("/cpu:0"):
        params = kf.constant([1.0, 2.0, 3.0])

    def body(i, a):
        with kf.device("/cpu:1"):
            a = a + kf.gather(params, i, name="far_gather")
        return i + 1, a
    out = kf.while_loop(lambda i, a: i < 10, body, [kf.constant(0), kf.constant(0.0)])
    with kf.Session(config=TWO_CPUS) as s:
        with pytest.raises(errors.InvalidArgumentError, match="far_gather"):
            s.run(out)


def test_closing_the_session_stops_a_running_loop():
    out = _run_script("""
        import threading, time
        out = kf.while_loop(lambda i: i >= 0, lambda i: i + 1, [kf.constant(0)])   # endless
        s = kf.Session()
        res = {}
        def go():
            try:
                res["v"] = s.run(out)
            except Exception as e:
                res["e"] = e
        t = threading.Thread(target=go, daemon=True)
        t.start()
        time.sleep(0.3)
        s.close()
        t.join(2)
        print("alive" if t.is_alive() else type(res.get("e")).__name__)
    """, timeout=20)
    assert out == "CancelledError"


def test_timeout_stops_an_endless_loop():
    out = _run_script("""
        import threading
        out = kf.while_loop(lambda i: i >= 0, lambda i: i + 1, [kf.constant(0)])
        s = kf.Session()
        res = {}
        def go():
            try:
                res["v"] = s.run(out, options=kf.RunOptions(timeout_in_ms=300))
            except Exception as e:
                res["e"] = e
        t = threading.Thread(target=go, daemon=True)
        t.start()
        t.join(2)
        print("alive" if t.is_alive() else type(res.get("e")).__name__)
    """, timeout=20)
    assert out == "DeadlineExceededError"


def test_closing_the_session_stops_a_loop_split_over_devices():
    # Across devices the loop's Send/Recv see the aborted rendezvous.
    out = _run_script("""
        import threading, time
        with kf.device("/cpu:0"):
            i0 = kf.constant(0)
        def body(i):
            with kf.device("/cpu:1"):
                return i + 1
        out = kf.while_loop(lambda i: i >= 0, body, [i0])
        s = kf.Session(config=kf.ConfigProto(device_count={"CPU": 2}))
        res = {}
        def go():
            try:
                res["v"] = s.run(out)
            except Exception as e:
                res["e"] = e
        t = threading.Thread(target=go, daemon=True)
        t.start()
        time.sleep(0.3)
        s.close()
        t.join(2)
        print("alive" if t.is_alive() else type(res.get("e")).__name__)
    """, timeout=20)
    assert out == "CancelledError"


# ---------------------------------------------------------------------------- Assert
def test_assert_passes_and_fails_with_its_data():
    x = kf.placeholder(kf.int32, [None])
    check = kf.Assert(kf.reduce_all(x > 0), ["x must be positive:", x], summarize=2, name="pos")
    with kf.control_dependencies([check]):
        y = kf.identity(x)
    with kf.Session() as s:
        np.testing.assert_array_equal(s.run(y, {x: [1, 2]}), [1, 2])
        with pytest.raises(errors.InvalidArgumentError, match=r"assertion failed.*x must be positive"):
            s.run(y, {x: [1, -2, 3, 4]})


def test_assert_with_non_scalar_condition_fails_at_run_time():
    with pytest.raises(errors.InvalidArgumentError):
        _run(kf.Assert(kf.placeholder_with_default([True, False], [2]), ["x"]))


def test_assert_message_format():
    x = kf.placeholder(kf.int32, [None])
    check = kf.Assert(kf.constant(False), ["x:", x], summarize=2)
    with pytest.raises(errors.InvalidArgumentError, match=r"assertion failed: \[x:\] \[1 -2\.\.\.\]"):
        _run(check, {x: [1, -2, 3]})


def test_assert_in_untaken_branch_does_not_fire():
    p = kf.placeholder(kf.bool, [])

    def checked():
        with kf.control_dependencies([kf.Assert(kf.constant(False), ["never"])]):
            return kf.constant(1)
    out = kf.cond(p, checked, lambda: kf.constant(2))
    assert _run(out, {p: False}) == 2
    with pytest.raises(errors.InvalidArgumentError, match="never"):
        _run(out, {p: True})
