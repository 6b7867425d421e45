"""Tests of kernflow/core/ops/partitioned_variables.py and get_variable(partitioner=...)."""

import numpy as np
import pytest

import kernflow.core as kf


@pytest.fixture
def g():
    graph = kf.Graph()
    with graph.as_default():
        yield graph


def _run(fetches):
    with kf.Session() as s:
        s.run(kf.global_variables_initializer())
        return s.run(fetches)


@pytest.mark.parametrize("fn,shape,dtype,expected", [
    (kf.fixed_size_partitioner(3), [10, 4], kf.float32, [3, 1]),
    (kf.fixed_size_partitioner(8), [5, 4], kf.float32, [5, 1]),
    (kf.fixed_size_partitioner(2, axis=1), [5, 4], kf.float32, [1, 2]),
    (kf.variable_axis_size_partitioner(64), [10, 4], kf.float32, [3, 1]),
    (kf.variable_axis_size_partitioner(64, max_shards=2), [10, 4], kf.float32, [2, 1]),
    (kf.variable_axis_size_partitioner(1), [10, 4], kf.float32, [10, 1]),
    (kf.variable_axis_size_partitioner(100, bytes_per_string_element=10), [10, 2], kf.string,
     [2, 1]),
    (kf.min_max_variable_partitioner(4, min_slice_size=64), [10, 4], kf.float32, [3, 1]),
    (kf.min_max_variable_partitioner(2, min_slice_size=64), [10, 4], kf.float32, [2, 1]),
    (kf.min_max_variable_partitioner(), [10, 4], kf.float32, [1, 1]),
])
def test_partitioners_follow_tf_layout(fn, shape, dtype, expected):
    assert fn(shape=kf.TensorShape(shape), dtype=dtype) == expected


def test_partitioner_arguments_are_checked():
    with pytest.raises(ValueError, match="positive"):
        kf.variable_axis_size_partitioner(0)
    with pytest.raises(ValueError, match="max_shards"):
        kf.variable_axis_size_partitioner(10, max_shards=0)
    with pytest.raises(ValueError, match="axis 2"):
        kf.min_max_variable_partitioner(2, axis=2)(shape=kf.TensorShape([4, 4]), dtype=kf.float32)


def test_parts_split_rows_like_tf(g):
    w = kf.get_variable("w", shape=[10, 4], partitioner=kf.fixed_size_partitioner(3))
    assert isinstance(w, kf.PartitionedVariable)
    assert [v.op.name for v in w] == ["w/part_0", "w/part_1", "w/part_2"]
    assert [v.get_shape().as_list() for v in w] == [[4, 4], [3, 4], [3, 4]]
    assert w.get_shape().as_list() == [10, 4] and len(w) == 3 and w.name == "w"
    infos = [v._save_slice_info for v in w]
    assert [i.var_offset for i in infos] == [[0, 0], [4, 0], [7, 0]]
    assert {i.full_name for i in infos} == {"w"} and infos[1].spec == "10 4 4,3:-"
    assert w._get_variable_list() == list(w) and w._get_partitions() == [3, 1]
    assert [v.op.name for v in kf.trainable_variables()] == ["w/part_0", "w/part_1", "w/part_2"]


def test_split_along_axis_1(g):
    w = kf.get_variable("w", shape=[2, 5], partitioner=kf.fixed_size_partitioner(2, axis=1),
                        initializer=kf.constant_initializer(np.arange(10.).reshape(2, 5)))
    assert [v.get_shape().as_list() for v in w] == [[2, 3], [2, 2]]
    np.testing.assert_array_equal(_run(kf.convert_to_tensor(w)), np.arange(10.).reshape(2, 5))


def test_scalars_stay_plain(g):
    v = kf.get_variable("s", shape=[], partitioner=kf.fixed_size_partitioner(3))
    assert isinstance(v, kf.Variable)


@pytest.mark.parametrize("init,expected", [
    (kf.zeros_initializer(), np.zeros((7, 3))),
    (kf.ones_initializer(), np.ones((7, 3))),
    (kf.constant_initializer(2.5), np.full((7, 3), 2.5)),
    (kf.constant_initializer(np.arange(21.).reshape(7, 3)), np.arange(21.).reshape(7, 3)),
    (np.arange(21., dtype=np.float32).reshape(7, 3), np.arange(21.).reshape(7, 3)),
])
def test_initializers_give_each_part_its_slice(g, init, expected):
    shape = None if isinstance(init, np.ndarray) else [7, 3]
    w = kf.get_variable("w", shape=shape, initializer=init,
                        partitioner=kf.fixed_size_partitioner(3))
    assert len(w) == 3
    np.testing.assert_allclose(_run(w.as_tensor()), expected)


def test_tensor_initializer_is_sliced(g):
    init = kf.constant(np.arange(12., dtype=np.float32).reshape(6, 2))
    w = kf.get_variable("w", initializer=init, partitioner=kf.fixed_size_partitioner(4))
    assert [v.get_shape().as_list() for v in w] == [[2, 2], [2, 2], [1, 2], [1, 2]]
    np.testing.assert_array_equal(_run(kf.convert_to_tensor(w)), np.arange(12.).reshape(6, 2))


