"""`kf.ConditionalAccumulator` and `kf.SparseConditionalAccumulator`: TF1 semantics, blocking takes,
cancellation, errors and sharing."""

import threading
import time

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.testing.processes import have_distributed
from kernflow.core.framework import errors
from kernflow.core.framework.op_def_library import apply_op


def _dense(shape=(2,), dtype=kf.float32, **kw):
    """An accumulator with fed apply (grad, step), take (n) and count ops; `grad` has no static
    shape, so the kernel checks it."""
    acc = kf.ConditionalAccumulator(dtype, shape=list(shape) if shape is not None else None, **kw)
    g = kf.placeholder(dtype)
    step = kf.placeholder(kf.int64, [])
    n = kf.placeholder(kf.int32, [])
    return acc, acc.apply_grad(g, local_step=step), g, step, acc.take_grad(n), n, acc.num_accumulated()


def test_python_api_names_shapes_and_ops():
    g = kf.Graph()
    with g.as_default():
        acc = kf.ConditionalAccumulator(kf.float32, shape=[2, 3], name="acc")
        assert isinstance(acc, kf.ConditionalAccumulatorBase)
        assert acc.name == "acc" and acc.dtype == kf.float32
        assert acc.accumulator_ref.op.type == "ConditionalAccumulator"
        assert acc.accumulator_ref.dtype == kf.resource
        op = g.get_operation_by_name("acc")
        assert op.get_attr("reduction_type") == "MEAN" and op.get_attr("shared_name") == ""
        apply = acc.apply_grad(np.ones([2, 3], np.float32), local_step=3)
        assert apply.type == "AccumulatorApplyGradient"
        assert apply.inputs[1].dtype == kf.int64
        take = acc.take_grad(2)
        assert take.shape.as_list() == [2, 3] and take.dtype == kf.float32
        count = acc.num_accumulated()
        assert count.dtype == kf.int32 and count.op.name == "acc_NumAccumulated"
        setter = acc.set_global_step(kf.constant(4))
        assert setter.type == "AccumulatorSetGlobalStep" and setter.inputs[1].dtype == kf.int64
        for o in (apply, take.op, count.op, setter):   # every op of the accumulator sits with it
            assert o.colocation_groups() in ([b"loc:@acc"], ["loc:@acc"])
        with pytest.raises(ValueError, match="incompatible"):
            acc.apply_grad(np.ones([3, 2], np.float32))
        with pytest.raises((TypeError, ValueError)):
            acc.apply_grad(kf.constant([1, 2, 3], kf.int32))
        with pytest.raises(ValueError, match="reduction_type"):
            kf.ConditionalAccumulator(kf.float32, reduction_type="MAX")
        sparse = kf.SparseConditionalAccumulator(kf.float64, shape=[10, 4], name="sp")
        assert sparse.accumulator_ref.op.type == "SparseConditionalAccumulator"
        idx, vals, shape = sparse.take_grad(1)
        assert vals.shape.as_list() == [None, 4] and shape.shape.as_list() == [2]
        assert idx.dtype == kf.int64 and vals.dtype == kf.float64
        slices = sparse.take_indexed_slices_grad(1)
        assert isinstance(slices, kf.IndexedSlices) and slices.values.shape.as_list() == [None, 4]
        assert sparse.apply_grad([1], [[1.0] * 4]).get_attr("has_known_shape") is False


def test_mean_of_three_gradients_and_num_accumulated():
    with kf.Graph().as_default():
        _, apply, g, step, take, n, count = _dense()
        with kf.Session() as sess:
            assert sess.run(count) == 0
            for v in ([1.0, 2.0], [3.0, 4.0], [5.0, 9.0]):
                sess.run(apply, {g: v, step: 0})
            assert sess.run(count) == 3
            np.testing.assert_allclose(sess.run(take, {n: 3}), [3.0, 5.0])
            assert sess.run(count) == 0


