"""Session tensors: get_session_handle / get_session_tensor / delete_session_tensor and TensorHandle."""

from __future__ import annotations

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors
from kernflow.core.ops.session_ops import TensorHandle
from kernflow.core.testing.processes import have_distributed

needs_dist = pytest.mark.skipif(not have_distributed(), reason="kernflow-client/master/worker not installed")


def _kept(sess) -> int:
    return len(sess._impl.session_tensors)


def test_tf1_docs_example_keeps_a_tensor_across_runs():
    a = kf.constant(10)
    b = kf.constant(5)
    c = kf.multiply(a, b)
    h = kf.get_session_handle(c)
    with kf.Session() as sess:
        h = sess.run(h)
        assert isinstance(h, TensorHandle)
        p, a2 = kf.get_session_tensor(h.handle, kf.int32)
        b2 = kf.multiply(a2, 10)
        assert sess.run(b2, feed_dict={p: h.handle}) == 500
        assert sess.run(b2, feed_dict={p: h}) == 500        # the TensorHandle itself
        assert sess.run(b2, feed_dict={p: h.handle.encode()}) == 500


def test_handle_string_eval_and_dtype():
    with kf.Graph().as_default(), kf.Session() as sess:
        h = sess.run(kf.get_session_handle(kf.constant([1.5, 2.5]), name="keep"))
        op_name, id_, device = h.handle.split(";")
        assert op_name == "keep" and id_.isdigit() and device.endswith("/device:CPU:0")
        assert str(h) == h.handle == h.get_raw_handle()
        out = h.eval()
        assert out.dtype == np.float32
        np.testing.assert_array_equal(out, [1.5, 2.5])
        h.eval()   # the reader ops are made once per graph
        assert len([op for op in sess.graph.get_operations() if op.type == "GetSessionTensor"]) == 1


def test_each_run_keeps_a_new_tensor():
    x = kf.placeholder(kf.float32, [])
    h = kf.get_session_handle(x * 2.0)
    with kf.Session() as sess:
        h1, h2 = sess.run(h, {x: 1.0}), sess.run(h, {x: 5.0})
        assert h1.handle != h2.handle
        assert (h1.eval(), h2.eval()) == (2.0, 10.0)
        assert _kept(sess) == 2


def test_delete_then_use_raises_invalid_argument():
    with kf.Session() as sess:
        h = sess.run(kf.get_session_handle(kf.constant(3)))
        p, t = kf.get_session_tensor(h.handle, kf.int32)
        h.delete()
        assert _kept(sess) == 0
        with pytest.raises(errors.InvalidArgumentError, match="is not in the session store"):
            sess.run(t, feed_dict={p: h.handle})
        with pytest.raises(errors.InvalidArgumentError, match="GetSessionTensor.*not in the session store"):
            h.eval()
        dp, deleter = kf.delete_session_tensor(h.handle)
        with pytest.raises(errors.InvalidArgumentError, match="DeleteSessionTensor.*not in the session store"):
            sess.run(deleter, feed_dict={dp: h.handle})


def test_delete_session_tensor_op():
    with kf.Session() as sess:
        h = sess.run(kf.get_session_handle(kf.constant("kept")))
        assert h.eval() == b"kept"
        dp, deleter = kf.delete_session_tensor(h)
        assert deleter.type == "DeleteSessionTensor"
        sess.run(deleter, feed_dict={dp: h})
        assert _kept(sess) == 0


def test_handles_of_two_sessions_are_independent():
    x = kf.placeholder(kf.int32, [])
    h = kf.get_session_handle(x + 0)
    with kf.Session() as s1, kf.Session() as s2:
        h1, h2 = s1.run(h, {x: 1}), s2.run(h, {x: 2})
        assert (h1.eval(), h2.eval()) == (1, 2)
        p, t = kf.get_session_tensor(h1.handle, kf.int32)
        assert s1.run(t, {p: h1.handle}) == 1
        with pytest.raises(errors.InvalidArgumentError, match="not in the session store"):
            s2.run(t, {p: h1.handle})
        h2.delete()
        assert h1.eval() == 1 and _kept(s1) == 1


def test_closing_the_session_frees_its_tensors():
    h = kf.get_session_handle(kf.constant(7))
    sess = kf.Session()
    kept = sess._impl.session_tensors
    handle = sess.run(h)
    assert len(kept) == 1
    sess.close()
    assert len(kept) == 0
    with pytest.raises(RuntimeError, match="closed Session"):
        handle.eval()
    with kf.Session() as other:   # a new session knows nothing of it
        p, t = kf.get_session_tensor(handle.handle, kf.int32)
        with pytest.raises(errors.InvalidArgumentError, match="not in the session store"):
            other.run(t, {p: handle.handle})


