"""Elementwise fusion: replace clusters of elementwise nodes on one device by one generated kernel.

A pass over a pruned, placed GraphDef (TF's XLA auto-clustering, reduced to elementwise chains).
Each cluster becomes one `_FusedElementwise` node (kernflow.core.ops.fused_ops) whose `program`
attr lists the cluster's ops; a reduction (Sum, Mean, Max, Min over constant axes) that consumes a
cluster becomes a `_FusedReduction` node that reduces the program's result in the same kernel.

Heuristics and invariants:

* A cluster grows from its root (the node processed last, in reverse topological order) towards
  its producers. A producer joins only if every data consumer of it is already in the cluster (its
  value is needed nowhere else), it is not fetched, it sits on the root's device and its dtypes
  are supported. So only the root's value leaves the cluster: the fused node takes the root's name
  and output, and every consumer and fetch of the root keeps working.
* A member's control consumers are redirected to the fused node; a member whose control consumer
  can reach the root is refused, since redirecting it would close a cycle. With that rule no path
  leaves one cluster and re-enters it, so the rewritten graph stays acyclic.
* Scalar constants are inlined as program literals rather than becoming inputs (a chain of 1,000
  ``x + 1.0`` becomes one kernel with one input); a cluster has at most `MAX_INPUTS` inputs.
* Clusters of fewer than two ops (Identity counting for none) are left alone.
"""

from __future__ import annotations

import collections
import heapq

from kernflow.core.framework import attr_value
from kernflow.core.framework import dtypes as _dt
from kernflow.core.framework import tensor_util
from kernflow.core.framework.node_def_util import graph_without_nodes
from kernflow.core.ops.fused_ops import REDUCTION_OPS, format_literal
from kernflow.core.runtime.executor import parse_input
from kernflow.core.runtime.prune import output_dtypes_of

__all__ = ["fuse_elementwise", "jit_level", "fusing_device_types", "FUSIBLE", "MAX_INPUTS"]

MAX_INPUTS = 64
# OptimizerOptions.GlobalJitLevel values.
OFF, DEFAULT = -1, 0

_F = frozenset({_dt.float16, _dt.float32, _dt.float64})
_I = frozenset({_dt.int32, _dt.int64})
_B = frozenset({_dt.bool})
_FI = _F | _I
SUPPORTED_DTYPES = _F | _I | _B

# Fusible op types -> the dtypes their operand (the last input) may have.
FUSIBLE: dict[str, frozenset] = {
    **dict.fromkeys(("Add", "AddV2", "Sub", "Mul", "Maximum", "Minimum", "SquaredDifference",
                     "Neg", "Abs", "Square", "Sign", "Relu", "Relu6", "AddN", "BiasAdd"), _FI),
    **dict.fromkeys(("RealDiv", "Div", "Pow", "Reciprocal", "Sqrt", "Rsqrt", "Exp", "Log",
                     "Log1p", "Expm1", "Tanh", "Sigmoid", "Sin", "Cos", "Floor", "Ceil", "Elu",
                     "Softplus", "LeakyRelu", "ReluGrad", "Relu6Grad", "EluGrad", "SoftplusGrad",
                     "TanhGrad", "SigmoidGrad", "SqrtGrad", "RsqrtGrad", "ReciprocalGrad"), _F),
    **dict.fromkeys(("Less", "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual"), _FI),
    **dict.fromkeys(("LogicalAnd", "LogicalOr", "LogicalNot"), _B),
    **dict.fromkeys(("Select", "SelectV2", "Cast", "Identity"), SUPPORTED_DTYPES),
}
# Ops that only forward their input: members of a cluster, but no step of its program.
_ALIASES = frozenset({"Identity"})


def jit_level(config) -> int:
    """The session's OptimizerOptions.global_jit_level (DEFAULT, 0, when `config` is None)."""
    if config is None:
        return DEFAULT
    return int(config.graph_options.optimizer_options.global_jit_level)


def fusing_device_types(devices: dict, kernels, level: int) -> set:
    """Device types the pass fuses on at `level`: none when OFF, GPUs for DEFAULT, and every type
    with a `_FusedElementwise` kernel for ON_1/ON_2."""
    if level <= OFF:
        return set()
    types = {d.device_type for d in devices.values()}
    if level == DEFAULT:
        types &= {"GPU"}
    return {t for t in types if kernels.find("_FusedElementwise", t, {})}


