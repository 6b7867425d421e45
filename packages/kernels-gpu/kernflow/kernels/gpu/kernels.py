"""Which kernel each op gets on a GPU, and in which memory its arguments live.

Three sources, in order of preference for each (op, dtype):

1. *Host kernels for int32*: as in TF, int32 tensors on a GPU device live in host memory (they are
   shapes, indices and loop counters: computing them on the device would cost a synchronization
   each time the host needs them). An op whose type attr ``T`` is int32 runs the CPU kernel with
   every argument in host memory. Random ops do the same for every dtype: their counter-based
   generators produce on the host exactly the numbers the CPU produces, and the executor uploads
   the result once.
2. *Hand-written kernels*: `fast.py` for the ops of a training step's hot path; `indexing.py`,
   `pooling.py` and `sparse_apply.py` for ops whose generic kernels cupy cannot run (host index
   arrays meeting device data, ``ufunc.at``): these replace the generic kernels of their ops
   for every dtype.
3. *Generic kernels* (`generic.py`): the CPU kernels' numpy source run against cupy.

Shape-like arguments (axes, shapes, sizes, paddings...) are host memory everywhere (`HOST_ARGS`).
Ops that only read a tensor's metadata (Shape, Size, Rank) take it from either memory. Ops with no
sensible GPU kernel (checkpoint I/O, string ops) are not registered: placement puts them on the CPU
and `log_device_placement` says why.
"""

from __future__ import annotations

import numpy as np

from kernflow.core.framework import dtypes
from kernflow.core.framework import op_def_registry
from kernflow.core.plugins.registry import KernelRegistry
from kernflow.core.runtime import base_kernels
from kernflow.kernels.gpu.array_module import DEVICE_DTYPES

__all__ = ["register", "CPU_ONLY_FAMILIES", "CPU_ONLY_OPS", "HOST_ARGS"]

DEVICE = "GPU"
# Families of the CPU plugin made into generic GPU kernels.
GENERIC_FAMILIES = ("math", "array", "state", "nn", "training", "tensor_array")
# Args of the stack and TensorArray kernels kept in host memory: the container handle (a host
# object whose elements are device arrays), indices, sizes and lengths. Elements and flows live on
# the device, so a loop on the GPU pushes and pops its saved values without leaving the GPU.
CONTAINER_HOST_ARGS = frozenset({"handle", "grad_handle", "index", "indices", "size", "lengths",
                                 "max_size"})
# Families whose int32 kernels run on the host (the segment family's other kernels are all
# hand-written: `indexing.py`).
INT32_HOST_FAMILIES = GENERIC_FAMILIES + ("segment",)
# Families whose kernels run on the host for a GPU device (see the module docstring).
HOST_FAMILIES = ("random",)
# Checkpoint I/O needs the file system: placement keeps it on the CPU.
CPU_ONLY_FAMILIES = ("io",)
# Ops of the families above left without a GPU kernel. The GPU contract test lists them too, so one
# landing must change both. `_FusedConv2D` is the remapper's CPU fusion (oneDNN post-ops); without a
# GPU kernel the pass leaves GPU convolutions to the GPU's own Conv2D. Unique's output size is data
# (as in TF1, host only: kernel_contract.HOST_ONLY_OPS), though its kernels live in the array family.
CPU_ONLY_OPS = frozenset({"_FusedConv2D", "Unique", "UniqueWithCounts"})
# Input args kept in host memory (by name) for every GPU kernel that has them.
HOST_ARGS = frozenset({
    "constant_values", "reduction_indices", "dimension", "axis", "shape", "dims", "dim", "begin", "end", "strides",
    "size", "multiples", "paddings", "perm", "split_dim", "size_splits", "start", "limit", "delta",
    "depth", "num_segments", "input_sizes", "filter_sizes", "orig_input_shape", "s0", "s1",
    "num_samples", "concat_dim", "k",
})
# Ops whose outputs are host memory and which read only the input's metadata.
METADATA_OPS = frozenset({"Shape", "ShapeN", "Size", "Rank"})
# Ops fully on the host whatever their types (shape arithmetic).
HOST_OPS = frozenset({"BroadcastGradientArgs", "ConcatOffset", "InvertPermutation", "Range"})
# Kernels that return their input itself.
FORWARDING = frozenset({"StopGradient", "PlaceholderWithDefault"})


