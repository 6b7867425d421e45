"""kf.gradients through the array ops: sparse (IndexedSlices) gradients, strided slices, static
shapes and graph economy, NotDifferentiable marks; and the empty-list conversion of apply_op."""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework.gradient_registry import gradient_status
from kernflow.core.framework.indexed_slices import IndexedSlices
from kernflow.core.framework.op_def_library import apply_op

_r = np.random.RandomState(11)


@pytest.fixture(autouse=True)
def _fresh_graph():
    with kf.Graph().as_default() as g:
        yield g


def _run(fetches, feed=None):
    with kf.Session() as sess:
        return sess.run(fetches, feed)


def _dense(g):
    return kf.convert_to_tensor(g) if isinstance(g, IndexedSlices) else g


def _grad_op_types(g):
    return sorted(op.type for op in g.get_operations() if op.name.startswith("gradients/"))


def _check_fd(build, values, static=True, delta=1e-6, tol=1e-6):
    """Gradients of sum(build(x) * w) w.r.t. each x against central differences (float64)."""
    xs = [kf.placeholder(kf.float64, v.shape if static else None) for v in values]
    y = build(*xs)
    w = _r.uniform(0.5, 1.5, size=_run(kf.shape(y), dict(zip(xs, values))))
    loss = kf.reduce_sum(y * w)
    grads = kf.gradients(loss, xs)
    for g, x in zip(grads, xs):
        assert g is not None
        if static:
            assert _dense(g).shape.as_list() == x.shape.as_list()
    with kf.Session() as sess:
        feed = dict(zip(xs, values))
        sym = sess.run([_dense(g) for g in grads], feed)
        for k, v in enumerate(values):
            num = np.zeros_like(v)
            for j in range(v.size):
                vals = []
                for sgn in (1, -1):
                    p = v.copy()
                    p.reshape(-1)[j] += sgn * delta
                    vals.append(sess.run(loss, {**feed, xs[k]: p}))
                num.reshape(-1)[j] = (vals[0] - vals[1]) / (2 * delta)
            np.testing.assert_allclose(sym[k], num, rtol=tol, atol=tol)
    return grads


# ---------------------------------------------------------------------------- embeddings
def test_embedding_gradient_is_indexed_slices_and_sgd_updates_only_looked_up_rows(_fresh_graph):
    init = _r.randn(6, 3).astype(np.float32)
    emb = kf.Variable(init, name="emb")
    ids = kf.placeholder(kf.int32, [None])
    rows = kf.gather(emb, ids)
    loss = kf.reduce_sum(rows * rows)
    opt = kf.train.GradientDescentOptimizer(0.1)
    (grad, var), = opt.compute_gradients(loss, [emb])
    assert var is emb
    assert isinstance(grad, IndexedSlices)
    assert grad.values.dtype == kf.float32 and grad.values.shape.as_list() == [None, 3]
    assert grad.indices.dtype == kf.int32
    assert grad.dense_shape.dtype == kf.int32 and grad.dense_shape.op.type == "Const"
    assert grad.shape.as_list() == [6, 3]
    train = opt.apply_gradients([(grad, var)])
    assert "SparseApplyGradientDescent" in [op.type for op in _fresh_graph.get_operations()]
    feed_ids = np.array([1, 4, 1], np.int32)
    with kf.Session() as sess:
        sess.run(kf.global_variables_initializer())
        before = sess.run(emb)
        values, indices, shape = sess.run([grad.values, grad.indices, grad.dense_shape], {ids: feed_ids})
        sess.run(train, {ids: feed_ids})
        after = sess.run(emb)
    np.testing.assert_array_equal(before, init)
    np.testing.assert_array_equal(indices, feed_ids)
    np.testing.assert_array_equal(shape, [6, 3])
    np.testing.assert_allclose(values, 2 * init[feed_ids], rtol=1e-6)
    expected = init.copy()
    np.add.at(expected, feed_ids, -0.1 * 2 * init[feed_ids])
    np.testing.assert_allclose(after, expected, rtol=1e-6)
    untouched = [0, 2, 3, 5]
    np.testing.assert_array_equal(after[untouched], init[untouched])