def fuse_elementwise(graph_def, devices: dict, kernels, level: int):
    """Fuses clusters of elementwise ops of a pruned, placed graph into generated kernels.

    Args:
        graph_def: a pruned, placed GraphDef (every node has a full device name; `_Arg` and
            `_Retval` nodes mark feeds and fetches).
        devices: full device name -> Device (anything with a `device_type`).
        kernels: the `KernelRegistry` (asked whether a device type has the fused kernels).
        level: OptimizerOptions.global_jit_level: OFF (-1) fuses nothing, DEFAULT (0) fuses on GPU
            devices only, ON_1/ON_2 on every device type with a `_FusedElementwise` kernel.

    Returns:
        A new GraphDef, or `graph_def` itself when nothing was fused.
    """
    types = fusing_device_types(devices, kernels, level)
    if not types:
        return graph_def
    on = {name: d.device_type for name, d in devices.items() if d.device_type in types}
    if not any(nd.device in on for nd in graph_def.node):
        return graph_def
    g = _GraphIndex(graph_def)
    if g.pos is None:  # a cycle (loops): leave the graph alone
        return graph_def
    clusters = _Clusterer(g, on, kernels).run()
    if not clusters:
        return graph_def
    return _rewrite(graph_def, g, clusters)


class _GraphIndex:
    """Inputs, consumers, topological positions and dtypes of a GraphDef's nodes."""

    def __init__(self, graph_def):
        self.nodes = {nd.name: nd for nd in graph_def.node}
        self.data_in: dict[str, list] = {}
        self.ctrl_in: dict[str, list] = {}
        self.data_out = collections.defaultdict(list)
        self.ctrl_out = collections.defaultdict(list)
        for nd in graph_def.node:
            data, ctrl = [], []
            for s in nd.input:
                name, idx, is_ctrl = parse_input(s)
                if is_ctrl:
                    ctrl.append(name)
                    self.ctrl_out[name].append(nd.name)
                else:
                    data.append((name, idx))
                    self.data_out[name].append(nd.name)
            self.data_in[nd.name], self.ctrl_in[nd.name] = data, ctrl
        self.pos = self._toposort(graph_def)
        self._dtypes: dict[str, list] = {}
        self._attrs: dict[tuple, object] = {}

    def _toposort(self, graph_def):
        indeg = {nd.name: 0 for nd in graph_def.node}
        for name in indeg:
            for src, _ in self.data_in[name]:
                if src not in indeg:
                    return None
            indeg[name] = len(self.data_in[name]) + len(self.ctrl_in[name])
        ready = collections.deque(n for n, d in indeg.items() if d == 0)
        pos = {}
        while ready:
            n = ready.popleft()
            pos[n] = len(pos)
            for c in self.data_out.get(n, []) + self.ctrl_out.get(n, []):
                indeg[c] -= 1
                if indeg[c] == 0:
                    ready.append(c)
        return pos if len(pos) == len(indeg) else None

    def dtype(self, name: str, idx: int = 0):
        dts = self._dtypes.get(name)
        if dts is None:
            nd = self.nodes[name]
            try:
                dts = self._dtypes[name] = ([_dt.as_dtype(nd.attr["dtype"].type)] if nd.op == "Const"
                                            else output_dtypes_of(nd))
            except Exception:  # noqa: BLE001 - an op this process does not know: not fusible
                dts = self._dtypes[name] = []
        return dts[idx] if idx < len(dts) else None

    def shape(self, name: str, idx: int = 0):
        """The static shape of output idx from `_output_shapes`, or None."""
        a = self.nodes[name].attr.get("_output_shapes")
        if a is None or idx >= len(a.list.shape):
            return None
        return tensor_util.shape_from_proto(a.list.shape[idx])

    def attr(self, name: str, key: str, default=None):
        k = (name, key)
        if k not in self._attrs:
            a = self.nodes[name].attr.get(key)
            self._attrs[k] = None if a is None else attr_value.from_proto(a)
        v = self._attrs[k]
        return default if v is None else v

    def reaches(self, start: str, target: str, known_not: set) -> bool:
        """True if a path of data or control edges leads from `start` to `target`."""
        limit = self.pos[target]
        stack = [start]
        seen = set()
        while stack:
            n = stack.pop()
            if n == target:
                return True
            if n in seen or n in known_not or self.pos[n] > limit:
                continue
            seen.add(n)
            stack.extend(self.data_out.get(n, ()))
            stack.extend(self.ctrl_out.get(n, ()))
        known_not.update(seen)
        return False


