"""Framework-level top-level names (kernflow.core.ops.misc_tf) and the kf.dtypes, kf.nest,
kf.debugging and kf.config namespaces. Expected values observed with TF 2.21's tf.compat.v1."""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core import config, debugging, dtypes_ns, nest_ns
from kernflow.core.framework import errors
from kernflow.core.ops import misc_tf as M


@pytest.fixture(autouse=True)
def _graph():
    with kf.Graph().as_default() as g:
        yield g


def _run(x, feed=None):
    with kf.Session() as s:
        s.run(kf.global_variables_initializer())
        return s.run(x, feed)


def test_top_level_names_are_exported():
    for n in M.__all__:
        assert getattr(kf, n) is getattr(M, n), n


def test_versions_and_constants():
    assert kf.VERSION.startswith("1.") and kf.version.VERSION == kf.VERSION
    assert kf.GRAPH_DEF_VERSION == kf.get_default_graph().as_graph_def().versions.producer
    assert (kf.version.GRAPH_DEF_VERSION_MIN_CONSUMER, kf.version.GRAPH_DEF_VERSION_MIN_PRODUCER) == (0, 0)
    assert kf.QUANTIZED_DTYPES == frozenset({kf.qint8, kf.quint8, kf.qint16, kf.quint16, kf.qint32,
                                             kf.qint8_ref, kf.quint8_ref, kf.qint16_ref,
                                             kf.quint16_ref, kf.qint32_ref})
    assert kf.OpError is errors.OpError and issubclass(errors.InvalidArgumentError, kf.OpError)
    assert kf.AttrValue(i=3).i == 3 and kf.NameAttrList(name="f").name == "f"
    assert kf.no_gradient is kf.NotDifferentiable


def test_tf2_switches():
    assert not kf.executing_eagerly() and not kf.executing_eagerly_outside_functions()
    assert not kf.control_flow_v2_enabled() and not kf.resource_variables_enabled()
    for fn in (kf.disable_eager_execution, kf.disable_v2_behavior, kf.disable_resource_variables,
               kf.disable_tensor_equality, kf.disable_v2_tensorshape, kf.disable_control_flow_v2):
        assert fn() is None
    assert kf.get_logger().name == "kernflow"


def test_get_seed_and_init_scope():
    assert kf.get_seed(None) == (None, None)
    kf.set_random_seed(1)
    assert kf.get_seed(3) == (1, 3)
    with kf.control_dependencies([kf.no_op()]):
        with kf.init_scope():
            assert kf.constant(1.0).op.control_inputs == []


def _dense(x):
    w = kf.get_variable("w", [2], initializer=kf.ones_initializer())
    return kf.add(x, w)


def test_make_template_shares_variables():
    t = kf.make_template("tmpl", _dense)
    a, b = t(kf.constant([1., 2.])), t(kf.constant([3., 4.]))
    assert [v.name for v in kf.global_variables()] == ["tmpl/w:0"]
    assert (t.name, t.variable_scope.name, t.variable_scope_name) == ("tmpl", "tmpl", "tmpl/")
    assert [v.name for v in t.trainable_variables] == ["tmpl/w:0"]
    t2 = kf.make_template("tmpl", _dense)
    t2(kf.constant([1., 1.]))
    assert [v.name for v in kf.global_variables()] == ["tmpl/w:0", "tmpl_1/w:0"]
    t3 = kf.make_template("t3", _dense, create_scope_now_=True)
    assert t3.variable_scope_name == "t3/"
    t3(kf.constant([0., 0.]))
    np.testing.assert_allclose(_run([a, b]), [[2., 3.], [4., 5.]])


def test_make_template_rejects_new_trainable_variables_later():
    t = kf.make_template("t4", lambda x: kf.Variable([1.0]) * x)
    t(1.0)
    with pytest.raises(ValueError, match="Trainable variable created when calling a template"):
        t(2.0)