def test_gather_with_2d_indices_flattens_the_slices():
    params = kf.placeholder(kf.float64, [5, 2])
    ids = kf.constant([[0, 3], [3, 1], [4, 4]])
    g, = kf.gradients(kf.reduce_sum(kf.gather(params, ids) * 2.0), [params])
    assert isinstance(g, IndexedSlices)
    assert g.values.shape.as_list() == [6, 2] and g.indices.shape.as_list() == [6]
    pv = _r.randn(5, 2)
    values, indices, dense = _run([g.values, g.indices, _dense(g)], {params: pv})
    np.testing.assert_array_equal(indices, [0, 3, 3, 1, 4, 4])
    np.testing.assert_allclose(values, np.full((6, 2), 2.0))
    np.testing.assert_allclose(dense, np.array([[2, 2], [2, 2], [0, 0], [4, 4], [4, 4.]]))


def test_gather_with_unknown_params_shape_has_a_run_time_dense_shape():
    params = kf.placeholder(kf.float32, None)
    ids = kf.placeholder(kf.int64, None)
    g, = kf.gradients(kf.reduce_sum(kf.gather(params, ids)), [params])
    assert isinstance(g, IndexedSlices)
    pv = _r.randn(4, 2, 3).astype(np.float32)
    values, indices, shape, dense = _run([g.values, g.indices, g.dense_shape, _dense(g)],
                                         {params: pv, ids: np.array([[2], [0]], np.int64)})
    assert values.dtype == np.float32 and values.shape == (2, 2, 3)
    np.testing.assert_array_equal(indices, [2, 0])
    np.testing.assert_array_equal(shape, [4, 2, 3])
    expected = np.zeros_like(pv)
    expected[[0, 2]] = 1
    np.testing.assert_array_equal(dense, expected)


def test_gradients_of_two_lookups_concatenate_the_slices():
    params = kf.placeholder(kf.float64, [4, 2])
    y = kf.reduce_sum(kf.gather(params, [0, 1])) + 3.0 * kf.reduce_sum(kf.gather(params, [1]))
    g, = kf.gradients(y, [params])
    assert isinstance(g, IndexedSlices)
    indices, dense = _run([g.indices, _dense(g)], {params: _r.randn(4, 2)})
    np.testing.assert_array_equal(indices, [0, 1, 1])
    np.testing.assert_allclose(dense, [[1, 1], [4, 4], [0, 0], [0, 0]])


def test_densify_indexed_slices():
    values = kf.constant([[1., 2.], [3., 4.], [5., 6.]])
    s = IndexedSlices(values, kf.constant([2, 0, 2]), kf.constant([4, 2]))
    d = kf.convert_to_tensor(s)
    assert d.op.type == "UnsortedSegmentSum" and d.shape.as_list() == [4, 2]
    np.testing.assert_allclose(_run(d), [[3, 4], [0, 0], [6, 8], [0, 0]])
    n = kf.placeholder(kf.int32, [2])
    d2 = kf.convert_to_tensor(IndexedSlices(values, kf.constant([1, 1, 0]), n))
    np.testing.assert_allclose(_run(d2, {n: [3, 2]}), [[5, 6], [4, 6], [0, 0]])
    d3 = kf.convert_to_tensor(IndexedSlices(values, kf.constant([0, 1, 2]), [3, 2]))
    assert d3.shape.as_list() == [3, 2]
    with pytest.raises(ValueError, match="dtype"):
        kf.convert_to_tensor(s, dtype=kf.int32)
    with pytest.raises(ValueError, match="dense_shape"):
        kf.convert_to_tensor(IndexedSlices(values, kf.constant([0, 1, 2])))


def test_gather_nd_of_rows_gives_indexed_slices():
    params = kf.placeholder(kf.float64, [3, 2])
    g, = kf.gradients(kf.reduce_sum(kf.gather_nd(params, [[2], [0], [2]])), [params])
    assert isinstance(g, IndexedSlices)
    np.testing.assert_allclose(_run(_dense(g), {params: _r.randn(3, 2)}), [[1, 1], [0, 0], [2, 2]])


def test_sparse_gradient_through_concat_along_axis_0_stays_sparse():
    a = kf.placeholder(kf.float64, [2, 3])
    b = kf.placeholder(kf.float64, [None, 3])
    y = kf.reduce_sum(kf.gather(kf.concat([a, b], 0), [3, 0, 4, 3]) * 2.0)
    ga, gb = kf.gradients(y, [a, b])
    assert isinstance(ga, IndexedSlices) and isinstance(gb, IndexedSlices)
    feed = {a: _r.randn(2, 3), b: _r.randn(3, 3)}
    ia, da, ib, db = _run([ga.indices, _dense(ga), gb.indices, _dense(gb)], feed)
    np.testing.assert_array_equal(ia, [0])
    np.testing.assert_array_equal(ib, [1, 2, 1])
    np.testing.assert_allclose(da, [[2, 2, 2], [0, 0, 0]])
    np.testing.assert_allclose(db, [[0, 0, 0], [4, 4, 4], [2, 2, 2]])