def test_sum_reduction_and_integer_mean():
    with kf.Graph().as_default():
        _, apply, g, step, take, n, _ = _dense(reduction_type="SUM")
        _, iapply, ig, istep, itake, inum, _ = _dense(dtype=kf.int32)
        with kf.Session() as sess:
            for v in ([1.0, 2.0], [3.0, 4.0]):
                sess.run(apply, {g: v, step: 0})
            np.testing.assert_allclose(sess.run(take, {n: 2}), [4.0, 6.0])
            for v in ([7, -7], [0, 0]):
                sess.run(iapply, {ig: v, istep: 0})
            out = sess.run(itake, {inum: 2})
            assert out.dtype == np.int32 and out.tolist() == [3, -3]   # truncated, as TF divides


def test_stale_gradients_are_dropped_after_take_and_set_global_step():
    with kf.Graph().as_default():
        acc, apply, g, step, take, n, count = _dense()
        new_step = kf.placeholder(kf.int64, [])
        set_step = acc.set_global_step(new_step)
        with kf.Session() as sess:
            sess.run(apply, {g: [1.0, 1.0], step: 0})
            sess.run(take, {n: 1})                     # the global step is now 1
            sess.run(apply, {g: [100.0, 100.0], step: 0})
            assert sess.run(count) == 0                # stale: dropped
            sess.run(apply, {g: [2.0, 4.0], step: 1})
            sess.run(apply, {g: [4.0, 8.0], step: 7})  # from the future: accepted
            np.testing.assert_allclose(sess.run(take, {n: 2}), [3.0, 6.0])
            sess.run(set_step, {new_step: 10})
            sess.run(apply, {g: [1.0, 1.0], step: 9})
            assert sess.run(count) == 0
            sess.run(set_step, {new_step: 3})          # lower: set all the same (TF logs a warning)
            sess.run(apply, {g: [1.0, 1.0], step: 3})
            assert sess.run(count) == 1


def test_num_dropped_counts_stale_gradients_of_dense_and_sparse_accumulators():
    with kf.Graph().as_default():
        acc, apply, g, step, take, n, _ = _dense(name="dense_acc")
        sp, sp_apply, i, v, sp_step, sp_take, sp_n = _sparse()
        dropped, sp_dropped = acc.num_dropped(), sp.num_dropped()
        assert dropped.dtype == kf.int64 and dropped.shape.as_list() == []
        assert dropped.op.type == "AccumulatorNumDropped" and dropped.op.name == "dense_acc_NumDropped"
        assert dropped.op.colocation_groups() in ([b"loc:@dense_acc"], ["loc:@dense_acc"])
        with kf.Session() as sess:
            assert sess.run([dropped, sp_dropped]) == [0, 0]
            sess.run(apply, {g: [1.0, 1.0], step: 0})
            sess.run(take, {n: 1})                                  # global step 1
            for _ in range(3):
                sess.run(apply, {g: [5.0, 5.0], step: 0})           # stale: dropped and counted
            sess.run(apply, {g: [5.0, 5.0], step: 1})               # fresh: not counted
            sess.run(sp_apply, {i: [1], v: [[1, 1]], sp_step: 0})
            sess.run(sp_take.values, {sp_n: 1})
            sess.run(sp_apply, {i: [99], v: [[1, 1]], sp_step: 0})  # stale (and out of range)
            assert sess.run([dropped, sp_dropped]) == [3, 1]
            sess.run(take, {n: 1})                                  # takes do not reset the count
            assert sess.run(dropped) == 3


def test_take_blocks_until_enough_gradients_arrive_from_another_thread(in_thread):
    with kf.Graph().as_default():
        _, apply, g, step, take, n, count = _dense()
        with kf.Session() as sess:
            sess.run(apply, {g: [1.0, 1.0], step: 0})
            t, box = in_thread(lambda: sess.run(take, {n: 3}))
            time.sleep(0.3)
            assert t.is_alive() and not box
            sess.run(apply, {g: [2.0, 2.0], step: 0})
            time.sleep(0.2)
            assert t.is_alive() and not box
            assert sess.run(count) == 2                # other steps still run
            applier = threading.Thread(target=lambda: sess.run(apply, {g: [6.0, 0.0], step: 0}))
            applier.start()
            applier.join(10)
            t.join(10)
            assert not applier.is_alive() and box and box[0][0] == "ok", box
            np.testing.assert_allclose(box[0][1], [3.0, 1.0])
            assert sess.run(count) == 0