class _Cluster:
    def __init__(self, root, members, reduction=None):
        self.root = root
        self.members = members          # names, in topological order; root last
        self.reduction = reduction      # (op type, axes, keep_dims) for a _FusedReduction
        self.inputs: list[str] = []     # tensor names
        self.dtypes: list = []
        self.program: list[str] = []
        self.out_type = None
        self.inlined: set[str] = set()  # Const nodes whose value became a literal


class _Clusterer:
    def __init__(self, g: _GraphIndex, on: dict, kernels):
        self.g = g
        self.on = on                    # device name -> device type, for the devices fused on
        self.kernels = kernels
        self.assigned: set[str] = set()

    def run(self) -> list[_Cluster]:
        clusters = []
        for root in sorted(self.g.pos, key=self.g.pos.__getitem__, reverse=True):
            if root in self.assigned or self.g.nodes[root].device not in self.on:
                continue
            reduction = self._reduction(root)
            if reduction is None and (not self._fusible(root) or self.g.nodes[root].op in _ALIASES):
                continue
            c = self._grow(root, reduction)
            if c is not None:
                clusters.append(c)
                self.assigned.update(c.members)
        return clusters

    # ------------------------------------------------------------------ membership
    def _fusible(self, name: str) -> bool:
        g, nd = self.g, self.g.nodes[name]
        allowed = FUSIBLE.get(nd.op)
        if allowed is None or not g.data_in[name]:
            return False
        out = g.dtype(name)
        in_dts = [g.dtype(s, i) for s, i in g.data_in[name]]
        if out is None or out.is_ref_dtype or out not in SUPPORTED_DTYPES or \
                any(d is None or d.base_dtype not in SUPPORTED_DTYPES for d in in_dts):
            return False
        if in_dts[-1].base_dtype not in allowed:
            return False
        # int32 tensors of accelerators live in host memory (TF's convention): host kernels.
        if self.on[nd.device] != "CPU" and _dt.int32 in {out, *(d.base_dtype for d in in_dts)}:
            return False
        check = _EXTRA_CHECKS.get(nd.op)
        return check is None or check(g, name, [d.base_dtype for d in in_dts], out)

    def _reduction(self, name: str):
        """(op, axes, keep_dims) if `name` is a reduction over constant axes a cluster may feed."""
        g, nd = self.g, self.g.nodes[name]
        if nd.op not in REDUCTION_OPS or len(g.data_in[name]) != 2:
            return None
        out = g.dtype(name)
        if out is None or out not in _FI:
            return None
        axis_node = g.nodes.get(g.data_in[name][1][0])
        if axis_node is None or axis_node.op != "Const" or g.ctrl_in[axis_node.name]:
            return None
        axes = g.attr(axis_node.name, "value").reshape(-1).tolist()
        return nd.op, [int(a) for a in axes], bool(g.attr(name, "keep_dims", False))

    def _literal(self, src: str, idx: int, consumer: str):
        """The value of a scalar Const input that can be inlined, else None."""
        g = self.g
        nd = g.nodes.get(src)
        if nd is None or nd.op != "Const" or g.ctrl_in[src] or idx != 0:
            return None
        v = g.attr(src, "value")
        dt = g.dtype(src)
        if v is None or v.size != 1 or dt not in SUPPORTED_DTYPES:
            return None
        if v.ndim:   # [1]-shaped: a scalar only where the consumer's result has at least its rank
            out = g.shape(consumer)
            if out is None or out.ndims is None or out.ndims < v.ndim:
                return None
        return v

    def _grow(self, root: str, reduction):
        g = self.g
        device = g.nodes[root].device
        members = {root}
        ext: set = set()     # (name, idx) read from outside the cluster, literals excluded
        heap: list = []
        known_not: set = set()
        root_inputs = g.data_in[root][:1] if reduction else g.data_in[root]

        def add_inputs(name, inputs):
            for src, idx in inputs:
                if self._literal(src, idx, name) is None:
                    ext.add((src, idx))
                    heapq.heappush(heap, (-g.pos[src], src))

        add_inputs(root, root_inputs)
        done = set()
        while heap:
            _, p = heapq.heappop(heap)
            if p in done:
                continue
            done.add(p)
            if p in self.assigned or g.nodes[p].device != device or not self._fusible(p):
                continue
            if any(c not in members for c in g.data_out[p]):
                continue
            if any(c not in members and g.reaches(c, root, known_not) for c in g.ctrl_out.get(p, ())):
                continue
            grown = (ext - {(p, 0)}) | {(s, i) for s, i in g.data_in[p]
                                        if self._literal(s, i, p) is None}
            if len(grown) > MAX_INPUTS:
                continue
            members.add(p)
            ext.discard((p, 0))
            add_inputs(p, g.data_in[p])
        ops = [m for m in members if m != root or not reduction]
        if sum(g.nodes[m].op not in _ALIASES for m in ops) < (1 if reduction else 2):
            return None
        c = _Cluster(root, sorted(members, key=g.pos.__getitem__), reduction)
        if not self._program(c) or not c.inputs:
            return None
        attrs = {"T": c.dtypes, "out_type": c.out_type}
        op = "_FusedReduction" if reduction else "_FusedElementwise"
        if not self.kernels.find(op, self.on[device], attrs):
            return None
        return c

    # ------------------------------------------------------------------ program
    def _program(self, c: _Cluster) -> bool:
        """Fills the cluster's inputs and program; False if a step cannot be written."""
        g = self.g
        members = set(c.members)
        value: dict[str, str] = {}
        index: dict[tuple, int] = {}
        body = c.members[:-1] if c.reduction else c.members
        for m in body:
            nd = g.nodes[m]
            args = []
            for src, idx in g.data_in[m]:
                if src in members:
                    args.append(value[src])
                    continue
                lit = self._literal(src, idx, m)
                if lit is not None:
                    args.append(format_literal(lit, g.dtype(src)))
                    c.inlined.add(src)
                    continue
                k = index.get((src, idx))
                if k is None:
                    k = index[(src, idx)] = len(c.inputs)
                    c.inputs.append(f"{src}:{idx}" if idx else src)
                    c.dtypes.append(g.dtype(src, idx).base_dtype)
                args.append(f"i{k}")
            if nd.op in _ALIASES:
                value[m] = args[0]
                continue
            out = g.dtype(m)
            if nd.op == "LeakyRelu":
                args.append(format_literal(g.attr(m, "alpha", 0.2), out))
            c.program.append(f"{nd.op} {out.name} {' '.join(args)}")
            value[m] = f"t{len(c.program) - 1}"
        if not c.program or value[body[-1]] != f"t{len(c.program) - 1}":
            return False
        c.out_type = g.dtype(c.root)
        if c.reduction and g.dtype(body[-1]) != c.out_type:
            return False
        return True