@pytest.mark.parametrize("static", [True, False])
def test_sparse_gradient_through_tile_and_dynamic_stitch(static):
    x = kf.placeholder(kf.float64, [2, 3] if static else None)
    tiled = kf.tile(x, [3, 1])
    stitched = kf.dynamic_stitch([kf.constant([1, 0]), kf.constant([2])],
                                 [x, kf.constant([[7., 8., 9.]], kf.float64)])
    y = kf.reduce_sum(kf.gather(tiled, [0, 5, 2])) + kf.reduce_sum(kf.gather(stitched, [0, 0]))
    g, = kf.gradients(y, [x])
    np.testing.assert_allclose(_run(g, {x: _r.randn(2, 3)}), [[2, 2, 2], [3, 3, 3]])


# ---------------------------------------------------------------------------- strided slices
_SPECS = [
    lambda x: x[1:, ::2, -1],
    lambda x: x[::-1, kf.newaxis, 1:3],
    lambda x: x[..., ::-2],
    lambda x: x[-1, ...],
    lambda x: x[:, kf.newaxis, 2, 1:-1:2],
    lambda x: x[-100:100, 1:],
    lambda x: kf.strided_slice(x, [0, 2, 1], [2, 0, 0], [1, -1, 1], begin_mask=1, end_mask=5),
    lambda x: kf.strided_slice(x, [1, 0, 0], [2, 0, 0], [1, 1, 1], ellipsis_mask=2, shrink_axis_mask=1),
    lambda x: kf.strided_slice(x, [0, 0], [0, 3], [1, 1], new_axis_mask=1, begin_mask=2),
]


@pytest.mark.parametrize("static", [True, False])
@pytest.mark.parametrize("spec", range(len(_SPECS)))
def test_strided_slice_gradients_with_masks_match_finite_differences(spec, static):
    grads = _check_fd(_SPECS[spec], [_r.randn(3, 4, 5)], static=static)
    assert grads[0].op.type == "StridedSliceGrad"


def test_strided_slice_grad_of_grad():
    from kernflow.core.ops import array_ops
    dy = kf.placeholder(kf.float64, [2, 2])
    g = array_ops.strided_slice_grad([3, 4], [1, 0], [3, 4], [1, 2], dy)
    assert g.shape.as_list() == [3, 4]
    w = kf.reshape(kf.range(12, dtype=kf.float64), [3, 4])
    gdy, = kf.gradients(kf.reduce_sum(g * w), [dy])
    assert gdy.op.type == "StridedSlice" and gdy.shape.as_list() == [2, 2]
    np.testing.assert_allclose(_run(gdy, {dy: np.ones((2, 2))}), [[4, 6], [8, 10]])


# ---------------------------------------------------------------------------- finite differences
_FD_CASES = {
    "slice": (lambda x: kf.slice(x, [1, 0, 2], [2, -1, 2]), [(3, 4, 5)]),
    "pad": (lambda x: kf.pad(x, [[0, 2], [1, 1]]), [(2, 3)]),
    "pad_symmetric": (lambda x: kf.pad(x, [[2, 1], [1, 2]], "SYMMETRIC"), [(3, 3)]),
    "tile": (lambda x: kf.tile(x, [2, 1, 3]), [(2, 3, 2)]),
    "broadcast_to": (lambda x: kf.broadcast_to(x, [2, 4, 3]), [(4, 1)]),
    "concat_three": (lambda a, b, c: kf.concat([a, b, c], 1), [(2, 1), (2, 3), (2, 2)]),
    "split_v": (lambda x: kf.split(x, [2, 1, 2], axis=1)[1] * 3.0 + kf.split(x, [2, 1, 2], axis=1)[0][:, :1],
                [(2, 5)]),
    "stack_unstack": (lambda x: kf.stack(kf.unstack(x, num=3, axis=1)[::-1], axis=0), [(2, 3)]),
    "transpose": (lambda x: kf.transpose(x, [2, 0, 1]), [(2, 3, 4)]),
    "gather_axis1": (lambda x: kf.gather(x, [[2, 0], [2, 2]], axis=1), [(2, 3, 2)]),
    "gather_batch": (lambda x: kf.gather(x, [[1, 1, 0], [2, 0, 0]], axis=1, batch_dims=1), [(2, 3, 2)]),
    "gather_nd": (lambda x: kf.gather_nd(x, [[0, 1], [1, 2], [0, 1]]), [(2, 3, 2)]),
    "scatter_nd": (lambda x: kf.scatter_nd([[1], [3], [1]], x, [4, 2]), [(3, 2)]),
    "partition": (lambda x: kf.dynamic_partition(x, [[0, 2, 0], [2, 2, 0]], 3)[2] * 2.0, [(2, 3, 2)]),
    "squeeze_expand": (lambda x: kf.expand_dims(kf.squeeze(x, [1]), -1), [(3, 1, 2)]),
    "reverse": (lambda x: kf.reverse(x, [-1, 0]), [(2, 3)]),
}