def test_many_waiting_takes_hold_no_threads_and_each_gets_one_gradient(in_thread):
    config = kf.ConfigProto(inter_op_parallelism_threads=2)
    with kf.Graph().as_default():
        _, apply, g, step, take, n, _ = _dense(shape=())
        with kf.Session(config=config) as sess:
            before = threading.active_count()
            takers = [in_thread(lambda: sess.run(take, {n: 1})) for _ in range(20)]
            time.sleep(0.5)
            # Only the threads calling run() wait; no executor thread is held per blocked take.
            assert threading.active_count() <= before + 20 + 2
            for i in range(20):
                sess.run(apply, {g: float(i), step: i})   # each take bumps the global step
            for t, _ in takers:
                t.join(10)
            got = sorted(box[0][1] for _, box in takers)
            assert got == [float(i) for i in range(20)]


def test_closing_the_session_wakes_a_blocked_take_with_cancelled(in_thread):
    with kf.Graph().as_default():
        _, _, _, _, take, n, _ = _dense()
        sess = kf.Session()
        t, box = in_thread(lambda: sess.run(take, {n: 1}))
        time.sleep(0.3)
        assert t.is_alive()
        closed_at = time.monotonic()
        sess.close()
        t.join(5)
        assert box and box[0][0] == "err", box
        assert isinstance(box[0][1], errors.CancelledError), box
        assert box[0][2] - closed_at < 1.0


def test_run_timeout_on_a_blocked_take_and_the_accumulator_is_unchanged():
    with kf.Graph().as_default():
        _, apply, g, step, take, n, count = _dense()
        with kf.Session() as sess:
            sess.run(apply, {g: [2.0, 2.0], step: 0})
            t0 = time.monotonic()
            with pytest.raises(errors.DeadlineExceededError):
                sess.run(take, {n: 2}, options=kf.RunOptions(timeout_in_ms=200))
            assert time.monotonic() - t0 < 2.0
            assert sess.run(count) == 1
            sess.run(apply, {g: [4.0, 4.0], step: 0})   # the global step is still 0
            np.testing.assert_allclose(sess.run(take, {n: 2}), [3.0, 3.0])


def test_shape_and_dtype_errors_name_the_op_and_both_shapes():
    with kf.Graph().as_default():
        acc, apply, g, step, _, _, count = _dense(shape=(2,))
        _, lapply, lg, lstep, ltake, ln, lcount = _dense(shape=None)
        wrong = kf.placeholder(kf.float64, [2])
        bad_type = apply_op("AccumulatorApplyGradient",
                            [acc.accumulator_ref, kf.constant(0, kf.int64), wrong],
                            {"dtype": kf.float64}, name="bad_type")
        with kf.Session() as sess:
            with pytest.raises(errors.InvalidArgumentError,
                               match=r"Shape mismatch.*conditional_accumulator.*\[2\], got \[3\]") as e:
                sess.run(apply, {g: [1.0, 2.0, 3.0], step: 0})
            assert apply.name in str(e.value)
            with pytest.raises(errors.InvalidArgumentError, match=r"float64.*accumulates float32") as e:
                sess.run(bad_type, {wrong: [1.0, 2.0]})
            assert "bad_type" in str(e.value)
            # Without a declared shape, the first gradient fixes it until the next take.
            sess.run(lapply, {lg: [[1.0, 2.0]], lstep: 0})
            with pytest.raises(errors.InvalidArgumentError,
                               match=r"expects gradients of shape \[1,2\], got \[2\]"):
                sess.run(lapply, {lg: [1.0, 2.0], lstep: 0})
            assert sess.run([count, lcount]) == [0, 1]
            sess.run(ltake, {ln: 1})
            sess.run(lapply, {lg: [1.0, 2.0, 3.0], lstep: 1})
            np.testing.assert_allclose(sess.run(ltake, {ln: 1}), [1.0, 2.0, 3.0])
            # A stale gradient is dropped before it is looked at (TF).
            sess.run(lapply, {lg: [[[1.0]]], lstep: 0})


def test_num_required_below_one_is_an_error():
    with kf.Graph().as_default():
        _, _, _, _, take, n, _ = _dense()
        with kf.Session() as sess:
            for bad in (0, -3):
                with pytest.raises(errors.InvalidArgumentError,
                                   match=f"num_required must be positive, but was {bad}"):
                    sess.run(take, {n: bad})


