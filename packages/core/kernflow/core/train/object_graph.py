"""The object graph of an object-based checkpoint (`kf.train.Checkpoint`): which Python objects are
tracked, their named dependencies, and the checkpoint keys of their values (TF's graph_view).

What is tracked, and the children (named edges) of each kind of object:

* `kf.Variable` and a partitioned variable (`get_variable(..., partitioner=...)`): leaves with one
  value, saved under ``<path>/.ATTRIBUTES/VARIABLE_VALUE``.
* an optimizer (`kf.train.Optimizer`): its non-slot variables by name ("beta1_power"); its slot
  variables are not children but *slot references*, keyed by the variable they belong to
  (``<variable path>/.OPTIMIZER_SLOT/<optimizer path>/<slot name>``) and tracked only when that
  variable is itself tracked.
* `kf.Module`: its attributes (sorted by name) that are tracked objects.
* `kf.layers.Layer`: its weights under their `add_weight` names ("kernel"), then its other
  attributes that are tracked objects.
* an object with a ``_kf_checkpoint_children()`` method (`kf.train.Checkpoint` has one): the
  ``(name, object)`` pairs it returns.
* a list or tuple (children "0", "1", ...) or a dict (its keys as strings, sorted): the entries that
  are tracked objects, when at least one is.
* a plain Python object: an instance of a class defined outside kernflow with a ``__dict__``; its
  attributes (sorted by name) that are tracked objects, when at least one is. Other kernflow
  objects (tensors, graphs, sessions...) and values without a ``__dict__`` are not tracked.

Invariants:

* Node 0 is the root. Nodes are numbered breadth-first, an object's children in the order above,
  then the slot variables (optimizers in node order, slot names sorted, variables in node order):
  the same program always yields the same numbering and keys.
* An object reachable along several paths is one node, named by the first path found; its value
  is saved once.
* The graph is computed afresh each time it is needed (every save, match or assertion), so
  objects created after a `restore()` (an optimizer's slots, a layer's weights) are seen.
"""

from __future__ import annotations

import types

from kernflow.core.protobuf import trackable_object_graph_pb2 as _pb

__all__ = ["OBJECT_GRAPH_KEY", "VARIABLE_VALUE", "ObjectGraphView", "is_variable", "children",
           "is_trackable", "is_plain_object", "escape_local_name", "match_saved_graph",
           "saved_node_names", "full_name"]

OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
VARIABLE_VALUE = "VARIABLE_VALUE"
_ATTRIBUTES = ".ATTRIBUTES"
_SLOT = ".OPTIMIZER_SLOT"
_UNTRACKED_MODULE_ATTRS = ("_name", "_scope_name")
_UNTRACKED_LAYER_ATTRS = ("_trainable_weights", "_non_trainable_weights", "_losses", "_updates",
                          "_scope", "_current_scope")


def escape_local_name(name: str) -> str:
    """TF's escaping of one path component: "." -> "..", "/" -> ".S" (keys stay unambiguous)."""
    return name.replace(".", "..").replace("/", ".S")


def _kinds():
    from kernflow.core.layers.base import Layer
    from kernflow.core.ops.misc_ops_tf2 import Module
    from kernflow.core.ops.partitioned_variables import PartitionedVariable
    from kernflow.core.ops.variables import Variable
    from kernflow.core.train.optimizer import Optimizer
    return Variable, PartitionedVariable, Optimizer, Module, Layer


def is_variable(obj) -> bool:
    """A `kf.Variable` or a partitioned variable: an object with one saved value."""
    variable, partitioned = _kinds()[:2]
    return isinstance(obj, (variable, partitioned))


def full_name(var) -> str:
    """The name a name-based `Saver` stores `var` under ("w"; a partitioned variable's full name)."""
    partitioned = _kinds()[1]
    return var.name if isinstance(var, partitioned) else var.op.name


