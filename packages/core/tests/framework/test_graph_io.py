"""`import_graph_def` refusing malformed GraphDefs with TF's error classes and messages."""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors


def _graph_def():
    g = kf.Graph()
    with g.as_default():
        x = kf.constant([1.0, 2.0, 3.0], name="x")
        kf.add(x, x, name="y")
    return g.as_graph_def()


def _node(gd, name):
    return next(nd for nd in gd.node if nd.name == name)


def _import(gd, **kw):
    with kf.Graph().as_default() as g:
        return g, kf.import_graph_def(gd, name="", **kw)


def test_an_input_naming_an_output_its_producer_lacks_is_a_value_error_as_in_tf():
    gd = _graph_def()
    _node(gd, "y").input[1] = "x:5"
    with pytest.raises(ValueError) as e:
        _import(gd)
    # TF: "Node 'y': Connecting to invalid output 5 of source node x which has 1 outputs."
    assert str(e.value) == "Node 'y': Connecting to invalid output 5 of source node x which has 1 outputs."


@pytest.mark.parametrize("inputs", [["x"], ["x", "x", "x"]])
def test_a_node_with_more_or_fewer_inputs_than_its_op_takes(inputs):
    gd = _graph_def()
    _node(gd, "y").input[:] = inputs
    with pytest.raises(ValueError, match=f"NodeDef expected inputs 'float32, float32' do not match "
                                         f"{len(inputs)} inputs specified.*node y"):
        _import(gd)


def test_a_return_element_naming_a_missing_output():
    with pytest.raises(ValueError, match="Requested return_element 'x:1' not found"):
        _import(_graph_def(), return_elements=["x:1"])


def test_a_const_whose_content_does_not_match_its_shape_is_invalid_argument():
    gd = _graph_def()
    _node(gd, "x").attr["value"].tensor.tensor_content = b"\0" * 8   # float32[3] needs 12
    with pytest.raises(errors.InvalidArgumentError) as e:
        _import(gd)
    msg = e.value.message
    assert "Node 'x' (Const), attr 'value'" in msg and "holds 8 bytes, expected 12" in msg


def test_a_valid_graph_def_still_imports_and_runs():
    g, _ = _import(_graph_def())
    with kf.Session(graph=g) as sess:
        np.testing.assert_array_equal(sess.run("y:0"), [2.0, 4.0, 6.0])
