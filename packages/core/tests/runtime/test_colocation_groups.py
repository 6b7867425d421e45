"""runtime/placer.colocation_groups: TF's colocation rules, shared by the placer and the master."""

import kernflow.core as kf
from kernflow.core.framework import op_def_registry
from kernflow.core.runtime.executor import node_attrs
from kernflow.core.runtime.placer import colocation_groups


def _groups(graph_def, unknown=()):
    nds = list(graph_def.node)
    op_defs = [None if nd.name in unknown else op_def_registry.get(nd.op) for nd in nds]
    attrs = [None if od is None else node_attrs(nd, od) for nd, od in zip(nds, op_defs)]
    roots, yielding = colocation_groups(nds, op_defs, attrs)
    by_name = {nd.name: roots[i] for i, nd in enumerate(nds)}
    return by_name, {nds[i].name for i in yielding}


def test_reference_inputs_and_class_attrs_group_nodes():
    g = kf.Graph()
    with g.as_default():
        v = kf.Variable(1.0, name="v")
        with kf.device("/cpu:1"):
            bump = kf.assign_add(v, 1.0, name="bump")    # joins v through its reference input
        with kf.colocate_with(v.op):
            near = kf.constant(2.0, name="near")         # joins v through _class
        far = kf.constant(3.0, name="far")
    roots, yielding = _groups(g.as_graph_def())
    assert roots["bump"] == roots["v"] == roots["near"]
    assert roots["far"] != roots["v"]
    assert roots["v"] == min(i for i, nd in enumerate(g.as_graph_def().node)
                             if nd.name in ("v", "bump", "near"))
    assert yielding == {"bump"}   # its own /cpu:1 request gives way to v's group
    del near, far, bump


def test_an_unknown_op_only_joins_through_class():
    g = kf.Graph()
    with g.as_default():
        v = kf.Variable(1.0, name="v")
        with kf.colocate_with(v.op):
            kf.identity(v, name="reader")
    roots, _ = _groups(g.as_graph_def(), unknown={"reader"})
    assert roots["reader"] == roots["v"]