def is_plain_object(obj) -> bool:
    if not hasattr(obj, "__dict__") or isinstance(obj, (type, types.ModuleType, types.FunctionType,
                                                        types.MethodType)):
        return False
    return not type(obj).__module__.startswith("kernflow.")


def _raw_children(obj):
    """(name, value) candidates of `obj`, before filtering the untracked ones."""
    _, _, optimizer, module, layer = _kinds()
    if is_variable(obj):
        return []
    if isinstance(obj, optimizer):
        return sorted(obj._non_slot.items())
    if hasattr(obj, "_kf_checkpoint_children"):
        return list(obj._kf_checkpoint_children())
    if isinstance(obj, layer):
        return _layer_children(obj)
    if isinstance(obj, module):
        return [(k, v) for k, v in sorted(vars(obj).items()) if k not in _UNTRACKED_MODULE_ATTRS]
    if isinstance(obj, dict):
        return sorted(((str(k), v) for k, v in obj.items()), key=lambda kv: kv[0])
    if isinstance(obj, (list, tuple)):
        return [(str(i), v) for i, v in enumerate(obj)]
    if is_plain_object(obj):
        return sorted(vars(obj).items())
    return []


def _layer_children(layer):
    scope = layer._scope.name + "/" if layer._scope is not None else ""
    out = []
    for w in layer._trainable_weights + layer._non_trainable_weights:
        name = full_name(w)
        out.append((name[len(scope):] if scope and name.startswith(scope) else name, w))
    out += [(k, v) for k, v in sorted(vars(layer).items()) if k not in _UNTRACKED_LAYER_ATTRS]
    return out


def is_trackable(obj, _active=None) -> bool:
    """Whether `obj` is a node kind (see the module docstring); containers and plain objects only
    when something tracked is reachable through them."""
    variable, partitioned, optimizer, module, layer = _kinds()
    if isinstance(obj, (variable, partitioned, optimizer, module, layer)) \
            or hasattr(obj, "_kf_checkpoint_children"):
        return True
    if not isinstance(obj, (dict, list, tuple)) and not is_plain_object(obj):
        return False
    active = set() if _active is None else _active
    if id(obj) in active:          # a cycle through containers/plain objects adds nothing
        return False
    active.add(id(obj))
    try:
        return any(is_trackable(v, active) for _, v in _raw_children(obj))
    finally:
        active.discard(id(obj))


def children(obj):
    """The tracked ``(local name, object)`` children of `obj`, in order, names unique."""
    out, names = [], set()
    for name, value in _raw_children(obj):
        if name not in names and is_trackable(value):
            names.add(name)
            out.append((name, value))
    return out


def _slot(optimizer, var, slot_name):
    variable = _kinds()[0]
    return optimizer.get_slot(var, slot_name) if isinstance(var, variable) else None


