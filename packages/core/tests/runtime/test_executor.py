"""`compile_partition` refusing malformed partitions as TF's graph construction and kernel creation
do: InvalidArgumentError naming the node, never an IndexError or a kernel's TypeError at run time."""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors
from kernflow.core.plugins import registries
from kernflow.core.runtime import executor


def _graph_def():
    g = kf.Graph()
    with g.as_default():
        x = kf.constant([1.0, 2.0, 3.0], name="x")
        kf.add(x, x, name="y")
    return g.as_graph_def()


def _node(gd, name):
    return next(nd for nd in gd.node if nd.name == name)


def _compile(gd):
    cpu = next(d for d in registries().devices.create_devices(None) if d.device_type == "CPU")
    return executor.compile_partition(gd, cpu, registries().kernels), cpu


def _run(gd):
    plan, cpu = _compile(gd)
    return plan.run_inline([], executor.StepContext(1, None, cpu))


def test_a_valid_partition_compiles_and_runs():
    gd = _graph_def()
    rv = gd.node.add(name="out", op="_Retval", input=["y"])
    rv.attr["T"].type = kf.float32.as_datatype_enum
    rv.attr["index"].i = 0
    np.testing.assert_array_equal(_run(gd)[0], [2.0, 4.0, 6.0])


def test_an_input_index_out_of_range_names_node_index_and_output_count():
    gd = _graph_def()
    _node(gd, "y").input[0] = "x:5"
    with pytest.raises(errors.InvalidArgumentError) as e:
        _compile(gd)
    assert e.value.message == ("Node 'y': Connecting to invalid output 5 of source node x which has "
                               "1 outputs.")


@pytest.mark.parametrize("inputs", [["x"], ["x", "x", "x"]])
def test_a_node_with_more_or_fewer_inputs_than_its_kernel_reads(inputs):
    gd = _graph_def()
    _node(gd, "y").input[:] = inputs
    with pytest.raises(errors.InvalidArgumentError,
                       match=f"NodeDef expected inputs 'float32, float32' do not match {len(inputs)} "
                             f"inputs specified; Op<name=AddV2>; NodeDef: {{{{node y}}}}"):
        _compile(gd)


def test_a_node_missing_a_type_attr():
    gd = _graph_def()
    del _node(gd, "y").attr["T"]
    with pytest.raises(errors.InvalidArgumentError, match="NodeDef missing attr 'T' from "
                                                          "Op<name=AddV2>; NodeDef: {{node y}}"):
        _compile(gd)


def test_a_const_whose_content_does_not_match_its_shape():
    gd = _graph_def()
    _node(gd, "x").attr["value"].tensor.tensor_content = b"\0" * 8   # float32[3] needs 12
    with pytest.raises(errors.InvalidArgumentError) as e:
        _compile(gd)
    assert "Node 'x' (Const), attr 'value'" in e.value.message
    assert "holds 8 bytes, expected 12" in e.value.message


def test_a_const_whose_value_is_not_of_its_dtype():
    gd = _graph_def()
    _node(gd, "x").attr["dtype"].type = kf.int32.as_datatype_enum
    with pytest.raises(errors.InvalidArgumentError) as e:
        _compile(gd)
    assert e.value.message == "Node 'x': Type mismatch between value (float32) and dtype (int32)"


def test_an_imported_const_of_the_wrong_dtype_fails_the_session_step_as_in_tf():
    """TF imports such a Const and fails the step that runs it (at kernel creation)."""
    gd = _graph_def()
    _node(gd, "x").attr["dtype"].type = kf.int32.as_datatype_enum
    with kf.Graph().as_default() as g:
        kf.import_graph_def(gd, name="")
        with kf.Session(graph=g) as sess:
            with pytest.raises(errors.InvalidArgumentError,
                               match=r"Node 'x': Type mismatch between value \(float32\) and "
                                     r"dtype \(int32\)"):
                sess.run("x:0")
