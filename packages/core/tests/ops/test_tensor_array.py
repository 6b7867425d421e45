"""kf.TensorArray: every method, TF1's run-time errors, shape inference, gradients without loops."""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors

_r = np.random.RandomState(3)


@pytest.fixture(autouse=True)
def graph():
    g = kf.Graph()
    with g.as_default():
        yield g


def _run(fetches, feed=None):
    with kf.Session() as sess:
        return sess.run(fetches, feed)


def _raises(fetches, cls, match, feed=None):
    with pytest.raises(cls, match=match):
        _run(fetches, feed)


# ---------------------------------------------------------------------------- graph structure
def test_constructor_builds_one_op_with_tf_attrs(graph):
    ta = kf.TensorArray(kf.float32, size=3, dynamic_size=True, clear_after_read=False,
                        tensor_array_name="foo", element_shape=[2])
    op = ta.handle.op
    assert op.type == "TensorArrayV3" and op.name == "TensorArray"
    assert ta.handle.dtype == kf.resource and ta.flow.dtype == kf.float32
    assert ta.flow.op is op and ta.dtype == kf.float32
    assert op.get_attr("dynamic_size") is True and op.get_attr("clear_after_read") is False
    assert op.get_attr("tensor_array_name") == "foo"
    assert op.get_attr("identical_element_shapes") is True
    assert op.get_attr("element_shape").as_list() == [2]
    assert ta.element_shape.as_list() == [2]
    assert kf.TensorArray(kf.int32, size=1, name="bar").handle.op.name == "bar"


def test_constructor_argument_errors(graph):
    ta = kf.TensorArray(kf.float32, size=2)
    with pytest.raises(ValueError, match="Size must be provided"):
        kf.TensorArray(kf.float32)
    with pytest.raises(ValueError, match="both a handle and size"):
        kf.TensorArray(kf.float32, size=2, handle=ta.handle, flow=ta.flow)
    with pytest.raises(ValueError, match="flow must not be None"):
        kf.TensorArray(kf.float32, handle=ta.handle)
    with pytest.raises(TypeError, match="Handle must be a Tensor"):
        kf.TensorArray(kf.float32, handle="h", flow=ta.flow)


def test_writes_return_new_arrays_chained_by_flow(graph):
    ta = kf.TensorArray(kf.float32, size=2)
    w0 = ta.write(0, 1.0)
    w1 = w0.write(1, 2.0)
    assert w0 is not ta and w1.handle is ta.handle
    assert w0.flow.op.type == "TensorArrayWriteV3" and w1.flow.op.inputs[3] is w0.flow
    assert w1.flow.op.name == "TensorArrayWrite_1/TensorArrayWriteV3"
    r = w1.read(1)
    assert r.op.inputs[2] is w1.flow and r.op.type == "TensorArrayReadV3"


def test_wrapping_an_existing_array_by_handle_and_flow(graph):
    ta = kf.TensorArray(kf.float32, size=2).write(0, 3.0)
    again = kf.TensorArray(kf.float32, handle=ta.handle, flow=ta.flow)
    assert again.handle is ta.handle and again.flow is ta.flow
    assert again.write(1, 4.0).flow.op.inputs[0] is ta.handle
    assert list(_run(again.write(1, 4.0).stack())) == [3.0, 4.0]


def test_all_ops_colocated_with_the_handle(graph):
    with kf.device("/cpu:0"):
        ta = kf.TensorArray(kf.float32, size=2, colocate_with_first_write_call=False)
    x = kf.constant([1.0, 2.0])
    ta = ta.write(0, x).write(1, x)
    ops = [ta.flow.op, ta.read(0).op, ta.stack().op, ta.size().op, ta.concat().op, ta.close(),
           ta.grad("gradients").handle.op]
    for op in ops:
        assert op.get_attr("_class") == ["loc:@TensorArray"], op.name
        assert op.device == ta.handle.op.device


def test_first_write_places_an_unplaced_array(graph):
    ta = kf.TensorArray(kf.float32, size=1)
    with kf.device("/job:localhost/replica:0/task:0/device:CPU:0"):
        x = kf.constant([1.0])
    ta.write(0, x)
    assert ta.handle.op.device == "/job:localhost/replica:0/task:0/device:CPU:0"