class ObjectGraphView:
    """The objects reachable from `root`, numbered breadth-first (see the invariants above).

    Attributes:
        nodes: the objects; ``nodes[0]`` is the root.
        prefixes: per node, the checkpoint key prefix ("model/w"; "" for the root).
        edges: per node, its ``(local name, node id)`` children.
        slot_refs: per node, its ``(variable node id, slot name, slot node id)`` (optimizers only).
    """

    def __init__(self, root):
        self.nodes, self.prefixes, self.edges, self.slot_refs = [], [], [], []
        self._ids: dict[int, int] = {}
        self._add(root, "")
        i = 0
        while i < len(self.nodes):
            for name, child in children(self.nodes[i]):
                path = escape_local_name(name)
                nid = self._add(child, f"{self.prefixes[i]}/{path}" if self.prefixes[i] else path)
                self.edges[i].append((name, nid))
            i += 1
        self._add_slots()

    def _add(self, obj, prefix) -> int:
        nid = self._ids.get(id(obj))
        if nid is None:
            nid = self._ids[id(obj)] = len(self.nodes)
            self.nodes.append(obj)
            self.prefixes.append(prefix)
            self.edges.append([])
            self.slot_refs.append([])
        return nid

    def _add_slots(self):
        optimizer = _kinds()[2]
        variables = [i for i, o in enumerate(self.nodes) if is_variable(o)]
        for oid in range(len(self.nodes)):
            opt = self.nodes[oid]
            if not isinstance(opt, optimizer):
                continue
            for slot_name in opt.get_slot_names():
                for vid in variables:
                    slot = _slot(opt, self.nodes[vid], slot_name)
                    if slot is None:
                        continue
                    key = (f"{self.prefixes[vid]}/{_SLOT}/{self.prefixes[oid]}/"
                           f"{escape_local_name(slot_name)}")
                    self.slot_refs[oid].append((vid, slot_name, self._add(slot, key)))

    def node_id(self, obj):
        """The node of `obj`, or None when it is not in the graph."""
        return self._ids.get(id(obj))

    def variable_nodes(self):
        """The ids of the nodes that hold a value."""
        return [i for i, o in enumerate(self.nodes) if is_variable(o)]

    def checkpoint_key(self, nid) -> str:
        return f"{self.prefixes[nid]}/{_ATTRIBUTES}/{VARIABLE_VALUE}"

    def saveables(self):
        """``{checkpoint key: variable}`` of every node that holds a value."""
        return {self.checkpoint_key(i): self.nodes[i] for i in self.variable_nodes()}

    def to_proto(self, optional=()):
        """The `TrackableObjectGraph` of this view (`optional`: node ids marked optional_restore)."""
        graph = _pb.TrackableObjectGraph()
        for nid, obj in enumerate(self.nodes):
            node = graph.nodes.add()
            for name, child in self.edges[nid]:
                node.children.add(node_id=child, local_name=name)
            if is_variable(obj):
                node.attributes.add(name=VARIABLE_VALUE, full_name=full_name(obj),
                                    checkpoint_key=self.checkpoint_key(nid),
                                    optional_restore=nid in optional)
            for vid, slot_name, sid in self.slot_refs[nid]:
                node.slot_variables.add(original_variable_node_id=vid, slot_name=slot_name,
                                        slot_variable_node_id=sid)
        return graph


def match_saved_graph(saved, root):
    """Binds the nodes of a saved `TrackableObjectGraph` to the objects reachable from `root`.

    Children are matched by local name, starting from node 0 = `root`; slot variables through the
    optimizer's slot references once their variable and optimizer are bound.

    Returns:
        ``{saved node id: object}`` for every node that found an object.
    """
    optimizer = _kinds()[2]
    bound = {0: root}
    queue = [0]
    while queue:
        nid = queue.pop(0)
        current = dict(children(bound[nid]))
        for ref in saved.nodes[nid].children:
            obj = current.get(ref.local_name)
            if obj is not None and ref.node_id not in bound:
                bound[ref.node_id] = obj
                queue.append(ref.node_id)
    for nid, obj in list(bound.items()):
        if isinstance(obj, optimizer):
            for ref in saved.nodes[nid].slot_variables:
                var = bound.get(ref.original_variable_node_id)
                slot = _slot(obj, var, ref.slot_name) if var is not None else None
                if slot is not None:
                    bound.setdefault(ref.slot_variable_node_id, slot)
    return bound


def saved_node_names(saved):
    """A readable path per node of a saved graph ("(root).model.w"), for error messages."""
    names = {0: "(root)"}
    queue = [0]
    while queue:
        nid = queue.pop(0)
        for ref in saved.nodes[nid].children:
            if ref.node_id not in names:
                names[ref.node_id] = f"{names[nid]}.{ref.local_name}"
                queue.append(ref.node_id)
    for nid, node in enumerate(saved.nodes):
        for ref in node.slot_variables:
            var = names.get(ref.original_variable_node_id, f"node {ref.original_variable_node_id}")
            names.setdefault(ref.slot_variable_node_id,
                             f"{var}'s slot '{ref.slot_name}' of {names.get(nid, nid)}")
    return names
