"""Step capture and replay (kernflow/core/runtime/replay.py), on a fake device that "captures" a step
by keeping the function and "replays" it by running it again: the warm-up / capture / replay /
fallback logic, the checks before each replay, and which plans qualify. The CUDA-graph side is
tested on a GPU in packages/kernels-gpu/tests/test_step_graphs_gpu.py."""

import types

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.runtime import replay
from kernflow.kernels.cpu.device import CPUDevice


class _FakeGraph:
    def __init__(self, device, run, args):
        self.device = device
        self.run = run
        self.inputs = [np.empty_like(np.asarray(a)) for a in args]

    def replay(self, args):
        for buf, a in zip(self.inputs, args):
            buf[...] = a
        self.device.replays += 1
        return self.run(self.inputs)


class FakeAccelerator(CPUDevice):
    """A CPU that pretends to have its own memory and to record steps."""

    has_device_memory = True
    can_capture_steps = True

    def __init__(self, name, fail=0):
        super().__init__(name, "CPU")
        self.captures = 0
        self.replays = 0
        self.fail = fail   # captures that raise before one succeeds

    def capture_step(self, run, args):
        if self.fail:
            self.fail -= 1
            raise RuntimeError("the recording broke")
        self.captures += 1
        return _FakeGraph(self, run, args)


@pytest.fixture(autouse=True)
def _launch_bound_steps(monkeypatch):
    """Whether a step is launch-bound is timed in its warm-up: a loaded machine (another xdist
    worker) must not make these tiny steps "device-bound". The test of that rule sets its own."""
    monkeypatch.setattr(replay, "LAUNCH_BOUND_S_PER_KERNEL", 1.0)


def _session(graph, fail=0):
    """A session whose CPU:0 is a FakeAccelerator (the graphs here are pinned to /cpu:0, so a real
    GPU, where there is one, takes no part)."""
    sess = kf.Session(graph=graph)
    impl = sess._impl
    i, real = next((i, d) for i, d in enumerate(impl.devices) if d.name.endswith("CPU:0"))
    fake = FakeAccelerator(real.name, fail)
    fake.resource_mgr = real.resource_mgr
    impl.devices[i] = fake
    impl._by_name[real.name] = fake
    return sess, fake


def _linear_model():
    g = kf.Graph()
    with g.as_default(), kf.device("/cpu:0"):
        x = kf.placeholder(kf.float32, [None, 3], name="x")
        w = kf.Variable(np.ones((3, 2), np.float32), name="w")
        loss = kf.reduce_sum(kf.matmul(x, w))
        train = kf.train.GradientDescentOptimizer(0.1).minimize(loss)
    return g, x, w, loss, train


def _runner(sess, fetches, feeds):
    impl = sess._impl
    key = (tuple(t.name for t in feeds), tuple(t.name for t in fetches), ())
    return impl._steps[key].replay


def test_warm_up_then_capture_then_replay_matches_eager():
    g, x, w, loss, _ = _linear_model()
    sess, dev = _session(g)
    sess.run(w.initializer)
    xv = np.arange(6, dtype=np.float32).reshape(2, 3)
    outs = [sess.run(loss, {x: xv}) for _ in range(5)]
    assert outs == [15.0 * 2] * 5
    r = _runner(sess, [loss], [x])
    assert dev.captures == 1 and dev.replays == 3
    assert list(r.status.values()) == ["captured"]


def test_training_updates_through_replays_match_the_eager_run():
    g, x, w, loss, train = _linear_model()
    xv = np.random.RandomState(0).rand(4, 3).astype(np.float32)
    sess, dev = _session(g)
    sess.run(w.initializer)
    step = sess.make_callable([train, loss], feed_list=[x])
    got = [step(xv)[1] for _ in range(6)]
    with kf.Session(graph=g) as ref:
        ref.run(w.initializer)
        want = [ref.run([train, loss], {x: xv})[1] for _ in range(6)]
        np.testing.assert_allclose(sess.run(w), ref.run(w), rtol=1e-6)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert dev.captures == 1


def test_each_feed_signature_is_captured_separately():
    g, x, w, loss, _ = _linear_model()
    sess, dev = _session(g)
    sess.run(w.initializer)
    for batch in (2, 5, 2, 5, 2, 5, 2, 5):
        assert sess.run(loss, {x: np.ones((batch, 3), np.float32)}) == 3.0 * 2 * batch
    r = _runner(sess, [loss], [x])
    assert dev.captures == 2 and set(r.status.values()) == {"captured"}


def test_a_replaced_variable_buffer_makes_the_step_capture_again():
    g, x, w, loss, _ = _linear_model()
    sess, dev = _session(g)
    sess.run(w.initializer)
    xv = np.ones((1, 3), np.float32)
    for _ in range(4):
        sess.run(loss, {x: xv})
    assert dev.captures == 1
    var = _runner(sess, [loss], [x])._captures[((((1, 3)), "<f4"),)].variables[0][1]
    var.assign(np.full((3, 2), 2.0, np.float32))   # another buffer, as a restore may leave
    assert sess.run(loss, {x: xv}) == 12.0           # eager again (warming up), right value
    for _ in range(3):
        assert sess.run(loss, {x: xv}) == 12.0
    assert dev.captures == 2