# ---------------------------------------------------------------------------- values
def test_write_read_stack_size():
    ta = kf.TensorArray(kf.float32, size=3, clear_after_read=False)
    ta = ta.write(0, [1.0, 2.0]).write(2, [5.0, 6.0]).write(1, [3.0, 4.0])
    r0, r2, s, n = _run([ta.read(0), ta.read(2), ta.stack(), ta.size()])
    np.testing.assert_array_equal(r0, [1, 2])
    np.testing.assert_array_equal(r2, [5, 6])
    np.testing.assert_array_equal(s, [[1, 2], [3, 4], [5, 6]])
    assert n == 3 and n.dtype == np.int32


def test_unstack_and_read_back():
    x = _r.randn(4, 3).astype(np.float32)
    ta = kf.TensorArray(kf.float32, size=4).unstack(x)
    vals = _run([ta.read(i) for i in range(4)])
    np.testing.assert_array_equal(np.stack(vals), x)


def test_unstack_of_a_value_of_unknown_shape():
    p = kf.placeholder(kf.float32, None)
    ta = kf.TensorArray(kf.float32, size=0, dynamic_size=True).unstack(p)
    x = _r.randn(3, 2).astype(np.float32)
    s, n = _run([ta.stack(), ta.size()], {p: x})
    np.testing.assert_array_equal(s, x)
    assert n == 3


def test_scatter_and_gather():
    x = np.arange(6, dtype=np.int32).reshape(3, 2)
    ta = kf.TensorArray(kf.int32, size=5).scatter([4, 0, 2], x)
    g = ta.gather([2, 4])
    np.testing.assert_array_equal(_run(g), x[[2, 0]])


def test_split_and_concat_with_ragged_lengths():
    x = np.arange(10, dtype=np.float64)
    ta = kf.TensorArray(kf.float64, size=3, infer_shape=False).split(x, [3, 0, 7])
    val, = _run([ta.concat()])
    np.testing.assert_array_equal(val, x)
    ta2 = kf.TensorArray(kf.float64, size=3, infer_shape=False).split(x, [3, 0, 7])
    r1, r2 = _run([ta2.read(1), ta2.read(2)])
    assert r1.shape == (0,) and list(r2) == list(range(3, 10))


def test_concat_returns_lengths_op_output():
    ta = kf.TensorArray(kf.float32, size=2, infer_shape=False)
    ta = ta.write(0, [[1.0, 2.0]]).write(1, [[3.0, 4.0], [5.0, 6.0]])
    c = ta.concat()
    val, lengths = _run([c, c.op.outputs[1]])
    np.testing.assert_array_equal(val, [[1, 2], [3, 4], [5, 6]])
    assert list(lengths) == [1, 2] and lengths.dtype == np.int64


def test_dynamic_size_grows_on_write_scatter_and_split():
    ta = kf.TensorArray(kf.float32, size=0, dynamic_size=True)
    ta = ta.write(2, 1.0)
    assert _run(ta.size()) == 3
    tb = kf.TensorArray(kf.float32, size=1, dynamic_size=True).scatter([4], [7.0])
    assert _run(tb.size()) == 5
    tc = kf.TensorArray(kf.float32, size=1, dynamic_size=True).split([1.0, 2.0, 3.0], [1, 1, 1])
    np.testing.assert_array_equal(_run(tc.stack()), [[1], [2], [3]])


def test_clear_after_read_false_allows_repeated_reads():
    ta = kf.TensorArray(kf.float32, size=1, clear_after_read=False).write(0, 2.0)
    a = ta.read(0)
    with kf.control_dependencies([a]):
        b = ta.read(0)
    assert _run([a, b]) == [2.0, 2.0]


def test_unwritten_index_reads_zeros_when_the_element_shape_is_known():
    ta = kf.TensorArray(kf.float32, size=3, element_shape=[2])
    ta = ta.write(0, [1.0, 2.0])
    r1, s = _run([ta.read(1), ta.identity().gather([0, 2])])
    np.testing.assert_array_equal(r1, [0, 0])
    np.testing.assert_array_equal(s, [[1, 2], [0, 0]])


