"""What CreateSession and ExtendSession refuse (`graph_util.check_graph`), through the master."""

from __future__ import annotations

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.client.protobuf import master_pb2
from kernflow.core.framework import errors
from kernflow.core.protobuf import graph_pb2


def _graph():
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [None, 2], name="x")
        y = kf.add(x, x, name="y")
    return g, x, y


def _node(gd, name):
    return next(nd for nd in gd.node if nd.name == name)


def _create(c, gd):
    return c.master.create_session(master_pb2.CreateSessionRequest(graph_def=gd))


def test_create_session_refuses_an_input_index_out_of_range(make_cluster):
    c = make_cluster()
    gd = _graph()[0].as_graph_def()
    _node(gd, "y").input[1] = "x:5"
    with pytest.raises(errors.InvalidArgumentError) as e:
        _create(c, gd)
    assert e.value.message == ("Node 'y': Connecting to invalid output 5 of source node x which has "
                               "1 outputs.")


def test_create_session_refuses_unknown_inputs_and_wrong_input_counts(make_cluster):
    c = make_cluster()
    gd = _graph()[0].as_graph_def()
    _node(gd, "y").input[1] = "nowhere"
    with pytest.raises(errors.InvalidArgumentError, match="Node 'y': Unknown input node 'nowhere'"):
        _create(c, gd)
    _node(gd, "y").input[:] = ["x"]
    with pytest.raises(errors.InvalidArgumentError, match="NodeDef expected inputs 'float32, float32' "
                                                          "do not match 1 inputs specified"):
        _create(c, gd)


def test_extend_session_checks_new_nodes_against_the_sessions_graph(make_cluster):
    c = make_cluster()
    g, x, y = _graph()
    s = c.session(g)
    delta = master_pb2.ExtendSessionRequest(session_handle=s.handle, current_graph_version=s.version)
    z = delta.graph_def.node.add(name="z", op="Identity", input=["y:1"])
    z.attr["T"].type = kf.float32.as_datatype_enum
    with pytest.raises(errors.InvalidArgumentError, match="Node 'z': Connecting to invalid output 1 "
                                                          "of source node y which has 1 outputs"):
        c.master.extend_session(delta)
    # Nothing was added: the session runs, and the corrected node extends it.
    np.testing.assert_array_equal(s.run(y, {x: [[1.0, 2.0]]}), [[2.0, 4.0]])
    z.input[0] = "y:0"
    assert c.master.extend_session(delta).new_graph_version == s.version + 1


def test_a_const_of_the_wrong_dtype_fails_the_step_naming_the_node(make_cluster):
    c = make_cluster()
    gd = graph_pb2.GraphDef()
    with kf.Graph().as_default() as g:
        kf.constant([1.0, 2.0], name="k")
    gd.CopyFrom(g.as_graph_def())
    _node(gd, "k").attr["dtype"].type = kf.int32.as_datatype_enum
    handle = _create(c, gd).session_handle
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"Node 'k': Type mismatch between value \(float32\) and dtype \(int32\)"):
        c.master.run_step(master_pb2.RunStepRequest(session_handle=handle, fetch=["k:0"]))


def test_a_const_whose_content_does_not_match_its_shape_is_invalid_argument(make_cluster):
    c = make_cluster()
    with kf.Graph().as_default() as g:
        kf.constant([1.0, 2.0, 3.0], name="k")
    gd = g.as_graph_def()
    _node(gd, "k").attr["value"].tensor.tensor_content = b"\0" * 8
    handle = _create(c, gd).session_handle
    with pytest.raises(errors.InvalidArgumentError, match="Node 'k' \\(Const\\), attr 'value': .*"
                                                          "holds 8 bytes, expected 12"):
        c.master.run_step(master_pb2.RunStepRequest(session_handle=handle, fetch=["k:0"]))
