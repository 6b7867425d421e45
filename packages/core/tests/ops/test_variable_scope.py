"""TF1 `variable_scope` / `get_variable`: naming, reuse, defaults, regularizers, custom getters."""

import threading

import numpy as np
import pytest

import kernflow.core as kf


@pytest.fixture
def g():
    graph = kf.Graph()
    with graph.as_default():
        yield graph


def _values(graph, fetches):
    with kf.Session(graph=graph) as sess:
        sess.run(kf.global_variables_initializer())
        return sess.run(fetches)


# ---------------------------------------------------------------------------- names
def test_root_scope(g):
    root = kf.get_variable_scope()
    assert isinstance(root, kf.VariableScope)
    assert root.name == "" and root.reuse is False and root.original_name_scope == ""
    assert root.dtype == kf.float32 and root.initializer is None
    v = kf.get_variable("v", [2])
    assert v.name == "v:0" and v.op.name == "v" and isinstance(v, kf.Variable)


def test_variable_and_op_names_in_nested_scopes(g):
    with kf.variable_scope("foo") as foo:
        with kf.variable_scope("bar") as bar:
            w = kf.get_variable("w", [3, 4])
            c = kf.constant(1.0)
    assert foo.name == "foo" and foo.original_name_scope == "foo/"
    assert bar.name == "foo/bar" and bar.original_name_scope == "foo/bar/"
    assert w.name == "foo/bar/w:0" and w.shape.as_list() == [3, 4] and w.dtype.base_dtype == kf.float32
    assert c.name == "foo/bar/Const:0"
    names = [op.name for op in g.get_operations()]
    assert "foo/bar/w" in names and "foo/bar/w/Assign" in names and "foo/bar/w/read" in names
    assert any(n.startswith("foo/bar/w/Initializer/random_uniform") for n in names)
    assert w in kf.global_variables() and w in kf.trainable_variables()


def test_variable_names_ignore_the_enclosing_name_scope(g):
    with kf.name_scope("outer"):
        with kf.variable_scope("vs"):
            w = kf.get_variable("w", [1])
            c = kf.constant(0)
    assert w.op.name == "vs/w"
    assert c.op.name == "outer/vs/Const"


def test_reentering_a_name_gives_a_unique_name_scope_but_same_variables(g):
    with kf.variable_scope("foo") as s1:
        w1 = kf.get_variable("w", [2])
        c1 = kf.constant(1)
    with kf.variable_scope("foo", reuse=True) as s2:
        w2 = kf.get_variable("w", [2])
        c2 = kf.constant(1)
    assert w1 is w2
    assert s1.name == s2.name == "foo"
    assert c1.op.name == "foo/Const" and c2.op.name == "foo_1/Const"
    assert s2.original_name_scope == "foo_1/"


def test_reentering_by_scope_object(g):
    with kf.variable_scope("foo") as foo:
        w = kf.get_variable("w", [2])
    with kf.variable_scope("other"):
        with kf.variable_scope(foo, reuse=True) as again:
            assert again.name == "foo"
            assert again.original_name_scope == "foo/"
            assert kf.get_variable("w", [2]) is w
            c = kf.constant(1)
        assert kf.get_variable_scope().name == "other"
    # The ops land in a fresh name scope under the current one.
    assert c.op.name == "other/foo/Const"
    with kf.variable_scope(foo):
        u = kf.get_variable("u", [1])
    assert u.op.name == "foo/u"


def test_default_name_uniquification(g):
    names = []
    for _ in range(3):
        with kf.variable_scope(None, default_name="dense") as s:
            names.append((s.name, kf.get_variable("kernel", [2]).op.name, kf.constant(0).op.name))
    assert names == [("dense", "dense/kernel", "dense/Const"),
                     ("dense_1", "dense_1/kernel", "dense_1/Const"),
                     ("dense_2", "dense_2/kernel", "dense_2/Const")]
    # name_or_scope wins over default_name.
    with kf.variable_scope("given", default_name="dense") as s:
        assert s.name == "given"


def test_default_name_counts_are_per_parent_scope(g):
    with kf.variable_scope("a"):
        with kf.variable_scope(None, default_name="d") as d0:
            pass
        with kf.variable_scope(None, default_name="d") as d1:
            pass
    with kf.variable_scope("b"):
        with kf.variable_scope(None, default_name="d") as d2:
            pass
    assert (d0.name, d1.name, d2.name) == ("a/d", "a/d_1", "b/d")
    # Leaving "a" resets the counts of its sub-scopes, as in TF.
    with kf.variable_scope("a"):
        with kf.variable_scope(None, default_name="d") as d3:
            pass
    assert d3.name == "a/d"