def test_empty_stack_and_concat_with_known_shapes():
    ta = kf.TensorArray(kf.float32, size=0, element_shape=[2, 3])
    s, c = _run([ta.stack(), ta.concat()])
    assert s.shape == (0, 2, 3) and c.shape == (0, 3)


def test_identity_and_close():
    ta = kf.TensorArray(kf.float32, size=1).write(0, 1.0)
    ident = ta.identity()
    assert ident.flow.op.type == "Identity" and ident.handle is ta.handle
    close = ident.close()
    assert close.type == "TensorArrayCloseV3" and close.outputs == []
    _run(close)


def test_strings():
    ta = kf.TensorArray(kf.string, size=2).write(0, "a").write(1, "bc")
    assert list(_run(ta.stack())) == [b"a", b"bc"]


def test_arrays_are_per_step():
    p = kf.placeholder(kf.float32, [])
    ta = kf.TensorArray(kf.float32, size=1).write(0, p)
    r = ta.read(0)
    with kf.Session() as sess:
        assert sess.run(r, {p: 1.0}) == 1.0
        assert sess.run(r, {p: 2.0}) == 2.0   # a fresh array: no "already written" error


# ---------------------------------------------------------------------------- shape inference
def test_element_shape_inferred_from_first_write(graph):
    ta = kf.TensorArray(kf.float32, size=2)
    assert ta.element_shape.rank is None
    w = ta.write(0, kf.placeholder(kf.float32, [None, 3]))
    assert w.element_shape.as_list() == [None, 3]
    w2 = w.write(1, kf.placeholder(kf.float32, [4, None]))
    assert w2.element_shape.as_list() == [4, 3]
    assert ta.element_shape.as_list() == [4, 3]        # shared by the array's objects
    assert w2.read(0).shape.as_list() == [4, 3]
    assert w2.stack().shape.as_list() == [None, 4, 3]
    assert w2.gather([0, 1]).shape.as_list() == [2, 4, 3]
    assert w2.concat().shape.as_list() == [None, 3]
    assert w2.size().shape.as_list() == []


def test_incompatible_write_shape_fails_at_graph_construction(graph):
    ta = kf.TensorArray(kf.float32, size=2).write(0, kf.zeros([2]))
    with pytest.raises(ValueError, match="Inconsistent shapes"):
        ta.write(1, kf.zeros([3]))
    with pytest.raises(ValueError, match="Inconsistent shapes"):
        kf.TensorArray(kf.float32, size=2, element_shape=[2]).write(0, kf.zeros([1, 2]))


def test_infer_shape_false_leaves_shapes_unknown(graph):
    ta = kf.TensorArray(kf.float32, size=2, infer_shape=False)
    ta = ta.write(0, kf.zeros([2])).write(1, kf.zeros([3]))
    assert ta.element_shape.rank is None and ta.read(0).shape.rank is None
    np.testing.assert_array_equal(_run(ta.concat()), np.zeros(5))


def test_scatter_unstack_and_split_infer_element_shapes(graph):
    x = kf.placeholder(kf.float32, [5, 2])
    assert kf.TensorArray(kf.float32, size=5).unstack(x).element_shape.as_list() == [2]
    assert kf.TensorArray(kf.float32, size=5).scatter([0], x[:1]).element_shape.as_list() == [2]
    split = kf.TensorArray(kf.float32, size=5).split(kf.zeros([10, 3]), [2, 2, 2, 2, 2])
    assert split.element_shape.as_list() == [2, 3]
    ragged = kf.TensorArray(kf.float32, size=2, infer_shape=False).split(kf.zeros([5]), [2, 3])
    assert ragged.element_shape.rank is None


def test_graph_time_dtype_and_shape_checks(graph):
    ta = kf.TensorArray(kf.float32, size=2)
    with pytest.raises(errors.InvalidArgumentError, match="TensorArray dtype is float32 but Op is "
                                                          "trying to write dtype int32"):
        ta.write(0, kf.constant(1))
    with pytest.raises(ValueError, match="must be a scalar"):
        ta.read([0, 1])
    with pytest.raises(ValueError, match="must be a vector"):
        ta.gather([[0]])