# ---------------------------------------------------------------------------- per-op checks
def _cast_ok(g, name, in_dts, out) -> bool:
    src = in_dts[0]
    return src == out or out in _F or (src in _I and out in _I)


def _equality_ok(g, name, in_dts, out) -> bool:
    return bool(g.attr(name, "incompatible_shape_error", True))


def _select_ok(g, name, in_dts, out) -> bool:
    """TF1 Select broadcasts a vector condition over dim 0: fuse only scalar or same-shape ones."""
    (c, ci), (t, ti) = g.data_in[name][0], g.data_in[name][1]
    cs, ts = g.shape(c, ci), g.shape(t, ti)
    if cs is None or cs.ndims is None:
        return False
    if cs.ndims == 0:
        return True
    return ts is not None and cs.is_fully_defined() and ts.is_fully_defined() and \
        cs.as_list() == ts.as_list()


def _bias_add_ok(g, name, in_dts, out) -> bool:
    """NHWC BiasAdd adds along the last dim: numpy broadcasting, once the ranks are known."""
    fmt = g.attr(name, "data_format", "NHWC")
    (v, vi), (b, bi) = g.data_in[name]
    vs, bs = g.shape(v, vi), g.shape(b, bi)
    return fmt in ("NHWC", b"NHWC") and vs is not None and vs.ndims is not None and \
        vs.ndims >= 2 and bs is not None and bs.ndims == 1