def test_auxiliary_name_scope_false(g):
    with kf.name_scope("ns"):
        with kf.variable_scope("vs", auxiliary_name_scope=False) as vs:
            c = kf.constant(1)
            w = kf.get_variable("w", [1])
    assert vs.name == "vs" and vs.original_name_scope == "ns/"
    assert c.op.name == "ns/Const" and w.op.name == "vs/w"
    with kf.variable_scope("top", auxiliary_name_scope=False):
        assert kf.constant(1).op.name == "Const"


def test_variable_scope_uses_the_graph_of_values():
    g1, g2 = kf.Graph(), kf.Graph()
    with g2.as_default():
        x = kf.constant(1.0)
    with g1.as_default():
        with kf.variable_scope("s", values=[x]):
            w = kf.get_variable("w", [1])
            assert kf.get_default_graph() is g2
    assert w.graph is g2 and not g1.get_operations()


# ---------------------------------------------------------------------------- reuse
def test_creating_an_existing_variable_without_reuse_fails(g):
    with kf.variable_scope("foo"):
        kf.get_variable("w", [3, 4])
    with pytest.raises(ValueError) as e:
        with kf.variable_scope("foo"):
            kf.get_variable("w", [3, 4])
    assert str(e.value).startswith(
        "Variable foo/w already exists, disallowed. Did you mean to set reuse=True or "
        "reuse=tf.AUTO_REUSE in VarScope?")


def test_reusing_a_missing_variable_fails(g):
    with pytest.raises(ValueError) as e:
        with kf.variable_scope("foo", reuse=True):
            kf.get_variable("w", [3, 4])
    assert str(e.value) == ("Variable foo/w does not exist, or was not created with "
                            "tf.get_variable(). Did you mean to set reuse=tf.AUTO_REUSE in VarScope?")


def test_reuse_shape_and_dtype_checks(g):
    with kf.variable_scope("foo"):
        kf.get_variable("w", [3, 5])
    with kf.variable_scope("foo", reuse=True):
        with pytest.raises(ValueError) as e:
            kf.get_variable("w", [3, 4])
        assert str(e.value) == ("Trying to share variable foo/w, but specified shape (3, 4) and "
                                "found shape (3, 5).")
        with pytest.raises(ValueError, match="Trying to share variable foo/w, but specified dtype "
                                             "int32 and found dtype float32"):
            kf.get_variable("w", [3, 5], dtype=kf.int32)
        # Unknown or partially known shapes are compatible.
        assert kf.get_variable("w").op.name == "foo/w"
        assert kf.get_variable("w", [None, 5]).op.name == "foo/w"


def test_auto_reuse(g):
    def build():
        with kf.variable_scope("net", reuse=kf.AUTO_REUSE):
            return kf.get_variable("w", [2]), kf.get_variable("b", [1])
    a = build()
    b = build()
    assert a[0] is b[0] and a[1] is b[1]
    assert len(kf.global_variables()) == 2


def test_reuse_is_inherited_and_cannot_be_turned_off(g):
    with kf.variable_scope("foo"):
        with kf.variable_scope("bar"):
            w = kf.get_variable("w", [1])
    with kf.variable_scope("foo", reuse=True) as foo:
        assert foo.reuse is True
        with kf.variable_scope("bar", reuse=False) as bar:
            assert bar.reuse is True
            assert kf.get_variable("w", [1]) is w
    with kf.variable_scope("auto", reuse=kf.AUTO_REUSE):
        with kf.variable_scope("inner") as inner:
            assert inner.reuse is kf.AUTO_REUSE


def test_reuse_variables(g):
    with kf.variable_scope("foo") as scope:
        w = kf.get_variable("w", [2])
        assert scope.reuse is False
        scope.reuse_variables()
        assert scope.reuse is True and kf.get_variable_scope().reuse is True
        assert kf.get_variable("w", [2]) is w
        with kf.variable_scope("sub") as sub:
            assert sub.reuse is True
    assert kf.get_variable_scope().reuse is False