@pytest.mark.parametrize("static", [True, False])
@pytest.mark.parametrize("name", sorted(_FD_CASES))
def test_gradients_match_finite_differences(name, static):
    build, shapes = _FD_CASES[name]
    _check_fd(build, [_r.randn(*s) for s in shapes], static=static)


# ---------------------------------------------------------------------------- graph economy
@pytest.mark.parametrize("build", [
    lambda x: kf.reshape(x, [6, 4]),
    lambda x: kf.expand_dims(x, 1),
    lambda x: kf.slice(x, [1, 0, 1], [1, 3, 2]),
    lambda x: x[:, 1:, ::2],
    lambda x: kf.pad(x, [[1, 0], [0, 0], [2, 2]]),
    lambda x: kf.tile(x, [1, 2, 3]),
    lambda x: kf.broadcast_to(x, [5, 2, 3, 4]),
    lambda x: kf.concat([x, x + 1.0], 1),
    lambda x: kf.gather(x, [[1, 0]], axis=2),
    lambda x: kf.transpose(x, [1, 0, 2]),
])
def test_static_shapes_give_gradient_graphs_without_shape_ops(_fresh_graph, build):
    x = kf.placeholder(kf.float32, [2, 3, 4])
    g, = kf.gradients(kf.reduce_sum(build(x)), [x])
    assert g.dtype == kf.float32 and g.shape.as_list() == [2, 3, 4]
    types = _grad_op_types(_fresh_graph)
    assert not {"Shape", "ShapeN", "Rank", "Size", "InvertPermutation", "ConcatOffset"} & set(types), types


def test_no_op_gradients_pass_the_gradient_through(_fresh_graph):
    x = kf.placeholder(kf.float64, [2, 3])
    ys = [kf.pad(x, [[0, 0], [0, 0]]), kf.transpose(x, [0, 1]), kf.tile(x, [1, 1]),
          kf.slice(x, [0, 0], [2, 3]), kf.broadcast_to(x, [2, 3])]
    for y in ys:
        g, = kf.gradients(y * 2.0, [x])
        assert g.op.type == "Mul", (y.op.type, g.op.type)


def test_reshape_with_one_unknown_dim_uses_a_constant_shape(_fresh_graph):
    x = kf.placeholder(kf.float64, [None, 3, 2])
    g, = kf.gradients(kf.reduce_sum(kf.reshape(x, [-1])), [x])
    assert g.op.type == "Reshape" and g.op.inputs[1].op.type == "Const"
    assert g.shape.as_list() == [None, 3, 2]
    assert _run(g, {x: np.ones((4, 3, 2))}).shape == (4, 3, 2)


def test_concat_gradient_is_one_split_when_sizes_are_static(_fresh_graph):
    xs = [kf.placeholder(kf.float32, [None, d]) for d in (1, 2, 3)]
    grads = kf.gradients(kf.reduce_sum(kf.concat(xs, -1) * 2.0), xs)
    assert {g.op.type for g in grads} == {"SplitV"}
    assert [g.shape.as_list() for g in grads] == [[None, 1], [None, 2], [None, 3]]
    vals = _run(grads, {x: np.ones((2, x.shape[1]), np.float32) for x in xs})
    for v, d in zip(vals, (1, 2, 3)):
        np.testing.assert_array_equal(v, np.full((2, d), 2, np.float32))


def test_dtypes_and_static_shapes_are_kept():
    for dt in (kf.float16, kf.float32, kf.float64):
        x = kf.placeholder(dt, [4, 3])
        ys = [kf.transpose(x), kf.tile(x, [2, 1]), kf.gather(x, [1, 2], axis=1), x[1:, :2],
              kf.pad(x, [[1, 1], [0, 0]]), kf.reshape(x, [12])]
        for y in ys:
            g, = kf.gradients(kf.reduce_sum(y), [x])
            assert g.dtype == dt and g.shape.as_list() == [4, 3], (y.op.type, g)