def test_gradients_do_not_flow_through_accumulators():
    with kf.Graph().as_default():
        acc = kf.ConditionalAccumulator(kf.float32, shape=[2])
        x = kf.placeholder(kf.float32, [2])
        with kf.control_dependencies([acc.apply_grad(x * 2.0)]):
            y = acc.take_grad(1)
        assert kf.gradients(kf.reduce_sum(y), [x]) == [None]


# ---------------------------------------------------------------------------- sparse
def _sparse(shape=(6, 2), **kw):
    acc = kf.SparseConditionalAccumulator(kf.float32, shape=list(shape) if shape else None, **kw)
    i = kf.placeholder(kf.int64, [None])
    v = kf.placeholder(kf.float32, [None, 2])
    step = kf.placeholder(kf.int64, [])
    n = kf.placeholder(kf.int32, [])
    apply = acc.apply_grad(i, v, local_step=step)
    return acc, apply, i, v, step, acc.take_indexed_slices_grad(n), n


def test_sparse_mean_is_per_row_over_the_gradients_that_had_it():
    with kf.Graph().as_default():
        acc, apply, i, v, step, take, n = _sparse()
        count = acc.num_accumulated()
        with kf.Session() as sess:
            # Out of order, with index 4 twice: its rows add up and count as one gradient.
            sess.run(apply, {i: [4, 1, 4], v: [[1, 1], [2, 2], [3, 5]], step: 0})
            sess.run(apply, {i: [1, 0], v: [[4, 4], [5, 5]], step: 0})
            sess.run(apply, {i: [], v: np.zeros([0, 2]), step: 0})   # an empty gradient counts
            assert sess.run(count) == 3
            idx, vals, shape = sess.run([take.indices, take.values, take.dense_shape], {n: 3})
            assert idx.tolist() == [0, 1, 4]
            np.testing.assert_allclose(vals, [[5, 5], [3, 3], [4, 6]])
            assert shape.tolist() == [6, 2]
            # Stale after the take: dropped without a look (index 99 is out of range).
            sess.run(apply, {i: [99], v: [[1, 1]], step: 0})
            assert sess.run(count) == 0


def test_sparse_sum_unknown_shape_and_indexed_slices_apply():
    with kf.Graph().as_default():
        acc, apply, i, v, step, take, n = _sparse(shape=None, reduction_type="SUM")
        vals = kf.placeholder(kf.float32, [None, 2])
        slices = kf.IndexedSlices(vals, kf.constant([3, 3], kf.int64), kf.constant([5, 2], kf.int64))
        apply_slices = acc.apply_indexed_slices_grad(slices, local_step=0)
        with kf.Session() as sess:
            sess.run(apply_slices, {vals: [[1, 2], [3, 4]]})
            sess.run(apply, {i: [0, 3], v: [[1, 1], [1, 1]], step: 0})
            idx, out, shape = sess.run([take.indices, take.values, take.dense_shape], {n: 2})
            assert idx.tolist() == [0, 3]
            np.testing.assert_allclose(out, [[1, 1], [5, 7]])
            assert shape.tolist() == [-1, 2]    # dimension 0 unknown to the accumulator (TF)


def test_sparse_integer_gradients_keep_their_type():
    with kf.Graph().as_default():
        acc = kf.SparseConditionalAccumulator(kf.int32, shape=[4, 1])
        first = acc.apply_grad([2, 2, 0], kf.constant([[3], [4], [5]], kf.int32))
        with kf.control_dependencies([first]):
            second = acc.apply_grad([2], kf.constant([[-2]], kf.int32))
        with kf.control_dependencies([second]):
            idx, vals, _ = acc.take_grad(2)
        with kf.Session() as sess:
            i, v = sess.run([idx, vals])
            assert i.tolist() == [0, 2] and v.dtype == np.int32
            assert v.tolist() == [[5], [2]]   # (3 + 4 - 2) / 2, truncated