def _operands_match(g, name, in_dts, out) -> bool:
    """Ops whose inputs share one dtype T (a graph built by hand might break that)."""
    return all(d == in_dts[-1] for d in in_dts)


_EXTRA_CHECKS = {"Cast": _cast_ok, "Equal": _equality_ok, "NotEqual": _equality_ok,
                 "Select": _select_ok, "BiasAdd": _bias_add_ok}
for _op in ("Add", "AddV2", "Sub", "Mul", "Maximum", "Minimum", "SquaredDifference", "AddN",
            "RealDiv", "Div", "Pow", "ReluGrad", "Relu6Grad", "EluGrad", "SoftplusGrad", "TanhGrad",
            "SigmoidGrad", "SqrtGrad", "RsqrtGrad", "ReciprocalGrad", "Less", "LessEqual",
            "Greater", "GreaterEqual"):
    _EXTRA_CHECKS[_op] = _operands_match


# ---------------------------------------------------------------------------- rewrite
def _rewrite(graph_def, g: _GraphIndex, clusters: list[_Cluster]):
    """Returns a copy of graph_def with each cluster replaced by its fused node."""
    removed: dict[str, str] = {}
    by_root = {}
    for c in clusters:
        by_root[c.root] = c
        for m in c.members:
            if m != c.root:
                removed[m] = c.root
    if any(c.reduction for c in clusters):  # the axis constant is now an attr
        for c in clusters:
            if c.reduction:
                c.inlined.add(g.data_in[c.root][1][0])
    out = graph_without_nodes(graph_def)
    for nd in graph_def.node:
        if nd.name in removed:
            continue
        c = by_root.get(nd.name)
        new = out.node.add()
        if c is not None:
            _fused_node(new, nd, c, g, removed)
            continue
        new.CopyFrom(nd)
        if any(parse_input(s)[0] in removed for s in nd.input if s.startswith("^")):
            ins = list(dict.fromkeys(f"^{removed.get(s[1:], s[1:])}" if s.startswith("^") else s
                                     for s in nd.input))
            del new.input[:]
            new.input.extend(ins)
    referenced = {parse_input(s)[0] for nd in out.node for s in nd.input}
    dead = {n for c in clusters for n in c.inlined if n not in referenced}
    if dead:
        keep = [nd for nd in out.node if nd.name not in dead]
        del out.node[:]
        out.node.extend(keep)
    return out


def _fused_node(new, root_nd, c: _Cluster, g: _GraphIndex, removed: dict) -> None:
    new.name, new.device = root_nd.name, root_nd.device
    new.op = "_FusedReduction" if c.reduction else "_FusedElementwise"
    members = set(c.members)
    ctrl = []
    for m in c.members:
        for src in g.ctrl_in[m]:
            if src not in members:
                ctrl.append(f"^{removed.get(src, src)}")
    new.input.extend(c.inputs)
    new.input.extend(dict.fromkeys(ctrl))
    new.attr["T"].CopyFrom(attr_value.to_proto(c.dtypes, "list(type)"))
    new.attr["out_type"].CopyFrom(attr_value.to_proto(c.out_type, "type"))
    new.attr["program"].CopyFrom(attr_value.to_proto(c.program, "list(string)"))
    if c.reduction:
        op, axes, keep = c.reduction
        new.attr["reduction"].CopyFrom(attr_value.to_proto(op, "string"))
        new.attr["axis"].CopyFrom(attr_value.to_proto(axes, "list(int)"))
        new.attr["keep_dims"].CopyFrom(attr_value.to_proto(keep, "bool"))
    if "_output_shapes" in root_nd.attr:
        new.attr["_output_shapes"].CopyFrom(root_nd.attr["_output_shapes"])
