"""Memory types: in which memory (host or device) each value of a partition lives.

Used by the executor (`compile_partition`) for devices with their own memory (GPUs); see
`MemoryTypes`. Host-memory args are named in the kernel's `KernelDef`; `OpDef.expand_inputs` and
`expand_outputs` map each flattened input or output to its arg.
"""

from __future__ import annotations

__all__ = ["MemoryTypes"]


_HANDLE_TYPES = ("resource", "variant", "string")   # never in device memory


class MemoryTypes:
    """Host/device memory of each slot of a partition on a device with its own memory (a GPU).

    TF's memory types: a kernel lists the args it keeps in host memory (`KernelDef.host_memory`:
    shapes, axes, small int32 tensors) and everything else lives in device memory. A slot's memory is
    its producer's (constants are uploaded once; feeds may be either and are converted on use); an
    input whose slot lives in the other memory gets a conversion (`_Node.convert`). A host-memory
    input fed by a constant reads a host copy of the constant, made once at compile time.
    """

    def __init__(self, device):
        self.device = device
        self.kind: dict[int, str] = {}          # slot -> "host" | "device" (absent: either)
        self.const_host: dict[int, object] = {}
        self.host_copy: dict[int, int] = {}     # const slot -> slot of its host copy

    def const(self, slot, host_value) -> None:
        self.kind[slot] = "device"
        self.const_host[slot] = host_value

    def bind(self, node, kd, op_def, attrs, consts, total, in_dtypes=()) -> int:
        host = {n for n in kd.host_memory if not n.startswith("?")}
        either = {n[1:] for n in kd.host_memory if n.startswith("?")}
        all_host = "*" in host
        in_names = [a.name for a, _ in op_def.expand_inputs(attrs)]
        host_inputs, shape_inputs = [], []
        for pos, s in enumerate(node.inputs):
            name = in_names[pos] if pos < len(in_names) else ""
            if kd.forwards or name in either or \
                    (pos < len(in_dtypes) and in_dtypes[pos].base_dtype.name in _HANDLE_TYPES):
                if name in either:
                    shape_inputs.append(pos)
                continue  # reads metadata only, passes the value on where it is, or is a handle
            need = "host" if all_host or name in host else "device"
            if need == "host":
                host_inputs.append(pos)
            if node.deref[pos]:
                node.convert.append((pos, need))  # a variable's buffer may live in either memory
                continue
            have = self.kind.get(s)
            if need == "host" and s in self.const_host:
                copy = self.host_copy.get(s)
                if copy is None:
                    copy = self.host_copy[s] = total
                    consts[copy] = self.const_host[s]
                    self.kind[copy] = "host"
                    total += 1
                node.inputs[pos] = copy
            elif have != need:
                node.convert.append((pos, need))
        node.host_inputs, node.shape_inputs = tuple(host_inputs), tuple(shape_inputs)
        out_names = [a.name for a, _ in op_def.expand_outputs(attrs)]
        # A forwarding op (Identity, Enter, Switch, Merge...) passes its data input on where it
        # lives: its outputs have that input's memory when every data input agrees and is known
        # (a Merge's back edge is not known yet), and no fixed memory otherwise, so that consumers
        # convert whatever arrives.
        fwd = None
        if kd.forwards:
            kinds = {None if node.deref[p] else self.kind.get(node.inputs[p])
                     for p in range(len(node.inputs))
                     if p >= len(in_names) or in_names[p] not in host}
            fwd = kinds.pop() if len(kinds) == 1 else None
        for i in range(node.num_outputs):
            s = node.out_base + i
            if all_host or (i < len(out_names) and out_names[i] in host):
                self.kind[s] = "host"
            elif kd.forwards:
                if fwd is not None:
                    self.kind[s] = fwd
            else:
                self.kind[s] = "device"
        return total