def test_sparse_errors():
    with kf.Graph().as_default():
        acc, apply, i, v, step, take, n = _sparse()
        shaped = acc.apply_grad(kf.constant([1], kf.int64), kf.constant([[1.0, 2.0]]),
                                grad_shape=[7, 2])
        wide = kf.placeholder(kf.float32, [None, 3])
        apply_wide = acc.apply_grad(kf.constant([0], kf.int64), wide)
        with kf.Session() as sess:
            with pytest.raises(errors.InvalidArgumentError,
                               match="index 6 of gradient row 1 is out of range"):
                sess.run(apply, {i: [0, 6], v: [[1, 1], [1, 1]], step: 0})
            with pytest.raises(errors.InvalidArgumentError, match="2 gradient indices but 1 rows"):
                sess.run(apply, {i: [0, 1], v: [[1, 1]], step: 0})
            with pytest.raises(errors.InvalidArgumentError, match=r"dense shape \[6,2\].*\[7,2\]"):
                sess.run(shaped)
            with pytest.raises(errors.InvalidArgumentError,
                               match=r"rows of shape \[2\], got values of shape \[1,3\]"):
                sess.run(apply_wide, {wide: [[1, 2, 3]]})
            with pytest.raises(errors.InvalidArgumentError, match="num_required must be positive"):
                sess.run(take.values, {n: 0})


def test_sparse_take_wakes_on_apply_and_is_cancelled_by_close(in_thread):
    with kf.Graph().as_default():
        _, apply, i, v, step, take, n = _sparse()
        sess = kf.Session()
        t, box = in_thread(lambda: sess.run(take.indices, {n: 1}))
        time.sleep(0.2)
        assert t.is_alive()
        sess.run(apply, {i: [5, 2], v: [[1, 1], [2, 2]], step: 0})
        t.join(10)
        assert box and box[0][0] == "ok" and box[0][1].tolist() == [2, 5], box
        t, box = in_thread(lambda: sess.run(take.values, {n: 1}))
        time.sleep(0.2)
        closed_at = time.monotonic()
        sess.close()
        t.join(5)
        assert box and isinstance(box[0][1], errors.CancelledError), box
        assert box[0][2] - closed_at < 1.0


def test_many_threads_apply_concurrently():
    with kf.Graph().as_default():
        _, apply, g, step, take, n, count = _dense(shape=(3,))
        with kf.Session() as sess:
            def worker(k):
                for j in range(25):
                    sess.run(apply, {g: np.full(3, k * 100 + j, np.float32), step: 0})
            threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
            assert not any(t.is_alive() for t in threads)
            assert sess.run(count) == 100
            want = np.mean([k * 100 + j for k in range(4) for j in range(25)])
            np.testing.assert_allclose(sess.run(take, {n: 100}), [want] * 3, rtol=1e-6)


# ---------------------------------------------------------------------------- sharing

@pytest.mark.skipif(not have_distributed(), reason="kernflow-client/master/worker not installed")
def test_two_sessions_on_one_server_share_an_accumulator_by_shared_name(in_thread):
    server = kf.train.Server.create_local_server()
    try:
        g = kf.Graph()
        with g.as_default():
            _, apply, grad, step, take, n, count = _dense(shared_name="shared_acc")
            _, p_apply, p_grad, p_step, _, _, p_count = _dense()
            other = kf.ConditionalAccumulator(kf.float64, shape=[2], shared_name="shared_acc")
            other_count = other.num_accumulated()
        with kf.Session(server.target, graph=g) as s1, kf.Session(server.target, graph=g) as s2:
            s1.run(apply, {grad: [1.0, 2.0], step: 0})
            assert s2.run(count) == 1
            # A take blocked in one session wakes on an apply from the other.
            t, box = in_thread(lambda: s1.run(take, {n: 2}))
            time.sleep(0.3)
            assert t.is_alive()
            s2.run(apply, {grad: [3.0, 4.0], step: 0})
            t.join(10)
            assert box and box[0][0] == "ok", box
            np.testing.assert_allclose(box[0][1], [2.0, 3.0])
            # Without a shared name, each session has its own accumulator.
            s1.run(p_apply, {p_grad: [1.0, 1.0], p_step: 0})
            assert s1.run(p_count) == 1 and s2.run(p_count) == 0
            with pytest.raises(errors.InvalidArgumentError,
                               match="dtype float32 but requested dtype was float64"):
                s1.run(other_count)
    finally:
        server.stop()
