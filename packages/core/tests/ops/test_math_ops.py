"""Python-level behaviour of the math op wrappers: names, dtypes, static shapes, errors."""

import warnings

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors
from kernflow.core.framework.op_def_library import apply_op


@pytest.fixture
def g():
    graph = kf.Graph()
    with graph.as_default():
        yield graph


def _run(fetches, feed=None, graph=None):
    with kf.Session(graph=graph or kf.get_default_graph()) as s:
        return s.run(fetches, feed)


# ---------------------------------------------------------------------------- operators
@pytest.mark.parametrize("fn,name,op_type", [
    (lambda x, y: x + y, "add", "AddV2"),
    (lambda x, y: x - y, "sub", "Sub"),
    (lambda x, y: x * y, "mul", "Mul"),
    (lambda x, y: x / y, "truediv", "RealDiv"),
    (lambda x, y: x // y, "floordiv", "FloorDiv"),
    (lambda x, y: x % y, "mod", "FloorMod"),
    (lambda x, y: x ** y, "pow", "Pow"),
    (lambda x, y: x @ y, "matmul", "MatMul"),
    (lambda x, y: x < y, "Less", "Less"),
    (lambda x, y: x <= y, "LessEqual", "LessEqual"),
    (lambda x, y: x > y, "Greater", "Greater"),
    (lambda x, y: x >= y, "GreaterEqual", "GreaterEqual"),
])
def test_binary_operator_names_and_types(g, fn, name, op_type):
    x = kf.placeholder(kf.float32, [2, 2])
    y = kf.placeholder(kf.float32, [2, 2])
    out = fn(x, y)
    assert out.op.name == name and out.op.type == op_type
    assert fn(x, y).op.name == name + "_1"


@pytest.mark.parametrize("fn,name,op_type", [
    (lambda x: -x, "Neg", "Neg"), (lambda x: abs(x), "Abs", "Abs")])
def test_unary_operator_names(g, fn, name, op_type):
    out = fn(kf.placeholder(kf.float32))
    assert (out.op.name, out.op.type) == (name, op_type)


def test_logical_operators(g):
    a, b = kf.placeholder(kf.bool, [2]), kf.placeholder(kf.bool, [2])
    ops = {"and": a & b, "or": a | b, "xor": a ^ b, "LogicalNot": ~a}
    assert {k: v.op.name for k, v in ops.items()} == {k: k for k in ops}
    assert ops["and"].op.type == "LogicalAnd" and ops["xor"].op.type == "LogicalAnd"
    assert g.get_operation_by_name("xor/LogicalOr").type == "LogicalOr"
    vals = _run(list(ops.values()), {a: [True, False], b: [True, True]})
    assert [v.tolist() for v in vals] == [[True, False], [True, True], [False, True], [False, True]]
    with pytest.raises(TypeError, match="bool"):
        kf.placeholder(kf.int32) & 1


def test_python_values_take_the_tensor_dtype(g):
    x = kf.placeholder(kf.float32, [3])
    y = x + 1
    assert y.dtype == kf.float32 and g.get_operation_by_name("add/y").type == "Const"
    z = 2 * x
    assert z.dtype == kf.float32 and g.get_operation_by_name("mul/x").type == "Const"
    w = np.arange(3) - x
    assert isinstance(w, kf.Tensor) and w.dtype == kf.float32 and w.op.type == "Sub"
    v = np.float64(2.0) * x
    assert isinstance(v, kf.Tensor) and v.dtype == kf.float32
    r = np.ones(3) < x
    assert isinstance(r, kf.Tensor) and r.op.type == "Greater"
    i = kf.placeholder(kf.int32, [3])
    with pytest.raises(TypeError):
        i + 1.5
    with pytest.raises(TypeError):
        x + i


def test_eq_and_ne_stay_identity(g):
    x = kf.placeholder(kf.float32)
    assert (x == x) is True and (x == 1) is False and (x != x) is False
    assert {x: 1}[x] == 1


def test_truediv_casts_integers_like_python3(g):
    a = kf.constant([7, -7], kf.int32)
    b = kf.constant([2, 2], kf.int16)
    q = a / 2
    assert q.dtype == kf.float64 and q.op.type == "RealDiv"
    assert g.get_operation_by_name("truediv/Cast").type == "Cast"
    assert (b / b).dtype == kf.float32
    np.testing.assert_allclose(_run(q), [3.5, -3.5])
    np.testing.assert_array_equal(_run(a // 2), [3, -4])
    np.testing.assert_array_equal(_run(a % 3), [1, 2])
    with pytest.raises(TypeError, match="Invalid dtype bool"):
        kf.constant([True]) / kf.constant([False])
    with pytest.raises(TypeError, match="same dtype"):
        kf.truediv(a, b)


def test_div_floors_ints_and_true_divides_floats(g):
    i = kf.div(kf.constant([7, -7]), 2)
    f = kf.div(kf.constant([7.0, -7.0]), 2.0)
    assert (i.op.name, i.op.type) == ("div", "FloorDiv")
    assert (f.op.name, f.op.type) == ("div_1", "RealDiv")
    assert _run(i).tolist() == [3, -4] and _run(f).tolist() == [3.5, -3.5]


def test_divide_and_realdiv_names(g):
    x = kf.constant([1.0, 2.0])
    assert kf.divide(x, 2.0).op.name == "truediv"
    assert kf.divide(x, 2.0, name="half").op.name == "half"
    assert kf.realdiv(x, x).op.name == "RealDiv"
    assert kf.divide(1.0, x).dtype == kf.float32


def test_default_wrapper_names(g):
    x = kf.constant([1.0, 2.0])
    names = [kf.add(x, x), kf.subtract(x, x), kf.multiply(x, x), kf.floordiv(x, x), kf.mod(x, x),
             kf.pow(x, x), kf.maximum(x, x), kf.squared_difference(x, x), kf.negative(x), kf.abs(x),
             kf.sigmoid(x), kf.tanh(x), kf.equal(x, x), kf.cast(x, kf.int32), kf.to_float(kf.constant(1)),
             kf.clip_by_value(x, 0.0, 1.0), kf.add_n([x, x]), kf.matmul([[1.0]], [[2.0]]),
             kf.reduce_sum(x), kf.argmax(x), kf.cumsum(x), kf.scalar_mul(2.0, x)]
    assert [t.op.name for t in names] == [
        "Add", "Sub", "Mul", "floordiv", "FloorMod", "Pow", "Maximum", "SquaredDifference", "Neg",
        "Abs", "Sigmoid", "Tanh", "Equal", "Cast", "ToFloat", "clip_by_value", "AddN", "MatMul", "Sum",
        "ArgMax", "Cumsum", "Mul_1"]
    assert kf.multiply(x, x, name="prod").op.name == "prod"


def test_add_of_strings_uses_add(g):
    s = kf.add(kf.constant(["a", "b"]), "c")
    assert s.op.type == "Add"
    assert _run(s).tolist() == [b"ac", b"bc"]


def test_variables_get_the_operators(g):
    v = kf.Variable([1.0, 2.0])
    ys = [v + 1, 1 - v, v * v, -v, v < 1.5, v / 2]
    with kf.Session() as s:
        s.run(v.initializer)
        out = s.run(ys)
    assert [o.tolist() for o in out] == [[2, 3], [0, -1], [1, 4], [-1, -2], [True, False], [0.5, 1]]


# ---------------------------------------------------------------------------- static shapes
def test_broadcast_shape_inference(g):
    x = kf.placeholder(kf.float32, [2, None, 3])
    assert (x + kf.placeholder(kf.float32, [4, 1])).shape.as_list() == [2, 4, 3]
    assert (x * kf.placeholder(kf.float32)).shape.rank is None
    with pytest.raises(ValueError, match=r"for 'add_1' \(op: 'AddV2'\) with input shapes: \[2,\?,3\], \[2\]"):
        x + kf.placeholder(kf.float32, [2])


def test_comparisons_are_bool(g):
    x = kf.placeholder(kf.int32, [3])
    assert kf.less(x, 2).dtype == kf.bool and kf.not_equal(x, x).dtype == kf.bool
    e = apply_op("Equal", [kf.placeholder(kf.float32, [3]), kf.placeholder(kf.float32, [4])],
                 {"incompatible_shape_error": False}).outputs[0]
    assert e.shape.as_list() == []
    with pytest.raises(ValueError):
        kf.equal(kf.placeholder(kf.float32, [3]), kf.placeholder(kf.float32, [4]))


def test_matmul_shapes_and_errors(g):
    a = kf.placeholder(kf.float32, [2, 3])
    assert kf.matmul(a, kf.placeholder(kf.float32, [3, None])).shape.as_list() == [2, None]
    assert kf.matmul(a, kf.placeholder(kf.float32, [5, 3]), transpose_b=True).shape.as_list() == [2, 5]
    with pytest.raises(ValueError, match=r"Dimensions must be equal, but are 3 and 4 for 'MatMul_2' "
                                         r"\(op: 'MatMul'\) with input shapes: \[2,3\], \[4,5\]"):
        kf.matmul(a, kf.placeholder(kf.float32, [4, 5]))
    with pytest.raises(ValueError, match="Only one of transpose_a and adjoint_a"):
        kf.matmul(a, a, transpose_a=True, adjoint_a=True)
    b = kf.matmul(kf.placeholder(kf.float32, [7, 1, 2, 3]), kf.placeholder(kf.float32, [5, 3, 4]))
    assert b.op.type == "BatchMatMulV2" and b.shape.as_list() == [7, 5, 2, 4]
    u = kf.matmul(kf.placeholder(kf.float32), a, adjoint_b=True)
    assert u.op.type == "BatchMatMulV2" and u.op.get_attr("adj_y") and u.shape.rank is None
    with pytest.raises(ValueError, match="Shape must be rank 2 but is rank 1"):
        apply_op("MatMul", [kf.placeholder(kf.float32, [3]), a])


def test_matmul_runtime_size_mismatch_names_the_node(g):
    a, b = kf.placeholder(kf.float32, [None, None]), kf.placeholder(kf.float32, [None, None])
    c = kf.matmul(a, b, name="mm")
    msg = r"Matrix size-incompatible: In\[0\]: \[2,3\], In\[1\]: \[4,5\]"
    with pytest.raises(errors.InvalidArgumentError, match=msg) as e:
        _run(c, {a: np.ones((2, 3)), b: np.ones((4, 5))})
    assert "mm" in str(e.value)


def test_reduction_static_shapes(g):
    x = kf.placeholder(kf.float32, [2, None, 4])
    assert kf.reduce_sum(x, 1).shape.as_list() == [2, 4]
    assert kf.reduce_mean(x, [0, -1], keepdims=True).shape.as_list() == [1, None, 1]
    assert kf.reduce_max(x).shape.as_list() == []
    assert kf.reduce_min(x, keep_dims=True).shape.as_list() == [1, 1, 1]
    axis = kf.placeholder(kf.int32, [None])
    assert kf.reduce_prod(x, axis).shape.rank is None
    assert kf.reduce_prod(x, axis, keepdims=True).shape.as_list() == [None, None, None]
    s64 = kf.reduce_sum(x, kf.constant([0], kf.int64))
    assert s64.op.get_attr("Tidx") == kf.int64 and s64.shape.as_list() == [None, 4]
    with pytest.raises(ValueError, match="Invalid reduction dimension 3 for input with 3 dimensions"):
        kf.reduce_sum(x, 3)
    with pytest.raises(ValueError, match="Cannot specify both 'axis' and 'reduction_indices'"):
        kf.reduce_sum(x, axis=0, reduction_indices=0)
    with pytest.raises(ValueError, match="Cannot specify both 'keepdims' and 'keep_dims'"):
        kf.reduce_sum(x, keepdims=True, keep_dims=True)


def test_reduction_of_unknown_rank_reduces_everything(g):
    x = kf.placeholder(kf.float32)
    s = kf.reduce_sum(x)
    assert s.shape.as_list() == [] and s.op.inputs[1].op.type == "Range"
    assert kf.reduce_sum(x, keepdims=True).shape.rank is None
    assert _run(s, {x: np.ones((2, 3, 4))}) == 24.0


def test_reduction_runtime_values(g):
    i = kf.constant([[1, 2], [-1, -2]], kf.int32)
    assert kf.reduce_mean(i, 1).dtype == kf.int32
    assert _run(kf.reduce_mean(i, 1)).tolist() == [1, -1]
    assert _run(kf.reduce_sum(i)).dtype == np.int32
    assert _run(kf.reduce_max(kf.constant(np.zeros(0, np.float32)))) == -np.inf
    big = kf.constant([[1000.0, 1000.0], [-np.inf, -np.inf]])
    np.testing.assert_allclose(_run(kf.reduce_logsumexp(big, 1)), [1000 + np.log(2), -np.inf])
    assert kf.count_nonzero(kf.constant([0, 3, 0, 1])).dtype == kf.int64
    assert _run(kf.count_nonzero(kf.constant([[0, 3], [0, 1]]), axis=0)).tolist() == [0, 2]
    assert _run(kf.count_nonzero(kf.constant(["", "a"]))) == 1


def test_reduction_bad_runtime_axis(g):
    x, axis = kf.placeholder(kf.float32), kf.placeholder(kf.int32)
    with pytest.raises(errors.InvalidArgumentError, match="Invalid reduction dimension"):
        _run(kf.reduce_sum(x, axis), {x: np.ones((2, 2)), axis: 2})


def test_argmax_and_cumsum(g):
    x = kf.placeholder(kf.float32, [3, 5])
    assert kf.argmax(x).shape.as_list() == [5] and kf.argmax(x).dtype == kf.int64
    assert kf.argmin(x, dimension=-1, output_type=kf.int32).shape.as_list() == [3]
    assert kf.arg_max(x, 1).op.type == "ArgMax"
    with pytest.raises(ValueError, match=r"Expected dimension in the range \[-2, 2\), but got 2"):
        kf.argmax(x, 2)
    assert kf.cumsum(x, 1, exclusive=True).shape.as_list() == [3, 5]
    with pytest.raises(ValueError, match="scan axis"):
        kf.cumsum(x, 2)
    assert _run(kf.cumsum([1, 2, 3], exclusive=True, reverse=True)).tolist() == [5, 3, 0]


# ---------------------------------------------------------------------------- other wrappers
def test_cast(g):
    x = kf.placeholder(kf.float32, [2])
    assert kf.cast(x, kf.float32) is x
    c = kf.cast(x, "int32")
    assert c.op.get_attr("SrcT") == kf.float32 and c.op.get_attr("DstT") == kf.int32
    assert kf.to_int64(x).op.name == "ToInt64" and kf.to_double(x).dtype == kf.float64
    assert _run(c, {x: [-1.7, 2.9]}).tolist() == [-1, 2]
    assert _run(kf.saturate_cast(kf.constant([-3, 300]), kf.uint8)).tolist() == [0, 255]


def test_add_n(g):
    x = kf.placeholder(kf.float32, [2])
    assert kf.add_n([x]) is x
    assert kf.add_n([x], name="only").op.type == "Identity"
    with pytest.raises(ValueError, match="at least one"):
        kf.add_n([])
    with pytest.raises(ValueError):
        kf.add_n([x, kf.placeholder(kf.float32, [3])])
    a, b = kf.placeholder(kf.float32), kf.placeholder(kf.float32)
    with pytest.raises(errors.InvalidArgumentError, match="same shape"):
        _run(kf.add_n([a, b]), {a: np.ones(2), b: np.ones(3)})


def test_where_and_select(g):
    c = kf.placeholder(kf.bool, [4])
    idx = kf.where(c)
    assert idx.op.type == "Where" and idx.dtype == kf.int64 and idx.shape.as_list() == [None, 1]
    x = kf.placeholder(kf.float32, [4, 3])
    assert kf.where(c, x, x).shape.as_list() == [4, 3]
    with pytest.raises(ValueError, match="both be non-None"):
        kf.where(c, x)
    with pytest.raises(ValueError):
        kf.where(kf.placeholder(kf.bool, [3]), x, x)
    assert kf.where_v2(kf.placeholder(kf.bool, [2, 1, 1]), x, 0.0).shape.as_list() == [2, 4, 3]
    cu, xu, yu = kf.placeholder(kf.bool), kf.placeholder(kf.float32), kf.placeholder(kf.float32)
    sel = kf.where(cu, xu, yu)
    assert _run(sel, {cu: [[True], [False]], xu: [[1.0], [2.0]], yu: [[3.0], [4.0]]}).tolist() == [
        [1.0], [4.0]]
    assert _run(sel, {cu: [True, False], xu: [[1.0, 2.0], [3.0, 4.0]], yu: np.zeros((2, 2))}).tolist() == [
        [1.0, 2.0], [0.0, 0.0]]
    with pytest.raises(errors.InvalidArgumentError, match="'then' and 'else' must have the same size"):
        _run(sel, {cu: [True, False], xu: [1.0, 2.0], yu: [1.0]})
    with pytest.raises(errors.InvalidArgumentError, match="'condition' must be a scalar"):
        _run(sel, {cu: [True, False, True], xu: [1.0, 2.0], yu: [1.0, 3.0]})


def test_clip_by_value_rejects_widening_bounds(g):
    t = kf.placeholder(kf.float32, [3])
    with pytest.raises(ValueError, match="incompatible"):
        kf.clip_by_value(t, kf.placeholder(kf.float32, [2, 3]), 1.0)


def test_round_and_conj_pass_through_ints(g):
    i = kf.placeholder(kf.int32)
    assert kf.round(i) is i and kf.conj(i) is i
    with pytest.raises(TypeError):
        kf.conj(kf.placeholder(kf.string))


def test_integer_division_by_zero_is_an_error(g):
    x, y = kf.placeholder(kf.int32), kf.placeholder(kf.int32)
    for out in (x // y, x % y, kf.realdiv(x, y)):
        with pytest.raises(errors.InvalidArgumentError, match="Integer division by zero"):
            _run(out, {x: [1, 2], y: [1, 0]})


def test_float_special_values_give_no_warnings(g):
    x = kf.placeholder(kf.float32)
    outs = [1.0 / x, kf.log(x), kf.sqrt(x - 1), kf.rsqrt(x), kf.exp(x * 1000), kf.reciprocal(x),
            kf.sigmoid(x * 1000), x ** -1.0, x // x]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        vals = _run(outs, {x: [0.0, 1.0]})
    assert vals[0][0] == np.inf and vals[1][0] == -np.inf and np.isnan(vals[2][0])


def test_sigmoid_is_stable(g):
    x = kf.placeholder(kf.float64)
    v = _run(kf.sigmoid(x), {x: [-800.0, -50.0, 0.0, 50.0, 800.0]})
    assert v[0] == 0.0 and 0 < v[1] < 1e-21 and v[2] == 0.5 and v[4] == 1.0


def test_add_kernel_is_np_add():
    from kernflow.core.plugins import manager
    kd = manager.registries().kernels.find("AddV2", "CPU", {"T": kf.float32})
    assert kd.factory(None) is np.add