def test_failed_captures_fall_back_to_eager_and_stop_trying():
    g, x, w, loss, _ = _linear_model()
    sess, dev = _session(g, fail=10)
    sess.run(w.initializer)
    for _ in range(12):
        assert sess.run(loss, {x: np.ones((1, 3), np.float32)}) == 6.0
    r = _runner(sess, [loss], [x])
    assert list(r.status.values()) == ["eager"]
    assert "recording broke" in next(iter(r.reasons.values()))
    assert dev.fail == 10 - replay.MAX_CAPTURE_ATTEMPTS


def test_a_step_that_fails_eagerly_raises_and_does_not_use_up_capture_attempts():
    g = kf.Graph()
    with g.as_default(), kf.device("/cpu:0"):
        x = kf.placeholder(kf.float32, [None], name="x")
        v = kf.Variable(np.ones(2, np.float32), name="v")
        y = kf.reduce_sum(x * v)
    sess, dev = _session(g, fail=0)
    with pytest.raises(kf.errors.FailedPreconditionError):
        sess.run(y, {x: np.ones(2, np.float32)})
    sess.run(v.initializer)
    for _ in range(4):
        assert sess.run(y, {x: np.ones(2, np.float32)}) == 2.0
    assert dev.captures == 1


def test_steps_of_the_device_that_are_device_bound_stay_eager(monkeypatch):
    monkeypatch.setattr(replay, "LAUNCH_BOUND_S_PER_KERNEL", 0.0)
    g, x, w, loss, _ = _linear_model()
    sess, dev = _session(g)
    sess.run(w.initializer)
    for _ in range(5):
        sess.run(loss, {x: np.ones((1, 3), np.float32)})
    r = _runner(sess, [loss], [x])
    assert dev.captures == 0 and list(r.status.values()) == ["eager"]
    assert "device-bound" in next(iter(r.reasons.values()))


def test_env_var_turns_capture_off(monkeypatch):
    monkeypatch.setenv("KERNFLOW_STEP_GRAPHS", "0")
    g, x, w, loss, _ = _linear_model()
    sess, dev = _session(g)
    sess.run(w.initializer)
    for _ in range(5):
        sess.run(loss, {x: np.ones((1, 3), np.float32)})
    assert dev.captures == 0


def test_random_and_queue_steps_are_not_captured():
    g = kf.Graph()
    with g.as_default(), kf.device("/cpu:0"):
        r = kf.reduce_sum(kf.random_normal([3], seed=1))
    sess, dev = _session(g)
    vals = {float(sess.run(r)) for _ in range(5)}
    assert dev.captures == 0 and len(vals) == 5


# ------------------------------------------------------------------ replay_blockers on plans
def _node(name, op, inputs=(), outs=1, host=(), shape=(), base=0, **kw):
    return types.SimpleNamespace(name=name, op_type=op, inputs=list(inputs), num_outputs=outs,
                                 host_inputs=tuple(host), shape_inputs=tuple(shape), out_base=base,
                                 is_async=kw.get("is_async", False), needs_ctx=kw.get("ctx", False))


def _plan(nodes, consts=(), args=(), nslots=20):
    init = [None] * nslots
    for s in consts:
        init[s] = 1
    return types.SimpleNamespace(inline_executor="straight_line", nodes=nodes, _init_vals=init,
                                 arg_slots=list(args))


def test_blockers_accept_host_values_computed_from_constants_and_shapes():
    nodes = [_node("size", "Size", [0], host=(), shape=(0,), base=5),       # slot 0 is a feed
             _node("cast", "Cast", [5], host=(0,), base=6),
             _node("div", "RealDiv", [1, 6], base=7),                       # slot 1 a constant
             _node("gd", "ApplyGradientDescent", [8, 1, 7], host=(1,), outs=1, base=9)]
    assert replay.replay_blockers(_plan(nodes, consts=[1], args=[0])) == []


def test_blockers_name_host_values_from_feeds_variables_and_state():
    nodes = [_node("reshape", "Reshape", [0, 1], host=(1,), base=5),       # shape fed on the host
             _node("v", "VariableV2", [], base=6),
             _node("gd", "ApplyGradientDescent", [6, 6, 5], host=(1,), base=7),  # lr read from a variable
             _node("rnd", "RandomStandardNormal", [2], host=(0,), base=8),
             _node("deq", "QueueDequeueV2", [3], base=9, is_async=True)]
    why = replay.replay_blockers(_plan(nodes, consts=[2], args=[0, 1]))
    assert any("reshape" in w and "feed in host memory" in w for w in why)
    assert any("gd" in w and "may change" in w for w in why)
    assert any("rnd" in w and "state" in w for w in why)
    assert any("deq" in w and "step context" in w for w in why)


def test_blockers_refuse_plans_that_are_not_straight_lines():
    p = _plan([])
    p.inline_executor = "dataflow"
    assert replay.replay_blockers(p)
    p.inline_executor = None
    assert replay.replay_blockers(p)