def test_custom_gradient_replaces_the_gradient():
    @kf.custom_gradient
    def log1pexp(x):
        e = kf.exp(x)

        def grad(dy):
            return dy * (1 - 1 / (1 + e))
        return kf.log(1 + e), grad

    x = kf.constant(100.)
    y = log1pexp(x)
    g = kf.gradients(y, x)
    yv, gv = _run([y, g])
    assert np.isinf(yv) and gv == [1.0]          # as TF: the naive gradient would be NaN


def test_custom_gradient_two_inputs_and_list_outputs():
    @kf.custom_gradient
    def f(a, b):
        def grad(d1, d2):
            return 10. * d1, 20. * d2
        return [a * b, a + b], grad

    a, b = kf.constant(2.), kf.constant(3.)
    y1, y2 = f(a, b)
    np.testing.assert_allclose(_run(kf.gradients(y1 + 2. * y2, [a, b])), [10., 40.])
    np.testing.assert_allclose(_run([y1, y2]), [6., 5.])


def test_hessians_match_numpy():
    x = kf.constant([1., 2.])
    h = kf.hessians(kf.reduce_sum(x ** 3), x)
    assert h[0].shape.as_list() == [2, 2]
    np.testing.assert_allclose(_run(h)[0], np.diag(6 * np.array([1., 2.])))
    m = kf.constant([[1., 2.], [3., 4.]])
    h2 = kf.hessians(kf.reduce_sum(m * m), m)[0]
    assert h2.shape.as_list() == [2, 2, 2, 2]
    np.testing.assert_allclose(_run(h2).reshape(4, 4), 2 * np.eye(4))


def test_unconnected_gradients_enum():
    assert kf.UnconnectedGradients.ZERO.value == "zero" and len(list(kf.UnconnectedGradients)) == 2
    x, y = kf.constant(1.), kf.constant(2.)
    assert kf.gradients(y, x) == [None]
    assert _run(kf.gradients(y, x, unconnected_gradients=kf.UnconnectedGradients.ZERO)) == [0.0]


def test_collections_helpers():
    v = kf.Variable(1.0, name="mav")
    kf.add_to_collection(kf.GraphKeys.MOVING_AVERAGE_VARIABLES, v)
    assert kf.moving_average_variables() == [v]
    lv = kf.Variable(2.0, collections=[kf.GraphKeys.LOCAL_VARIABLES])
    with kf.Session() as s:
        s.run(kf.initialize_local_variables())
        assert s.run(lv) == 2.0


def test_numeric_checks():
    ph = kf.placeholder(kf.float32, [2])
    y = kf.verify_tensor_all_finite(ph, "bad value")
    d = debugging.assert_all_finite(ph, "bad too")
    with kf.Session() as s:
        np.testing.assert_array_equal(s.run(y, {ph: [1., 2.]}), [1., 2.])
        with pytest.raises(errors.InvalidArgumentError, match="bad value"):
            s.run(y, {ph: [1., np.nan]})
        with pytest.raises(errors.InvalidArgumentError, match="bad too"):
            s.run(d, {ph: [np.inf, 0.]})


def test_add_check_numerics_ops():
    ph = kf.placeholder(kf.float32, [2])
    out = kf.log(ph)
    check = kf.add_check_numerics_ops()
    with kf.Session() as s:
        s.run([out, check], {ph: [1., 2.]})
        with pytest.raises(errors.InvalidArgumentError):
            s.run([out, check], {ph: [1., -1.]})
    kf.cond(kf.constant(True), lambda: kf.constant(1.), lambda: kf.constant(2.))
    with pytest.raises(ValueError, match="control flow"):
        kf.add_check_numerics_ops()


def test_op_scope_and_container():
    with kf.op_scope([], "outer"):
        assert kf.constant(1).op.name == "outer/Const"
    with kf.container("abc"):
        v = kf.Variable(1.0)
        q = kf.FIFOQueue(2, kf.float32)
        with kf.container("inner"):
            w = kf.Variable(2.0)
    assert v.op.get_attr("container") == "abc" and q.queue_ref.op.get_attr("container") == "abc"
    assert w.op.get_attr("container") == "inner"
    assert kf.Variable(3.0).op.get_attr("container") == ""
    with kf.Session() as s:
        s.run(v.initializer)
        assert s.run(v) == 1.0


