"""Graph construction: names, scopes, control deps, devices, colocation, collections, GraphDef."""

import numpy as np
import pytest

import kernflow.core as kf


@pytest.fixture
def g():
    graph = kf.Graph()
    with graph.as_default():
        yield graph


def test_unique_names_follow_tf(g):
    a = kf.constant(1.0)
    b = kf.constant(2.0)
    assert (a.op.name, b.op.name) == ("Const", "Const_1")
    s1, s2 = a + b, a + b
    assert (s1.op.name, s2.op.name) == ("add", "add_1")
    assert s1.name == "add:0"
    assert s1.op.type == "AddV2"


def test_name_scopes_nest_and_reset(g):
    with kf.name_scope("outer") as scope:
        assert scope == "outer/"
        c = kf.constant(1.0, name="c")
        with kf.name_scope("inner"):
            d = kf.constant(1.0, name="d")
        with kf.name_scope(None):
            e = kf.constant(1.0, name="e")
    with kf.name_scope("outer"):
        f = kf.constant(1.0, name="f")
    with kf.name_scope("outer/"):
        h = kf.constant(1.0, name="h")
    assert [t.op.name for t in (c, d, e, f, h)] == ["outer/c", "outer/inner/d", "e", "outer_1/f", "outer/h"]


def test_tensor_properties(g):
    x = kf.placeholder(kf.float32, [None, 3], name="x")
    assert x.dtype == kf.float32 and x.shape.as_list() == [None, 3]
    assert x.name == "x:0" and x.value_index == 0 and x.graph is g
    y = x + 1.0
    assert x.consumers() == [y.op]
    assert y.shape.as_list() == [None, 3]
    with pytest.raises(TypeError, match="bool"):
        bool(x)
    x.set_shape([5, 3])
    assert x.shape.as_list() == [5, 3]
    with pytest.raises(ValueError):
        x.set_shape([4, 3])


def test_control_dependencies(g):
    a = kf.constant(1.0)
    b = kf.constant(2.0)
    with kf.control_dependencies([a, b.op]):
        c = kf.constant(3.0)
        with kf.control_dependencies(None):
            d = kf.constant(4.0)
        with kf.control_dependencies([c]):
            e = kf.no_op()
    assert c.op.control_inputs == [a.op, b.op]
    assert d.op.control_inputs == []
    assert set(e.control_inputs) == {a.op, b.op, c.op}


def test_device_scopes_merge(g):
    with kf.device("/job:worker/task:1"):
        with kf.device("/cpu:0"):
            a = kf.constant(1.0)
        with kf.device(None):
            b = kf.constant(1.0)
        with kf.device(lambda op: "/device:CPU:3"):
            c = kf.constant(1.0)
    assert a.device == "/job:worker/task:1/device:CPU:0"
    assert b.device == ""
    assert c.device == "/job:worker/task:1/device:CPU:3"


def test_colocate_with(g):
    with kf.device("/cpu:1"):
        v = kf.Variable(1.0, name="v")
    with kf.colocate_with(v):
        a = kf.constant(2.0, name="a")
    assert a.op.get_attr("_class") == ["loc:@v"]
    assert a.device == v.device


def test_finalize(g):
    kf.constant(1.0)
    g.finalize()
    with pytest.raises(RuntimeError, match="finalized"):
        kf.constant(2.0)


def test_lookup_by_name(g):
    x = kf.constant(1.0, name="x")
    assert g.get_tensor_by_name("x:0") is x
    assert g.get_operation_by_name("x") is x.op
    with pytest.raises(KeyError):
        g.get_tensor_by_name("nope:0")
    with pytest.raises(KeyError, match="only has 1 outputs"):
        g.get_tensor_by_name("x:3")
    with pytest.raises(ValueError, match="Tensor names must be"):
        g.get_tensor_by_name("x")


def test_collections(g):
    v = kf.Variable(1.0)
    w = kf.Variable(2.0, trainable=False)
    assert kf.global_variables() == [v, w]
    assert kf.trainable_variables() == [v]
    kf.add_to_collection("mine", 3)
    assert kf.get_collection("mine") == [3]
    kf.get_collection_ref("mine").append(4)
    assert kf.get_collection("mine") == [3, 4]


def test_shape_errors_name_the_op(g):
    a = kf.constant(np.zeros([2, 3], np.float32))
    b = kf.constant(np.zeros([4], np.float32))
    with pytest.raises(ValueError, match=r"'add' \(op: 'AddV2'\)"):
        _ = a + b


def test_dtype_errors(g):
    a = kf.constant(1.0)
    b = kf.constant(1)
    with pytest.raises((TypeError, ValueError)):
        kf.add(a, b)


def test_graph_def_round_trip(g):
    x = kf.placeholder(kf.float32, [2], name="x")
    v = kf.Variable(np.array([1.0, 2.0], np.float32), name="v")
    y = kf.add(x, v, name="y")
    gd = g.as_graph_def()
    assert [n.name for n in gd.node][:2] == ["x", "v/initial_value"] or "x" in [n.name for n in gd.node]
    data = gd.SerializeToString()
    gd2 = kf.GraphDef.FromString(data)
    g2 = kf.Graph()
    with g2.as_default():
        y2, = kf.import_graph_def(gd2, return_elements=["y:0"], name="imp")
        assert y2.name == "imp/y:0"
        assert y2.shape.as_list() == [2]
        init = g2.get_operation_by_name("imp/v/Assign")
        with kf.Session() as sess:
            sess.run(init)
            out = sess.run(y2, {"imp/x:0": np.array([10.0, 20.0], np.float32)})
    np.testing.assert_allclose(out, [11.0, 22.0])


def test_import_graph_def_input_map(g):
    x = kf.placeholder(kf.float32, [], name="x")
    kf.add(x, 1.0, name="y")
    gd = g.as_graph_def()
    g2 = kf.Graph()
    with g2.as_default():
        c = kf.constant(5.0)
        y, = kf.import_graph_def(gd, input_map={"x:0": c}, return_elements=["y:0"])
        with kf.Session() as s:
            assert s.run(y) == 6.0
        with pytest.raises(ValueError, match="not found"):
            kf.import_graph_def(gd, input_map={"zz:0": c})