def test_initializer_called_with_part_shape_and_partition_info(g):
    calls = []

    def init(shape, dtype=None, partition_info=None):
        calls.append((list(shape), partition_info.full_shape, partition_info.var_offset))
        return kf.zeros(shape, dtype)
    kf.get_variable("w", shape=[5, 2], initializer=init, partitioner=kf.fixed_size_partitioner(2))
    assert calls == [([3, 2], [5, 2], [0, 0]), ([2, 2], [5, 2], [3, 0])]


def test_random_initializer_initializes_parts_independently(g):
    w = kf.get_variable("w", shape=[6, 3], initializer=kf.random_uniform_initializer(-1, 1),
                        partitioner=kf.fixed_size_partitioner(2))
    parts = _run(list(w))
    assert [p.shape for p in parts] == [(3, 3), (3, 3)]
    assert all(np.all(np.abs(p) <= 1) for p in parts)


def test_reuse_returns_the_same_partitioned_variable(g):
    p = kf.fixed_size_partitioner(3)
    with kf.variable_scope("emb", partitioner=p):
        w = kf.get_variable("w", shape=[10, 4])
    with kf.variable_scope("emb", reuse=True, partitioner=p):
        assert kf.get_variable("w", shape=[10, 4]) is w
    with kf.variable_scope("emb", reuse=kf.AUTO_REUSE, partitioner=p):
        assert kf.get_variable("w", shape=[10, 4]) is w


@pytest.mark.parametrize("kwargs,match", [
    (dict(shape=[10, 4], partitioner=kf.fixed_size_partitioner(3)), "already exists"),
    (dict(shape=[10, 4], partitioner=kf.fixed_size_partitioner(2), reuse=True), "partitions"),
    (dict(shape=[10, 5], partitioner=kf.fixed_size_partitioner(3), reuse=True), "shape"),
    (dict(shape=[10, 4], dtype=kf.float64, partitioner=kf.fixed_size_partitioner(3),
          reuse=True), "dtype"),
])
def test_reuse_mismatch_raises(g, kwargs, match):
    kf.get_variable("w", shape=[10, 4], partitioner=kf.fixed_size_partitioner(3))
    reuse = kwargs.pop("reuse", None)
    with kf.variable_scope(kf.get_variable_scope(), reuse=reuse):
        with pytest.raises(ValueError, match=match):
            kf.get_variable("w", **kwargs)


def test_reusing_a_missing_partitioned_variable_raises(g):
    with kf.variable_scope("s", reuse=True):
        with pytest.raises(ValueError, match="does not exist"):
            kf.get_variable("w", shape=[4, 2], partitioner=kf.fixed_size_partitioner(2))


def test_partitioner_over_a_plain_variable_raises(g):
    kf.get_variable("w", shape=[4, 2])
    with pytest.raises(ValueError, match="unpartitioned version"):
        kf.get_variable("w", shape=[4, 2], partitioner=kf.fixed_size_partitioner(2))


@pytest.mark.parametrize("partitioner,match", [
    (lambda shape, dtype: [2, 2], "one dimension"),
    (lambda shape, dtype: [5, 1], "Cannot create 5 slices for size 4"),
    (lambda shape, dtype: [0, 1], "zero partitions"),
    (lambda shape, dtype: [2], "rank"),
    (lambda shape, dtype: 2, "sequence"),
])
def test_partitioner_that_cannot_split_raises(g, partitioner, match):
    with pytest.raises(ValueError, match=match):
        kf.get_variable("w", shape=[4, 2], partitioner=partitioner)


def test_unknown_shape_raises(g):
    with pytest.raises(ValueError, match="fully defined"):
        kf.get_variable("w", shape=[None, 2], partitioner=kf.fixed_size_partitioner(2))


def test_create_partitioned_variables(g):
    parts = kf.create_partitioned_variables([5, 2], [2, 1], kf.constant_initializer(1.0),
                                            name="pv")
    assert [v.op.name for v in parts] == ["pv/part_0", "pv/part_1"]
    assert [v.get_shape().as_list() for v in parts] == [[3, 2], [2, 2]]
    with pytest.raises(ValueError, match="length"):
        kf.create_partitioned_variables([5, 2], [2], kf.zeros_initializer())


def test_assign_splits_the_full_value(g):
    w = kf.get_variable("w", shape=[5, 2], partitioner=kf.fixed_size_partitioner(2))
    value = np.arange(10., dtype=np.float32).reshape(5, 2)
    assign = w.assign(value)
    with kf.Session() as s:
        s.run(kf.global_variables_initializer())
        s.run(assign)
        np.testing.assert_array_equal(s.run(w.as_tensor()), value)


def test_ref_conversion_is_refused(g):
    w = kf.get_variable("w", shape=[4, 2], partitioner=kf.fixed_size_partitioner(2))
    from kernflow.core.framework import ops
    with pytest.raises(ValueError, match="Reference conversion"):
        ops.convert_to_tensor(w, as_ref=True)