def test_switch_case():
    idx = kf.placeholder(kf.int32, [])
    r = kf.switch_case(idx, [lambda: kf.constant(10), lambda: kf.constant(20)],
                       default=lambda: kf.constant(-1))
    r2 = kf.switch_case(idx, {0: lambda: kf.constant(10), 1: lambda: kf.constant(20)})
    with kf.Session() as s:
        assert [s.run(r, {idx: i}) for i in (0, 1, 7)] == [10, 20, -1]
        assert [s.run(r2, {idx: i}) for i in (0, 1, 7)] == [10, 20, 20]   # no default: the last branch
    with pytest.raises(ValueError, match="contiguous"):
        kf.switch_case(idx, {0: lambda: kf.constant(1), 3: lambda: kf.constant(2)})


def test_tensor_helpers():
    c = kf.constant([1, 2])
    assert kf.get_static_value(c).tolist() == [1, 2]
    assert kf.get_static_value(kf.placeholder(kf.float32)) is None
    assert kf.is_symbolic_tensor(c) and not kf.is_symbolic_tensor(np.ones(2))
    s = kf.IndexedSlices(kf.constant([1.]), kf.constant([0]), kf.constant([3]))
    assert kf.convert_to_tensor_or_indexed_slices(s) is s
    with pytest.raises(ValueError):
        kf.convert_to_tensor_or_indexed_slices(s, dtype=kf.int32)
    assert kf.convert_to_tensor_or_indexed_slices([1., 2.]).dtype == kf.float32


def test_type_specs():
    s = kf.TensorSpec([2, None], kf.float32, name="x")
    assert (s.shape.as_list(), s.dtype, s.name) == ([2, None], kf.float32, "x")
    assert not s.is_compatible_with(kf.constant([[1., 2.]]))
    assert s.is_compatible_with(kf.TensorSpec([2, 3])) and s.is_compatible_with(np.zeros((2, 5), np.float32))
    assert s != kf.TensorSpec([2, None]) and s == kf.TensorSpec([2, None], name="x")
    assert repr(s) == "TensorSpec(shape=(2, None), dtype=kf.float32, name='x')"
    assert kf.type_spec_from_value(kf.constant([1, 2])) == kf.TensorSpec([2], kf.int32)
    sp = kf.SparseTensor([[0, 0]], [1], [2, 3])
    spec = kf.type_spec_from_value(sp)
    assert isinstance(spec, kf.SparseTensorSpec) and isinstance(spec, kf.TypeSpec)
    assert spec == kf.SparseTensorSpec([2, 3], kf.int32) and spec.is_compatible_with(sp)


def test_dtypes_namespace():
    assert dtypes_ns.as_dtype("float32") is kf.float32 and dtypes_ns.DType is kf.DType
    assert dtypes_ns.int64 is kf.int64 and dtypes_ns.string is kf.string
    x = kf.constant([1.7, 300.])
    got = _run([dtypes_ns.cast(x, kf.int32), dtypes_ns.saturate_cast(x, kf.uint8)])
    assert got[0].tolist() == [1, 300] and got[1].tolist() == [1, 255]


def test_nest_namespace():
    s = {"a": [1, 2], "b": (3,)}
    assert nest_ns.flatten(s) == [1, 2, 3]
    assert nest_ns.pack_sequence_as(s, [4, 5, 6]) == {"a": [4, 5], "b": (6,)}
    assert nest_ns.map_structure(lambda v: v * 2, s) == {"a": [2, 4], "b": (6,)}
    assert nest_ns.is_nested([1]) and not nest_ns.is_nested(1)
    with pytest.raises((ValueError, TypeError)):
        nest_ns.assert_same_structure([1, 2], [1])


