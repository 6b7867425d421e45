"""`node_def_util`: input strings and the checks of a node's inputs against its producers and OpDef."""

import pytest

import kernflow.core as kf
from kernflow.core.framework import errors
from kernflow.core.framework import node_def_util
from kernflow.core.framework import op_def_registry
from kernflow.core.protobuf import graph_pb2


def _graph_def():
    """x (Const, 1 output), s (Unpack num=2: 2 outputs), y = x + x."""
    g = kf.Graph()
    with g.as_default():
        x = kf.constant([1.0, 2.0], name="x")
        kf.unstack(x, num=2, name="s")
        kf.add(x, x, name="y")
    return g.as_graph_def()


def _node(gd, name):
    return next(nd for nd in gd.node if nd.name == name)


def test_parse_input():
    assert node_def_util.parse_input("x") == ("x", 0, False)
    assert node_def_util.parse_input("a/b:3") == ("a/b", 3, False)
    assert node_def_util.parse_input("^c") == ("c", -1, True)


def test_a_valid_graph_passes():
    node_def_util.check_inputs(_graph_def())


def test_an_output_index_the_producer_does_not_have_names_node_index_and_output_count():
    gd = _graph_def()
    _node(gd, "y").input[1] = "x:5"
    with pytest.raises(errors.InvalidArgumentError) as e:
        node_def_util.check_inputs(gd)
    assert e.value.message == ("Node 'y': Connecting to invalid output 5 of source node x which has "
                               "1 outputs.")


def test_the_output_count_of_a_multi_output_producer():
    gd = _graph_def()
    _node(gd, "y").input[:] = ["s:1", "s:0"]
    node_def_util.check_inputs(gd)
    _node(gd, "y").input[0] = "s:2"
    with pytest.raises(errors.InvalidArgumentError, match="invalid output 2 of source node s which "
                                                          "has 2 outputs"):
        node_def_util.check_inputs(gd)


def test_an_unknown_input_node():
    gd = _graph_def()
    _node(gd, "y").input.append("^nowhere")
    with pytest.raises(errors.InvalidArgumentError, match="Node 'y': Unknown input node '\\^nowhere'"):
        node_def_util.check_inputs(gd)


@pytest.mark.parametrize("inputs", [["x"], ["x", "x", "x"]])
def test_more_or_fewer_inputs_than_the_op_takes(inputs):
    gd = _graph_def()
    _node(gd, "y").input[:] = inputs
    with pytest.raises(errors.InvalidArgumentError) as e:
        node_def_util.check_inputs(gd)
    assert e.value.message.startswith(f"NodeDef expected inputs 'float32, float32' do not match "
                                      f"{len(inputs)} inputs specified")
    assert "{{node y}}" in e.value.message


def test_control_inputs_count_as_no_data_input():
    gd = _graph_def()
    _node(gd, "y").input.append("^s")
    node_def_util.check_inputs(gd)


def test_new_nodes_are_checked_against_the_graph_they_extend():
    existing = {nd.name: nd for nd in _graph_def().node}
    delta = graph_pb2.GraphDef()
    z = delta.node.add(name="z", op="Identity", input=["s:1"])
    z.attr["T"].type = kf.float32.as_datatype_enum
    node_def_util.check_inputs(delta, existing)
    z.input[0] = "x:1"
    with pytest.raises(errors.InvalidArgumentError, match="invalid output 1 of source node x which "
                                                          "has 1 outputs"):
        node_def_util.check_inputs(delta, existing)
    with pytest.raises(errors.InvalidArgumentError, match="Unknown input node 'x:1'"):
        node_def_util.check_inputs(delta)


def test_counting_outputs_decodes_no_tensor():
    gd = _graph_def()
    _node(gd, "x").attr["value"].tensor.tensor_content = b"\0" * 3   # (not decodable)
    node_def_util.check_inputs(gd)
    assert node_def_util.num_outputs(_node(gd, "s"), op_def_registry.get("Unpack")) == 2