def test_variable_scope_argument_errors(g):
    with pytest.raises(TypeError, match="If default_name is None then name_or_scope is required"):
        kf.variable_scope(None)
    with pytest.raises(ValueError, match="The reuse parameter must be True or False or None"):
        kf.variable_scope("x", reuse="yes")
    with pytest.raises(TypeError, match="name_or_scope must be a string or VariableScope"):
        kf.variable_scope(3)
    with pytest.raises(TypeError, match="auxiliary_name_scope must be `True` or `False`"):
        kf.variable_scope("x", auxiliary_name_scope=None)
    with pytest.raises(ValueError, match="reuse=True cannot be used without a name_or_scope"):
        with kf.variable_scope(None, default_name="d", reuse=True):
            pass
    # A failed entry leaves the scopes as they were.
    assert kf.get_variable_scope().name == "" and kf.get_default_graph().get_name_scope() == ""


def test_scope_restored_after_exception(g):
    with pytest.raises(RuntimeError):
        with kf.variable_scope("foo"):
            raise RuntimeError("boom")
    assert kf.get_variable_scope().name == ""
    assert kf.constant(1).op.name == "Const"


# ---------------------------------------------------------------------------- initializers / dtypes
def test_default_initializers(g):
    with kf.variable_scope("d"):
        f = kf.get_variable("f", [20, 30])
        i = kf.get_variable("i", [3], dtype=kf.int32)
        b = kf.get_variable("b", [2], dtype=kf.bool)
    vf, vi, vb = _values(g, [f, i, b])
    limit = np.sqrt(6.0 / 50)
    assert np.abs(vf).max() <= limit and np.abs(vf).max() > 0.8 * limit
    np.testing.assert_array_equal(vi, [0, 0, 0])
    assert vi.dtype == np.int32 and vb.tolist() == [False, False]
    assert any(op.type == "RandomUniform" and op.name.startswith("d/f/Initializer/")
               for op in g.get_operations())
    assert g.get_operation_by_name("d/i/Initializer/zeros").type == "Const"


def test_initializer_objects_classes_and_values(g):
    a = kf.get_variable("a", [2, 2], initializer=kf.constant_initializer([[1, 2], [3, 4]]))
    b = kf.get_variable("b", [3], initializer=kf.ones_initializer)  # a class works too
    c = kf.get_variable("c", initializer=np.arange(6, dtype=np.float64).reshape(2, 3))
    d = kf.get_variable("d", initializer=kf.constant([7, 8], dtype=kf.int64))
    e = kf.get_variable("e", initializer=[1.5, 2.5])
    assert c.shape.as_list() == [2, 3] and c.dtype.base_dtype == kf.float64
    assert d.shape.as_list() == [2] and d.dtype.base_dtype == kf.int64
    assert e.dtype.base_dtype == kf.float32
    va, vb, vc, vd, ve = _values(g, [a, b, c, d, e])
    np.testing.assert_array_equal(va, [[1, 2], [3, 4]])
    np.testing.assert_array_equal(vb, [1, 1, 1])
    np.testing.assert_array_equal(vc, np.arange(6).reshape(2, 3))
    np.testing.assert_array_equal(vd, [7, 8])
    np.testing.assert_array_equal(ve, [1.5, 2.5])


def test_initializer_value_errors(g):
    with pytest.raises(ValueError, match="If initializer is a constant, do not specify shape."):
        kf.get_variable("x", [2], initializer=np.zeros(2, np.float32))
    with pytest.raises(ValueError, match="Initializer type .* and explicit dtype .* don't match"):
        kf.get_variable("y", dtype=kf.float32, initializer=np.zeros(2, np.int32))
    with pytest.raises(ValueError, match=r"Shape of a new variable \(z\) must be fully defined"):
        kf.get_variable("z", [None, 3])
    with pytest.raises(ValueError, match=r"Shape of a new variable \(z\) must be fully defined"):
        kf.get_variable("z")


def test_zero_argument_callable_initializer_without_shape(g):
    v = kf.get_variable("v", initializer=lambda: kf.constant([[1.0, 2.0]]), dtype=kf.float32)
    assert v.shape.as_list() == [1, 2]
    np.testing.assert_array_equal(_values(g, v), [[1.0, 2.0]])


def test_initializer_receives_shape_dtype_and_partition_info(g):
    calls = []

    def init(shape, dtype=None, partition_info=None):
        calls.append((shape, dtype, partition_info))
        return kf.zeros(shape, dtype)

    def init_no_pi(shape, dtype=None):
        calls.append((shape, dtype))
        return kf.ones(shape, dtype)

    kf.get_variable("p", [2, 3], dtype=kf.float64, initializer=init)
    kf.get_variable("q", [4], initializer=init_no_pi)
    assert calls == [([2, 3], kf.float64, None), ([4], kf.float32)]