def test_debugging_namespace():
    x = kf.constant([1., np.inf, np.nan])
    got = _run([debugging.is_finite(x), debugging.is_inf(x), debugging.is_nan(x),
                debugging.is_non_decreasing(kf.constant([1, 1, 2]))])
    assert [g.tolist() for g in got[:3]] == [[True, False, False], [False, True, False], [False, False, True]]
    assert got[3]
    assert debugging.is_numeric_tensor(x) and debugging.Assert is kf.Assert
    assert debugging.enable_check_numerics() is None and debugging.disable_check_numerics() is None
    with pytest.raises(errors.InvalidArgumentError):
        _run(debugging.assert_less(kf.constant(2), kf.constant(1)))


def test_config_namespace():
    phys = config.list_physical_devices("CPU")
    assert phys[0] == config.PhysicalDevice("/physical_device:CPU:0", "CPU")
    assert config.list_logical_devices("CPU")[0].name == "/device:CPU:0"
    assert all(d.device_type == "CPU" for d in phys) and config.list_physical_devices("TPU") == []
    with kf.Session() as s:
        names = [d.name for d in s.list_devices()]
    assert len(config.list_logical_devices()) == len(names)
    assert config.get_soft_device_placement() is False
    config.set_soft_device_placement(True)
    assert config.get_soft_device_placement() is True
    config.set_soft_device_placement(False)
    assert config.threading.get_inter_op_parallelism_threads() == 0
    config.threading.set_intra_op_parallelism_threads(2)
    assert config.threading.get_intra_op_parallelism_threads() == 2
    config.threading.set_intra_op_parallelism_threads(0)


def test_dtypes_complex():
    z = dtypes_ns.complex(kf.constant([1.]), kf.constant([2.]))
    assert z.dtype == kf.complex64 and _run(z).tolist() == [1 + 2j]


def test_custom_gradient_with_variables():
    v = kf.Variable(3.0)

    @kf.custom_gradient
    def f(x):
        def grad(dy, variables=None):
            return 100. * dy, [7. * dy for _ in variables]
        return x * v, grad

    x = kf.constant(2.)
    y = f(x)
    assert _run([y, kf.gradients(y, [x, v])]) == [6.0, [100.0, 7.0]]


def test_variable_creator_scope_wraps_variable_and_get_variable_innermost_first():
    seen = []

    def outer(next_creator, **kwargs):
        seen.append(("outer", kwargs["name"]))
        kwargs["trainable"] = False
        return next_creator(**kwargs)

    def inner(next_creator, **kwargs):
        seen.append(("inner", kwargs["name"]))
        return next_creator(**kwargs)

    with kf.Graph().as_default():
        with kf.variable_creator_scope(outer):
            with kf.variable_creator_scope(inner):
                v = kf.Variable(1.0, name="v")
                kf.get_variable("w", [2])
        u = kf.Variable(2.0, name="u")
        assert seen == [("inner", "v"), ("outer", "v"), ("inner", "w"), ("outer", "w")]
        assert [x.name for x in kf.trainable_variables()] == [u.name]
        assert isinstance(v, kf.Variable)
        with kf.Session() as s:
            s.run(kf.global_variables_initializer())
            assert s.run(v) == 1.0


def test_raise_exception_on_not_ok_status():
    with pytest.raises(kf.errors.NotFoundError, match="no such file"):
        with kf.errors.raise_exception_on_not_ok_status() as status:
            status.set(kf.errors.NOT_FOUND, "no such file")
    with kf.errors.raise_exception_on_not_ok_status() as status:   # OK: nothing raised
        assert status.code == kf.errors.OK
    with pytest.raises(ZeroDivisionError):   # the block's own exception passes through
        with kf.errors.raise_exception_on_not_ok_status():
            1 / 0


def test_namespace_aliases_of_tf1():
    assert kf.initializers.tables_initializer is kf.tables_initializer
    assert kf.math.approx_max_k is kf.nn.approx_max_k and kf.math.approx_min_k is kf.nn.approx_min_k
