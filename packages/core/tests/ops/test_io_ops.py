"""The checkpoint I/O op wrappers: names, shape inference, build-time and run-time errors."""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors
from kernflow.core.ops import io_ops


@pytest.fixture
def graph():
    g = kf.Graph()
    with g.as_default():
        yield g


def test_default_names_and_attrs(graph):
    x = kf.constant([1.0, 2.0])
    y = kf.constant([1, 2], dtype=kf.int64)
    save = io_ops.save_v2("/tmp/p", ["x", "y"], ["", ""], [x, y])
    assert save.name == "SaveV2" and save.type == "SaveV2" and save.outputs == []
    assert save.get_attr("dtypes") == [kf.float32, kf.int64]
    assert [t.op.name for t in save.inputs[:3]] == ["SaveV2/prefix", "SaveV2/tensor_names",
                                                    "SaveV2/shape_and_slices"]
    outs = io_ops.restore_v2("/tmp/p", ["x", "y"], ["", ""], [kf.float32, kf.int64], name="load")
    assert [t.name for t in outs] == ["load:0", "load:1"]
    assert [t.dtype for t in outs] == [kf.float32, kf.int64]
    merge = io_ops.merge_v2_checkpoints(["a", "b"], "c")
    assert merge.get_attr("delete_old_dirs") is True and merge.get_attr("allow_missing_files") is False
    assert io_ops.sharded_filename("a", 0, 2).name == "ShardedFilename:0"


def test_variables_are_saved_through_their_reference(graph):
    v = kf.Variable([1.0, 2.0], name="v")
    save = io_ops.save_v2("/tmp/p", ["v"], [""], [v])
    assert save.inputs[3].name == "v:0"
    assert save.get_attr("dtypes") == [kf.float32]


def test_restore_static_shapes(graph):
    outs = io_ops.restore_v2("p", ["a", "b", "c"], ["", "4 5 0,2:-", "3 -"],
                             [kf.float32, kf.float32, kf.int32])
    assert outs[0].shape.rank is None
    assert outs[1].shape.as_list() == [2, 5]
    assert outs[2].shape.as_list() == [3]
    names = kf.placeholder(kf.string, [None])
    (o,) = io_ops.restore_v2("p", names, kf.placeholder(kf.string), [kf.float64])
    assert o.shape.rank is None
    assert io_ops.sharded_filename("a", 1, 3).shape.as_list() == []


def test_build_time_errors(graph):
    x = kf.constant(1.0)
    with pytest.raises(ValueError, match="tensor_names must have 1 elements"):
        io_ops.save_v2("p", ["a", "b"], [""], [x])
    with pytest.raises(ValueError, match="shape_and_slices must have 2 elements"):
        io_ops.restore_v2("p", ["a", "b"], [""], [kf.float32, kf.float32])
    with pytest.raises(ValueError, match="prefix must be a scalar"):
        io_ops.save_v2(["p", "q"], ["a"], [""], [x])
    with pytest.raises(ValueError, match="outside a dimension"):
        io_ops.restore_v2("p", ["a"], ["4 0,5"], [kf.float32])
    with pytest.raises(TypeError):
        io_ops.sharded_filename("a", 1.5, 2)


def test_parse_shape_and_slice():
    assert io_ops.parse_shape_and_slice("") is None
    assert io_ops.parse_shape_and_slice(b"4 5 0,2:-") == ([4, 5], [(0, 2), (0, -1)])
    for bad in ["4 5 0,2", "a 1,1", "4 x,y", "-1 -"]:
        with pytest.raises(ValueError, match="Invalid shape_and_slice spec"):
            io_ops.parse_shape_and_slice(bad)


def test_runtime_errors_name_the_node(graph, tmp_path):
    prefix = str(tmp_path / "m")
    x = kf.constant([1.0, 2.0])
    save_slices = io_ops.save_v2(prefix, ["x"], ["2 0,1"], [x], name="slicer")
    names = kf.placeholder(kf.string, [None])
    save_fed = io_ops.save_v2(prefix, names, [""], [x], name="fed")
    (missing,) = io_ops.restore_v2(str(tmp_path / "nothing"), ["x"], [""], [kf.float32])
    bad_shard = io_ops.sharded_filename("a", 3, 2, name="shard")
    with kf.Session() as sess:
        with pytest.raises(errors.UnimplementedError, match="SaveV2 slicer: saving slices"):
            sess.run(save_slices)
        with pytest.raises(errors.InvalidArgumentError, match="fed: tensor_names must be a vector "
                                                              "of 1 strings"):
            sess.run(save_fed, {names: np.array([b"a", b"b"], dtype=object)})
        with pytest.raises(errors.NotFoundError, match="Failed to find any matching files"):
            sess.run(missing)
        with pytest.raises(errors.InvalidArgumentError, match="shard 3 is not in"):
            sess.run(bad_shard)
        sess.run(save_fed, {names: np.array([b"x"], dtype=object)})
        (wrong,) = io_ops.restore_v2(prefix, ["x"], ["3 -"], [kf.float32], name="wrong")
        with pytest.raises(errors.InvalidArgumentError, match="wrong: tensor 'x' has shape \\[2\\]"):
            sess.run(wrong)
        assert sess.run(io_ops.sharded_filename("/d/m", 2, 10)) == b"/d/m-00002-of-00010"