def test_scope_initializer_and_dtype_are_inherited(g):
    with kf.variable_scope("s", initializer=kf.constant_initializer(3.0), dtype=kf.float64) as s:
        assert s.dtype == kf.float64
        with kf.variable_scope("inner"):
            a = kf.get_variable("a", [2])
            b = kf.get_variable("b", [2], initializer=kf.zeros_initializer())
        s.set_initializer(kf.ones_initializer())
        c = kf.get_variable("c", [1])
    assert a.dtype.base_dtype == kf.float64
    va, vb, vc = _values(g, [a, b, c])
    np.testing.assert_array_equal(va, [3.0, 3.0])
    np.testing.assert_array_equal(vb, [0.0, 0.0])
    np.testing.assert_array_equal(vc, [1.0])
    assert kf.get_variable_scope().initializer is None


def test_seeded_get_variable_is_deterministic():
    def build():
        graph = kf.Graph()
        with graph.as_default():
            kf.set_random_seed(12)
            with kf.variable_scope("m"):
                w = kf.get_variable("w", [4, 5])
                u = kf.get_variable("u", [4, 5], initializer=kf.random_normal_initializer(seed=3))
        return _values(graph, [w, u])
    (w1, u1), (w2, u2) = build(), build()
    np.testing.assert_array_equal(w1, w2)
    np.testing.assert_array_equal(u1, u2)
    assert not np.array_equal(w1, u1)


# ---------------------------------------------------------------------------- collections / store
def test_trainable_collections_and_local_variables(g):
    with kf.variable_scope("c"):
        t = kf.get_variable("t", [1])
        n = kf.get_variable("n", [1], trainable=False)
        m = kf.get_variable("m", [1], collections=["mine", kf.GraphKeys.GLOBAL_VARIABLES])
        lv = kf.get_local_variable("l", [1])
    assert kf.trainable_variables() == [t, m]
    assert n in kf.global_variables() and n not in kf.trainable_variables()
    assert kf.get_collection("mine") == [m]
    assert kf.local_variables() == [lv] and lv not in kf.global_variables()
    assert not lv.trainable and lv.op.name == "c/l"


def test_scope_collection_helpers(g):
    with kf.variable_scope("a") as a:
        wa = kf.get_variable("w", [1])
        la = kf.get_local_variable("loc", [1])
    with kf.variable_scope("ab"):
        kf.get_variable("w", [1])
    assert a.trainable_variables() == [wa]
    assert a.global_variables() == [wa]
    assert a.local_variables() == [la]
    assert a.get_collection(kf.GraphKeys.GLOBAL_VARIABLES) == [wa]


def test_store_is_per_graph():
    g1, g2 = kf.Graph(), kf.Graph()
    with g1.as_default():
        w1 = kf.get_variable("w", [1])
    with g2.as_default():
        w2 = kf.get_variable("w", [2])
        with kf.variable_scope("", reuse=True):
            assert kf.get_variable("w") is w2
    assert w1 is not w2 and w1.graph is g1 and w2.graph is g2
    assert g1._kf_var_store is not g2._kf_var_store


def test_scope_stack_is_per_thread(g):
    seen = []

    def worker():
        with g.as_default():
            seen.append(kf.get_variable_scope().name)

    with kf.variable_scope("main_thread"):
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        assert kf.get_variable_scope().name == "main_thread"
    assert seen == [""]


def test_variables_ignore_outer_control_dependencies(g):
    c = kf.constant(1.0)
    with kf.control_dependencies([c.op]):
        w = kf.get_variable("w", [1])
    created = [op for op in g.get_operations() if op.name.startswith("w")]
    assert created and all(op.control_inputs == [] for op in created)
    with kf.control_dependencies([c.op]):
        d = kf.constant(2.0)
    assert d.op.control_inputs == [c.op]


def test_synchronization_and_aggregation(g):
    v = kf.get_variable("v", [1], synchronization=kf.VariableSynchronization.ON_READ,
                        aggregation=kf.VariableAggregation.SUM)
    assert not v.trainable
    with pytest.raises(ValueError, match="ON_READ only for non-trainable variables"):
        kf.get_variable("w", [1], trainable=True,
                        synchronization=kf.VariableSynchronization.ON_READ)
    with pytest.raises(ValueError, match="Invalid variable aggregation mode"):
        kf.get_variable("x", [1], aggregation="sum")