# ---------------------------------------------------------------------------- special cases
def test_not_differentiable_ops():
    for op_type in ("Shape", "ShapeN", "Size", "Rank", "ZerosLike", "OnesLike", "Range",
                    "InvertPermutation", "BroadcastGradientArgs", "ConcatOffset", "StopGradient",
                    "RandomStandardNormal", "RandomUniform", "TruncatedNormal", "RandomUniformInt",
                    "RandomShuffle", "Multinomial"):
        assert gradient_status(op_type) == "not_differentiable", op_type
    x = kf.placeholder(kf.float64, [3])
    y = kf.reduce_sum(kf.stop_gradient(x) * x) + kf.reduce_sum(kf.random_shuffle(x))
    g, = kf.gradients(y, [x])
    np.testing.assert_allclose(_run(g, {x: [1., 2., 3.]}), [1., 2., 3.])
    assert kf.gradients(kf.reduce_sum(kf.stop_gradient(x)), [x]) == [None]


def test_one_hot_values_and_fill_value():
    on = kf.placeholder(kf.float64, [])
    v = kf.placeholder(kf.float64, [])
    y = kf.reduce_sum(kf.one_hot([0, 2], 3, on_value=on, off_value=kf.constant(0., kf.float64)))
    assert kf.gradients(y, [on]) == [None]
    g, = kf.gradients(kf.reduce_sum(kf.fill([2, 3], v) * 2.0), [v])
    assert g.shape.as_list() == []
    assert _run(g, {v: 1.0}) == 12.0


def test_identity_n_and_partial_split_gradients():
    x = kf.placeholder(kf.float64, [2, 4])
    a, b = kf.identity_n([x, x * 2.0])
    parts = kf.split(a, 2, axis=1)
    g, = kf.gradients(kf.reduce_sum(parts[1]) + kf.reduce_sum(b), [x])
    np.testing.assert_allclose(_run(g, {x: np.zeros((2, 4))}), [[2, 2, 3, 3], [2, 2, 3, 3]])


def test_transpose_with_run_time_permutation():
    x = kf.placeholder(kf.float64, [2, 3, 4])
    p = kf.placeholder(kf.int32, [3])
    w = kf.reshape(kf.range(4, dtype=kf.float64), [4, 1, 1])
    g, = kf.gradients(kf.reduce_sum(kf.transpose(x, p) * w), [x])
    assert g.op.inputs[1].op.type == "InvertPermutation"
    out = _run(g, {x: np.zeros((2, 3, 4)), p: [2, 0, 1]})
    np.testing.assert_allclose(out, np.broadcast_to(np.arange(4.0), (2, 3, 4)))


def test_gather_with_negative_batch_dims_needs_known_index_rank():
    x = kf.placeholder(kf.float64, [2, 3])
    i = kf.placeholder(kf.int32, [2, 2])
    y = kf.gather(x, i, axis=1, batch_dims=-1)
    g, = kf.gradients(kf.reduce_sum(y), [x])
    np.testing.assert_allclose(_run(g, {x: np.zeros((2, 3)), i: [[0, 0], [2, 1]]}),
                               [[2, 0, 0], [0, 1, 1]])


# ---------------------------------------------------------------------------- apply_op: empty lists
def test_empty_list_for_an_index_input_becomes_int32():
    x = kf.constant([[5.0]])
    r = kf.reshape(x, [])
    assert r.op.inputs[1].dtype == kf.int32 and r.shape.as_list() == []
    assert _run(r) == 5.0
    # The attr's default (Tidx = int32), also through apply_op directly.
    for op_type, args in (("Reshape", [x, []]), ("ReverseV2", [kf.constant([1.0]), []]),
                          ("Transpose", [kf.constant(2.0), []]), ("Sum", [x, []])):
        op = apply_op(op_type, args)
        assert op.inputs[1].dtype == kf.int32, op_type
    assert apply_op("Reshape", [x, ()]).inputs[1].dtype == kf.int32
    # No default: the first integer type allowed (Tindices: {int32, int64}).
    g = apply_op("GatherV2", [kf.constant([1.0, 2.0]), [], 0]).outputs[0]
    assert g.op.inputs[1].dtype == kf.int32 and _run(g).shape == (0,)
    # An explicit attr, a tensor elsewhere fixing the type, and type attrs allowing float32 win.
    assert apply_op("Reshape", [x, []], {"Tshape": kf.int64}).inputs[1].dtype == kf.int64
    assert apply_op("AddV2", [[], []]).outputs[0].dtype == kf.float32
    assert apply_op("AddV2", [[], kf.constant([], kf.float64)]).outputs[0].dtype == kf.float64