def _host_args(op_type: str) -> tuple:
    od = op_def_registry.get(op_type)
    if od is None or op_type.startswith(("Apply", "SparseApply")):
        return ()
    return tuple(sorted({a.name for a in od.inputs} & HOST_ARGS))


def _container_args(op_type) -> set:
    od = op_def_registry.get(op_type)
    return {a.name for a in list(od.inputs) + list(od.outputs)} & CONTAINER_HOST_ARGS


def _allows_int32(op_type, kd) -> bool:
    od = op_def_registry.get(op_type)
    if od is None or "T" not in od.attrs:
        return False
    allowed = od.attrs["T"].allowed
    if allowed and dtypes.int32 not in allowed:
        return False
    cons = kd.constraints.get("T")
    return cons is None or dtypes.int32 in cons


def _recorded(family_module) -> KernelRegistry:
    rec = KernelRegistry()
    family_module.register(rec, device=DEVICE)
    return rec


def _copy(registry, kd, **changes) -> None:
    fields = dict(constraints={k: list(v) for k, v in kd.constraints.items()},
                  expensive=False, is_async=kd.is_async, needs_ctx=kd.needs_ctx,
                  host_memory=kd.host_memory, site=kd.site, fresh=kd.fresh, inplace=kd.inplace,
                  forwards=kd.forwards)
    factory = changes.pop("factory", kd.factory)
    fields.update(changes)
    registry.register(kd.op_type, DEVICE, factory, **fields)


def _device_constraints(op_type, kd, host):
    """A generic kernel's type constraints on the GPU: every type attr that types an argument in
    device memory allows only dtypes with device memory (a string GatherV2, say, is placed on the
    CPU as in TF, not handed object arrays on the GPU). None when no dtype is left."""
    od = op_def_registry.get(op_type)
    out = {k: list(v) for k, v in kd.constraints.items()}
    for attr in od.attrs.values():
        if attr.type != "type":
            continue
        if not any(a.type_attr == attr.name and a.name not in host for a in od.inputs + od.outputs):
            continue
        allowed = out.get(attr.name) or attr.allowed or DEVICE_DTYPES
        out[attr.name] = [t for t in allowed if t in DEVICE_DTYPES]
        if not out[attr.name]:
            return None
    return out


def _normalized(factory, op_type, host, needs_ctx=False):
    """Makes a generic kernel's outputs live where their memory type says (numpy code may build a
    result on the host from host-memory inputs, or on the device from device ones)."""
    import cupy
    od = op_def_registry.get(op_type)
    dev_t, host_t = cupy.ndarray, (np.ndarray, np.generic)

    def fix(v, kind):
        if kind == "device":
            if isinstance(v, host_t) and v.dtype.kind not in "OSUV":
                return cupy.asarray(v)
        elif isinstance(v, dev_t):
            return v.get()
        return v

    def make(ctx):
        inner = factory(ctx)
        # Host-memory inputs of one element arrive as numpy 0-d arrays; numpy scalars combine with
        # device arrays in cupy expressions (0-d host arrays do not).
        offset = 1 if needs_ctx else 0
        pos = [] if "*" in host else [i + offset for i, (a, _) in enumerate(od.expand_inputs(ctx.attrs))
                                      if a.name in host]
        if pos:
            def compute(*args):
                args = list(args)
                for p in pos:
                    a = args[p]
                    if type(a) is np.ndarray and a.ndim == 0:
                        args[p] = a[()]
                return inner(*args)
        else:
            compute = inner
        names = [a.name for a, _ in od.expand_outputs(ctx.attrs)]
        kinds = ["host" if "*" in host or n in host else "device" for n in names]
        if not kinds:
            return compute
        if len(kinds) == 1 and len(od.outputs) == 1 and not od.outputs[0].number_attr \
                and not od.outputs[0].type_list_attr:
            kind = kinds[0]
            return lambda *args: fix(compute(*args), kind)

        def run(*args):
            out = compute(*args)
            return [fix(v, k) for v, k in zip(out, kinds)]
        return run
    return make