# ---------------------------------------------------------------------------- run-time errors
def test_reading_an_unwritten_index_of_unknown_shape():
    ta = kf.TensorArray(kf.float32, size=2, infer_shape=False).write(0, [1.0])
    _raises(ta.read(1), errors.InvalidArgumentError,
            "TensorArrayReadV3 .*Could not read from TensorArray index 1 because it has not yet "
            "been written to")


def test_writing_an_index_twice():
    ta = kf.TensorArray(kf.float32, size=2).write(0, 1.0).write(0, 2.0)
    _raises(ta.flow, errors.InvalidArgumentError,
            r"TensorArrayWriteV3 .*Could not write to TensorArray index 0 because it has already "
            r"been written to\.")
    dup = kf.TensorArray(kf.float32, size=3).scatter([1, 1], [1.0, 2.0])
    _raises(dup.flow, errors.InvalidArgumentError, "TensorArrayScatterV3 .*already been written")


def test_index_out_of_range_without_dynamic_size():
    ta = kf.TensorArray(kf.float32, size=2)
    _raises(ta.write(2, 1.0).flow, errors.InvalidArgumentError,
            "Tried to write to index 2 but array is not resizeable and size is: 2")
    _raises(ta.write(-1, 1.0).flow, errors.InvalidArgumentError, "Tried to write to index -1")
    _raises(ta.write(0, 1.0).read(5), errors.InvalidArgumentError,
            "Tried to read from index 5 but array size is: 2")
    _raises(ta.scatter([0, 3], [1.0, 2.0]).flow, errors.InvalidArgumentError,
            "Tried to write to index 3")
    _raises(kf.TensorArray(kf.float32, size=2).split([1.0, 2.0, 3.0], [1, 1, 1]).flow,
            errors.InvalidArgumentError, r"size is not equal to the size of lengths \(2 vs. 3\)")


def test_read_after_read_with_clear_after_read():
    ta = kf.TensorArray(kf.float32, size=1).write(0, 2.0)
    a = ta.read(0)
    with kf.control_dependencies([a]):
        b = ta.read(0)
    _raises([a, b], errors.InvalidArgumentError,
            r"Could not read index 0 twice because it was cleared after a previous read \(perhaps "
            r"try setting clear_after_read = false\?\)")


def test_run_time_dtype_mismatches():
    ta = kf.TensorArray(kf.float32, size=1)
    handle_only = kf.TensorArray(kf.int32, handle=ta.handle, flow=ta.flow)
    _raises(handle_only.write(0, 1).flow, errors.InvalidArgumentError,
            "TensorArray dtype is float32 but Op is trying to write dtype int32")
    wrote = ta.write(0, 1.0)
    as_int = kf.TensorArray(kf.int32, handle=wrote.handle, flow=wrote.flow)
    _raises(as_int.read(0), errors.InvalidArgumentError,
            "TensorArray dtype is float32 but Op requested dtype int32")


def test_run_time_element_shape_mismatches():
    p = kf.placeholder(kf.float32, None)
    ta = kf.TensorArray(kf.float32, size=2).write(0, p)
    ta = ta.write(1, kf.placeholder_with_default(np.zeros(3, np.float32), None))
    _raises(ta.flow, errors.InvalidArgumentError,
            r"Could not write to TensorArray index 1 because the value shape is \[3\] which is "
            r"incompatible with the TensorArray's inferred element shape: \[2\]",
            {p: np.zeros(2, np.float32)})
    tb = kf.TensorArray(kf.float32, size=1, element_shape=[None, 2]).write(0, p)
    _raises(tb.flow, errors.InvalidArgumentError, "value shape is \\[2,3\\]",
            {p: np.zeros((2, 3), np.float32)})


