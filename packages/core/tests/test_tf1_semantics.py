"""TF1 semantics that tutorials rely on (issue 15): int shapes, control deps on fed placeholders."""

from __future__ import annotations

import pytest

import kernflow.core as kf
from kernflow.core.framework import tensor_shape as ts
from kernflow.core.testing.processes import have_distributed

needs_dist = pytest.mark.skipif(not have_distributed(), reason="kernflow-client/master/worker not installed")


# ---------------------------------------------------------------------------- int as a 1-D shape
def test_tensor_shape_from_int_is_one_dimensional():
    assert ts.TensorShape(100).as_list() == [100]
    assert ts.as_shape(7) == ts.TensorShape([7])
    assert ts.TensorShape(ts.Dimension(3)).as_list() == [3]
    assert ts.TensorShape(ts.Dimension(None)).as_list() == [None]
    assert ts.TensorShape(0).as_list() == [0]


def test_tensor_shape_rejects_non_dimension_scalars():
    with pytest.raises(TypeError):
        ts.TensorShape(1.5)
    with pytest.raises(TypeError):
        ts.TensorShape("100")
    with pytest.raises(ValueError):
        ts.TensorShape(-1)


def test_placeholder_with_int_shape():
    with kf.Graph().as_default():
        x = kf.placeholder(kf.int32, shape=(100))
        assert x.get_shape().as_list() == [100]
        assert x.shape.rank == 1


# ------------------------------------------------------------------- control dep on a fed placeholder
def _control_dep_on_placeholder_graph():
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, name="x")
        with kf.control_dependencies([x]):
            y = kf.constant(1.0, name="y")
            z = kf.identity(x) + 1.0
    return g, x, y, z


def test_control_dependency_on_fed_placeholder_is_satisfied_by_the_feed():
    g, x, y, z = _control_dep_on_placeholder_graph()
    with kf.Session(graph=g) as sess:
        assert sess.run(y, {x: 2.0}) == 1.0
        assert sess.run([y, z], {x: 2.0}) == [1.0, 3.0]


def test_control_dependency_on_unfed_placeholder_still_requires_a_feed():
    g, x, y, _ = _control_dep_on_placeholder_graph()
    with kf.Session(graph=g) as sess:
        with pytest.raises(kf.errors.InvalidArgumentError, match="You must feed a value for placeholder"):
            sess.run(y)


@needs_dist
def test_control_dependency_on_fed_placeholder_distributed():
    server = kf.train.Server.create_local_server()
    try:
        g, x, y, z = _control_dep_on_placeholder_graph()
        with kf.Session(server.target, graph=g) as sess:
            assert sess.run(y, {x: 2.0}) == 1.0
            assert sess.run([y, z], {x: 2.0}) == [1.0, 3.0]
    finally:
        server.stop()


# ---------------------------------------------------------------------------- Dimension from a shape
def test_shape_indexing_gives_dimensions():
    with kf.Graph().as_default():
        x = kf.placeholder(kf.float32, shape=[None, 784])
        assert x.get_shape()[1].value == 784
        assert x.get_shape()[0].value is None
        assert isinstance(x.shape[1], ts.Dimension)
        assert x.shape[1] == 784 and x.shape[1] != 10
        assert (x.shape[0] == 3) is None
        assert x.shape.as_list() == [None, 784]
        assert x.shape[1:] == ts.TensorShape([784])
        dims = x.shape.dims
        assert isinstance(dims, list) and all(isinstance(d, ts.Dimension) for d in dims)
        assert [d.value for d in dims] == [None, 784]


def test_dimension_arithmetic_and_conversions():
    d = ts.TensorShape([3, None])[0]
    assert repr(d) == "Dimension(3)" and str(d) == "3"
    assert str(ts.TensorShape([3, None])[1]) == "?"
    assert (d + 1) == 4 and (1 + d) == 4 and (d * ts.Dimension(2)) == 6
    assert (d - 1) == 2 and (7 - d) == 4 and (d // 2) == 1 and (7 % d) == 1
    assert (d + ts.Dimension(None)).value is None
    assert int(d) == 3 and list(range(d)) == [0, 1, 2] and [10, 11, 12, 13][d] == 13
    assert hash(d) == hash(3) and {d: "x"}[ts.Dimension(3)] == "x"
    assert d < 4 and d >= 3 and (ts.Dimension(None) < 4) is None
    assert d.merge_with(None) == 3 and d.is_compatible_with(ts.Dimension(None))
    assert ts.dimension_value(d) == 3 and ts.dimension_value(ts.Dimension(None)) is None
    assert ts.dimension_value(5) == 5


def test_tf1_idioms_with_dimensions_build_graphs():
    with kf.Graph().as_default():
        x = kf.placeholder(kf.float32, shape=[None, 4])
        w = kf.Variable(kf.zeros([x.get_shape()[1], 3]))
        b = kf.Variable(kf.zeros([w.shape[1].value]))
        y = kf.reshape(kf.matmul(x, w) + b, [-1, w.get_shape()[1] * 1])
        assert y.get_shape().as_list() == [None, 3]
        with kf.Session() as sess:
            sess.run(kf.global_variables_initializer())
            assert sess.run(y, {x: [[1.0, 2.0, 3.0, 4.0]]}).shape == (1, 3)


def test_unknown_dimension_does_not_convert_to_a_tensor():
    with kf.Graph().as_default():
        x = kf.placeholder(kf.float32, shape=[None, 4])
        with pytest.raises(ValueError, match="unknown Dimension"):
            kf.constant([x.shape[0], 4])
        with pytest.raises(ValueError, match="not fully defined"):
            kf.zeros([x.shape[0], 4])


def test_a_variable_made_inside_a_while_loop_lives_in_the_root_frame():
    # TF1's init_scope (used for every variable) leaves the loop being built: the variable and
    # its initializer are ordinary root-frame ops, initialized with the rest.
    import kernflow.core as kf
    with kf.Graph().as_default():
        r = kf.while_loop(lambda i: i < 3,
                          lambda i: i + kf.get_variable("v", [], initializer=kf.ones_initializer()) + 1,
                          [kf.constant(0.)])
        kf.Variable(1.0, name="w")
        with kf.Session() as sess:
            sess.run(kf.global_variables_initializer())
            assert sess.run(r) == 4.0      # 0 -> 2 -> 4