def test_only_fetched_handles_of_successful_steps_are_kept():
    x = kf.placeholder(kf.float32, [None])
    h = kf.get_session_handle(x)
    check = kf.debugging.assert_positive(x)
    with kf.Session() as sess:
        sess.run(h.op, {x: [1.0]})                      # run as a target: the handle is not fetched
        assert _kept(sess) == 0
        with pytest.raises(errors.InvalidArgumentError):
            sess.run([h, check], {x: [-1.0]})           # the step fails: nothing is kept
        assert _kept(sess) == 0 and not sess._impl.session_tensors.staged
        out = sess.run({"h": h, "n": kf.size(x)}, {x: [1.0, 2.0]})
        assert isinstance(out["h"], TensorHandle) and out["n"] == 2
        np.testing.assert_array_equal(out["h"].eval(), [1.0, 2.0])


def test_make_callable_returns_handles():
    h = kf.get_session_handle(kf.constant(4.0) * 2.0)
    with kf.Session() as sess:
        fn = sess.make_callable([h])
        (handle,) = fn()
        assert isinstance(handle, TensorHandle) and handle.eval() == 8.0
        assert _kept(sess) == 1


def test_kept_value_is_a_snapshot_of_a_variable():
    v = kf.Variable(1.0)
    h = kf.get_session_handle(v.value())
    with kf.Session() as sess:
        sess.run(v.initializer)
        handle = sess.run(h)
        sess.run(v.assign(5.0))
        assert handle.eval() == 1.0


def test_feeding_a_handle_for_another_tensor_feeds_its_value():
    with kf.Session() as sess:
        h = sess.run(kf.get_session_handle(kf.constant([3, 4])))
        x = kf.placeholder(kf.int32, [2])
        np.testing.assert_array_equal(sess.run(x * 2, {x: h}), [6, 8])
        s = kf.placeholder(kf.int32, [])
        with pytest.raises(ValueError, match=r"Cannot feed value of shape \(2,\)"):
            sess.run(s + 1, {s: h})


def test_reading_with_the_wrong_dtype():
    with kf.Session() as sess:
        h = sess.run(kf.get_session_handle(kf.constant(1)))
        p, t = kf.get_session_tensor(h.handle, kf.float32)
        with pytest.raises(errors.InvalidArgumentError, match="is int32, but the op reads float32"):
            sess.run(t, {p: h})


def test_bad_arguments():
    with pytest.raises(TypeError, match="get_session_handle: `data` must be of type Tensor, got int"):
        kf.get_session_handle(5)
    with pytest.raises(TypeError, match="GetSessionTensor: a session tensor handle must be a string, got int"):
        kf.get_session_tensor(12, kf.int32)
    with pytest.raises(ValueError, match="DeleteSessionTensor: expected a handle '<op name>;<id>;<device>'"):
        kf.delete_session_tensor("no-fields")
    with kf.Session() as sess:
        h = sess.run(kf.get_session_handle(kf.constant(1)))
        p, t = kf.get_session_tensor(h.handle, kf.int32)
        with pytest.raises(errors.InvalidArgumentError, match="not in the session store"):
            sess.run(t, {p: "x;1;" + h.handle.split(";")[2]})
        with pytest.raises(ValueError, match="shape"):
            sess.run(t, {p: [h.handle, h.handle]})


def test_ops_are_stateful_and_not_differentiable():
    x = kf.constant(2.0)
    h = kf.get_session_handle(x)
    p, t = kf.get_session_tensor("n;0;/device:CPU:0", kf.float32)
    assert h.op.op_def.stateful and t.op.op_def.stateful
    assert h.dtype == kf.string and h.shape.as_list() == []
    assert t.shape.ndims is None and p.dtype == kf.string
    assert kf.gradients(t * x, [x, t])[0] is not None
    assert kf.gradients(t * x, p) == [None]   # nothing flows back through a kept tensor
    from kernflow.core.framework.gradient_registry import gradient_status
    assert {gradient_status(o) for o in ("GetSessionHandle", "GetSessionTensor",
                                         "DeleteSessionTensor")} == {"not_differentiable"}


def test_garbage_collected_handles_are_deleted_in_a_batch():
    x = kf.placeholder(kf.int32, [])
    h = kf.get_session_handle(x + 1)
    one = kf.constant(1)
    with kf.Session() as sess:
        handles = [sess.run(h, {x: i}) for i in range(10)]
        keep = sess.run(h, {x: 100})
        assert _kept(sess) == 11
        del handles[:9]
        sess.run(one)
        assert _kept(sess) == 11     # fewer than ten collected: kept for now (TF's batching)
        del handles[:]
        sess.run(one)
        assert _kept(sess) == 1 and keep.eval() == 101


@needs_dist
def test_remote_sessions_raise_unimplemented_naming_the_op():
    server = kf.train.Server.create_local_server()
    g = kf.Graph()
    with g.as_default():
        h = kf.get_session_handle(kf.constant(3.0), name="kept_remotely")
    try:
        with kf.Session(server.target, graph=g) as sess:
            with pytest.raises(errors.UnimplementedError, match="GetSessionHandle 'kept_remotely'.*embedded"):
                sess.run(h)
    finally:
        server.stop()