def test_gather_and_concat_of_inconsistent_shapes():
    ta = kf.TensorArray(kf.float32, size=2, infer_shape=False).write(0, [1.0]).write(1, [1.0, 2.0])
    _raises(ta.stack(), errors.InvalidArgumentError,
            r"TensorArray has inconsistent shapes.  Index 0 has shape: \[1\] but index 1 has "
            r"shape: \[2\]")
    tb = kf.TensorArray(kf.float32, size=2, infer_shape=False)
    tb = tb.write(0, [[1.0]]).write(1, [[1.0, 2.0]])
    _raises(tb.concat(), errors.InvalidArgumentError, r"\(excepting dimension 0\) shape")
    tc = kf.TensorArray(kf.float32, size=1).write(0, 1.0)
    _raises(tc.concat(), errors.InvalidArgumentError, "Concat saw a scalar shape at index 0")


def test_scatter_and_split_argument_errors():
    ta = kf.TensorArray(kf.float32, size=3)
    _raises(ta.scatter([0, 1], kf.placeholder_with_default(np.zeros([3], np.float32), None)).flow,
            errors.InvalidArgumentError, r"Expected len\(indices\) == values.shape\[0\], but saw: "
            r"2 vs. 3")
    _raises(ta.split([1.0, 2.0, 3.0], [1, 1, 2]).flow, errors.InvalidArgumentError,
            "Expected sum of lengths to be equal to values.shape")
    _raises(ta.split([1.0, 2.0, 3.0, 4.0], [1, 1, 2]).flow, errors.InvalidArgumentError,
            "Expected lengths to be equal: 1 vs. 2")


def test_empty_gather_of_unknown_shape_is_unimplemented():
    ta = kf.TensorArray(kf.float32, size=0)
    _raises(ta.stack(), errors.UnimplementedError, "TensorArray has size zero, but element shape")


def test_negative_size():
    _raises(kf.TensorArray(kf.float32, size=-1).flow, errors.InvalidArgumentError,
            "Size should be >= 0")


def test_use_after_close():
    ta = kf.TensorArray(kf.float32, size=1).write(0, 1.0)
    close = ta.close()
    with kf.control_dependencies([close]):
        n = ta.identity().size()
    _raises(n, errors.InvalidArgumentError, "TensorArraySizeV3 .*has already been closed")


# ---------------------------------------------------------------------------- gradient arrays
def test_grad_array_sums_writes_and_is_shared_per_source():
    ta = kf.TensorArray(kf.float32, size=2).write(0, [1.0, 1.0]).write(1, [2.0, 2.0])
    g1 = ta.grad("gradients").write(0, [1.0, 2.0])
    g2 = ta.grad("gradients", flow=g1.flow).write(0, [10.0, 20.0])
    other = ta.grad("gradients_1", flow=g2.flow)
    r0, r1, o0 = _run([g2.read(0), g2.identity().read(1), other.read(0)])
    np.testing.assert_array_equal(r0, [11, 22])
    np.testing.assert_array_equal(r1, [0, 0])     # unwritten: zeros of the forward shape
    np.testing.assert_array_equal(o0, [0, 0])     # another source: another array
    assert ta.grad("gradients").handle.op.type == "TensorArrayGradV3"
    assert ta.grad("gradients").handle.op.get_attr("source") == "gradients"


def test_grad_array_aggregation_errors():
    ta = kf.TensorArray(kf.float32, size=1, infer_shape=False).write(0, [1.0])
    g = ta.grad("gradients").write(0, [1.0]).write(0, [1.0, 2.0])
    _raises(g.flow, errors.InvalidArgumentError, r"Could not aggregate to TensorArray index 0 "
            r"because the existing shape is \[1\] but the new input shape is \[2\]")
    g2 = ta.grad("gradients").write(0, [1.0])
    r = g2.read(0)
    with kf.control_dependencies([r]):
        again = g2.write(0, [1.0])
    _raises(again.flow, errors.InvalidArgumentError, "because it has already been read")


def test_grad_array_has_the_forward_size():
    ta = kf.TensorArray(kf.float32, size=0, dynamic_size=True).write(3, 1.0)
    assert _run(ta.grad("gradients").size()) == 4


# ---------------------------------------------------------------------------- gradients
def test_gradient_of_unstack_then_reads_is_the_weights():
    x = kf.placeholder(kf.float32, [3, 2])
    ta = kf.TensorArray(kf.float32, size=3).unstack(x)
    w = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32)
    loss = kf.add_n([kf.reduce_sum(ta.read(i) * w[i]) for i in (0, 2)])
    g, = kf.gradients(loss, [x])
    assert g.shape.as_list() == [3, 2]
    np.testing.assert_array_equal(_run(g, {x: _r.randn(3, 2)}), w * [[1], [0], [1]])