def test_partitioner_makes_a_partitioned_variable(g):
    # Partitioned variables are tested in test_partitioned_variables.py.
    p = kf.get_variable("p", [10, 2], partitioner=lambda shape, dtype: [2, 1])
    assert isinstance(p, kf.PartitionedVariable) and len(p) == 2


# ---------------------------------------------------------------------------- regularizers
def test_regularizer_adds_loss(g):
    with kf.variable_scope("foo"):
        w = kf.get_variable("w", initializer=[[1.0, 2.0], [3.0, 4.0]],
                            regularizer=lambda v: kf.reduce_sum(kf.square(v)))
    losses = kf.get_collection(kf.GraphKeys.REGULARIZATION_LOSSES)
    assert len(losses) == 1
    assert losses[0].op.name.startswith("foo/w/Regularizer/")
    assert _values(g, losses[0]) == pytest.approx(30.0)
    # Reuse does not add the loss again.
    with kf.variable_scope("foo", reuse=True):
        assert kf.get_variable("w", regularizer=lambda v: kf.reduce_sum(v)) is w
    assert len(kf.get_collection(kf.GraphKeys.REGULARIZATION_LOSSES)) == 1


def test_scope_regularizer_and_no_regularizer(g):
    with kf.variable_scope("r", regularizer=lambda v: kf.reduce_sum(v)) as r:
        assert r.regularizer is not None
        kf.get_variable("a", [2], initializer=kf.ones_initializer())
        kf.get_variable("b", [2], regularizer=kf.no_regularizer)
        r.set_regularizer(None)
        kf.get_variable("c", [2])
    losses = kf.get_collection(kf.GraphKeys.REGULARIZATION_LOSSES)
    assert [l.op.name.split("/")[1] for l in losses] == ["a"]
    assert _values(g, losses[0]) == pytest.approx(2.0)


# ---------------------------------------------------------------------------- custom getters
def test_custom_getter_wraps_creation(g):
    seen = []

    def getter(getter, name, *args, **kwargs):
        seen.append((name, kwargs["shape"]))
        kwargs["trainable"] = False
        return getter(name, *args, **kwargs)

    with kf.variable_scope("cg", custom_getter=getter) as scope:
        assert scope.custom_getter is getter
        v = kf.get_variable("v", [3])
    assert seen == [("cg/v", [3])] and not v.trainable and v.op.name == "cg/v"
    w = kf.get_variable("w", [1], custom_getter=getter)
    assert seen[-1] == ("w", [1])
    assert w.op.name == "w"


def test_nested_custom_getters_chain_inner_first(g):
    order = []

    def make(tag):
        def getter(getter, *args, **kwargs):
            order.append(tag)
            return getter(*args, **kwargs)
        return getter

    with kf.variable_scope("outer", custom_getter=make("outer")):
        with kf.variable_scope("inner", custom_getter=make("inner")):
            v = kf.get_variable("v", [1])
    assert order == ["inner", "outer"] and v.op.name == "outer/inner/v"


def test_custom_getter_can_return_a_transformed_value(g):
    def doubling(getter, *args, **kwargs):
        return getter(*args, **kwargs) * 2.0

    with kf.variable_scope("t", custom_getter=doubling):
        y = kf.get_variable("v", initializer=[1.0, 2.0])
    np.testing.assert_array_equal(_values(g, y), [2.0, 4.0])
    with pytest.raises(ValueError, match="custom_getter which is not callable"):
        kf.get_variable("z", [1], custom_getter=3)


# ---------------------------------------------------------------------------- misc
def test_variable_op_scope(g):
    x = kf.constant(1.0)
    with kf.variable_op_scope([x], None, default_name="op") as s:
        assert s.name == "op"
        v = kf.get_variable("v", [1])
    assert v.op.name == "op/v"


def test_trained_variables_share_state(g):
    def model(x):
        with kf.variable_scope("lin", reuse=kf.AUTO_REUSE):
            w = kf.get_variable("w", initializer=[[2.0]])
            return kf.matmul(x, w)
    y1 = model(kf.constant([[1.0]]))
    y2 = model(kf.constant([[3.0]]))
    w = kf.trainable_variables()[0]
    with kf.Session(graph=g) as sess:
        sess.run(kf.global_variables_initializer())
        sess.run(w.assign([[5.0]]))
        np.testing.assert_array_equal(sess.run([y1, y2]), [[[5.0]], [[15.0]]])