def _on_device(device_factory):
    """Wraps a kernel factory so kernels of a GPU other than 0 run with it current."""
    def factory(ctx):
        compute = device_factory(ctx)
        if getattr(ctx.device, "ordinal", 0) == 0:
            return compute
        scope = ctx.device.scope

        def run(*args):
            with scope():
                return compute(*args)
        return run
    return factory


def register(registry) -> dict:
    """Registers every GPU kernel. Returns {op type: "host" | "fast" | "generic"} for reports."""
    import importlib

    from kernflow.kernels.gpu import fast, generic, indexing, pooling, sparse_apply
    source: dict[str, str] = {}
    base_kernels.register(registry, DEVICE)
    for op in ("Const", "Placeholder", "Identity", "Snapshot", "NoOp", "_Send", "_Recv"):
        source[op] = "base"
    # 1. int32 (and random) kernels on the host, from the CPU plugin's numpy modules.
    cpu_defs = {}
    for fam in INT32_HOST_FAMILIES + HOST_FAMILIES:
        rec = _recorded(importlib.import_module(f"kernflow.kernels.cpu.{fam}"))
        for (op, _), lst in rec._kernels.items():
            cpu_defs.setdefault(op, []).extend((fam, kd) for kd in lst)
    for op, lst in cpu_defs.items():
        for fam, kd in lst:
            if op in CPU_ONLY_OPS:
                continue
            if fam in HOST_FAMILIES or op in HOST_OPS:
                _copy(registry, kd, host_memory=("*",), inplace=None)
                source[op] = "host"
            elif op in METADATA_OPS:
                _copy(registry, kd, host_memory=("?input", "output"), inplace=None)
                source[op] = "host"
            elif _allows_int32(op, kd) and op not in METADATA_OPS and op not in FORWARDING:
                _copy(registry, kd, constraints={"T": [dtypes.int32]}, host_memory=("*",),
                      inplace=None)
    # 2. hand-written kernels.
    fast_rec = KernelRegistry()
    covered = fast.register(fast_rec, DEVICE)
    replaced = set()  # ops whose generic kernels are not registered for any dtype
    for mod in (indexing, pooling, sparse_apply):
        replaced |= mod.register(fast_rec, DEVICE)
    for (op, _), lst in fast_rec._kernels.items():
        for kd in lst:
            _copy(registry, kd, factory=_on_device(kd.factory), host_memory=kd.host_memory)
        source[op] = "fast"
    # 3. generic kernels for the rest (and for dtypes the hand-written ones leave out).
    for fam in GENERIC_FAMILIES:
        rec = _recorded(generic.load_family(fam))
        for (op, _), lst in rec._kernels.items():
            if op in HOST_OPS or op in METADATA_OPS or op in CPU_ONLY_OPS or fam in HOST_FAMILIES \
                    or op in replaced:
                continue
            for kd in lst:
                if op in covered and any(kd.constraints == f.constraints
                                         for f in fast_rec._kernels.get((op, DEVICE), ())):
                    continue
                host = set(kd.host_memory) | set(_host_args(op)) | set(fast.HOST_HYPERS.get(op, ()))
                if fam == "tensor_array":
                    host |= _container_args(op)
                forwards = kd.forwards or op in FORWARDING
                factory = kd.factory if forwards else _normalized(kd.factory, op, host, kd.needs_ctx)
                # (forwarding kernels hand on their input whatever it is: strings included)
                constraints = kd.constraints if forwards else _device_constraints(op, kd, host)
                if constraints is None:
                    continue
                try:
                    _copy(registry, kd, factory=_on_device(factory), host_memory=tuple(sorted(host)),
                          forwards=forwards, constraints=constraints)
                except ValueError:
                    continue  # same key as a hand-written kernel
                source.setdefault(op, "generic")
    return source