def test_gradient_of_write_then_stack():
    x = kf.placeholder(kf.float32, [2])
    y = kf.placeholder(kf.float32, [2])
    ta = kf.TensorArray(kf.float32, size=2).write(0, x * 3.0).write(1, y)
    w = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    gx, gy = kf.gradients(kf.reduce_sum(ta.stack() * w), [x, y])
    vx, vy = _run([gx, gy], {x: [1, 2], y: [3, 4]})
    np.testing.assert_array_equal(vx, 3 * w[0])
    np.testing.assert_array_equal(vy, w[1])


def test_gradient_of_a_value_read_twice():
    x = kf.placeholder(kf.float32, [2])
    ta = kf.TensorArray(kf.float32, size=1, clear_after_read=False).write(0, x)
    a = ta.read(0)
    with kf.control_dependencies([a]):
        b = ta.read(0)
    g, = kf.gradients(kf.reduce_sum(a * 2.0 + b * 5.0), [x])
    np.testing.assert_array_equal(_run(g, {x: [1, 2]}), [7, 7])


@pytest.mark.parametrize("build,y_shape", [("read", [2, 3]), ("stack", [3, 3]),
                                           ("scatter_gather", [3, 3]), ("split_concat", [12]),
                                           ("ragged", [12]), ("read_direct", [3])])
def test_gradients_match_finite_differences(build, y_shape):
    x = kf.placeholder(kf.float64, [4, 3])
    xv = _r.randn(4, 3)
    if build == "read":
        ta = kf.TensorArray(kf.float64, size=4).unstack(x)
        y = kf.stack([ta.read(3) * ta.read(1), kf.sin(ta.read(0))])
    elif build == "stack":
        ta = kf.TensorArray(kf.float64, size=3)
        y = ta.write(2, x[0] * x[1]).write(0, x[3]).write(1, kf.exp(x[2])).stack()
    elif build == "scatter_gather":
        ta = kf.TensorArray(kf.float64, size=6).scatter([5, 1, 0, 3], x * x)
        y = ta.gather([3, 0, 5])
    elif build == "split_concat":
        ta = kf.TensorArray(kf.float64, size=2).split(kf.reshape(x, [12]), [6, 6])
        y = ta.concat() ** 2
    elif build == "read_direct":   # the fed grad_ys reaches the read: source from the scope
        y = kf.TensorArray(kf.float64, size=4).unstack(x).read(1)
    else:
        ta = kf.TensorArray(kf.float64, size=3, infer_shape=False)
        ta = ta.split(kf.reshape(x, [12]), [5, 0, 7])
        y = kf.reshape(ta.concat(), [12]) * kf.range(12.0, dtype=kf.float64)
    err = kf.test.compute_gradient_error(x, [4, 3], y, y_shape, x_init_value=xv, delta=1e-6)
    assert err < 1e-6


def test_gradient_with_unknown_shapes_and_dynamic_size():
    x = kf.placeholder(kf.float32, None)
    ta = kf.TensorArray(kf.float32, size=0, dynamic_size=True).unstack(x)
    w = kf.placeholder(kf.float32, None)
    g, = kf.gradients(kf.reduce_sum(ta.stack() * w), [x])
    wv = _r.randn(5, 2).astype(np.float32)
    np.testing.assert_allclose(_run(g, {x: np.ones((5, 2)), w: wv}), wv)


def test_gradient_source_is_the_gradients_scope():
    x = kf.placeholder(kf.float32, [2])
    ta = kf.TensorArray(kf.float32, size=1).write(0, x)
    with kf.name_scope("outer"):
        g, = kf.gradients(kf.reduce_sum(ta.read(0)), [x])
    sources = {op.get_attr("source") for op in kf.get_default_graph().get_operations()
               if op.type == "TensorArrayGradV3"}
    assert sources == {"outer/gradients"}
    np.testing.assert_array_equal(_run(g, {x: [1, 2]}), [1, 1])
