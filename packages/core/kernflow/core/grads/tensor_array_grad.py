"""Gradients of the TensorArray ops (TF1's scheme); the Stack ops have none.

The gradient of a forward array lives in a gradient array (`TensorArray.grad`) keyed by the
gradient computation's name scope (the "source", e.g. ``gradients`` or ``outer/gradients_1``), so
every op of one `kf.gradients` call shares it. Each forward read becomes a write to the gradient
array and each forward write a read from it; flows order them: the gradients of a forward op's
`flow_in` are the flows of the gradient writes, so the gradient of an earlier write (a read from
the gradient array) runs after all of them. Gradient arrays sum repeated writes.
"""

from kernflow.core.framework import ops as _ops
from kernflow.core.framework.gradient_registry import NotDifferentiable, RegisterGradient
from kernflow.core.ops import array_ops
from kernflow.core.ops import stack_ops  # noqa: F401 - declares the Stack ops marked below
from kernflow.core.ops.tensor_array_ops import TensorArray

for _op in ("TensorArrayV3", "TensorArraySizeV3", "TensorArrayCloseV3", "TensorArrayGradV3",
            "StackV2", "StackPushV2", "StackPopV2", "StackCloseV2"):
    NotDifferentiable(_op)


def _grad_source(op_or_tensor):
    """The gradient computation `op_or_tensor` belongs to: its name up to the last ``gradients*``
    component (falling back to the current name scope, e.g. for a fed grad_ys).

    Raises:
        ValueError: if neither names a gradient computation.
    """
    for name in (op_or_tensor.name, _ops.get_default_graph().get_name_scope()):
        parts = name.split("/")
        pos = [i for i, p in enumerate(parts) if p.startswith("gradients")]
        if pos:
            return "/".join(parts[:pos[-1] + 1])
    raise ValueError(f"Expected op/tensor name to start with gradients (excluding scope), got: "
                     f"{op_or_tensor.name}")


def _grad_array(op, dtype, flow, source):
    forward = TensorArray(dtype, handle=op.inputs[0], flow=flow,
                          colocate_with_first_write_call=False)
    return forward.grad(source=source, flow=flow)


def _after_write(op, flow):
    """`flow` made to depend on the forward op's flow_out, so the gradient array is created (and
    read) only after the forward write ran."""
    flow_out = array_ops.identity(op.outputs[0], name="flow_out")
    with _ops.control_dependencies([flow_out]):
        return array_ops.identity(flow, name="write_barrier")


def _shaped_like(grad, value):
    """`grad` with the static shape of the forward `value` (the wrapped gradient array does not
    know the forward array's element shape)."""
    grad.set_shape(value.shape)
    return grad


def _register_element_grads(reader, writer, write_method, read_method):
    """Registers the gradients of one read op (Read, Gather) and its write op (Write, Scatter):
    both have inputs (handle, index or indices, [value,] flow_in)."""

    @RegisterGradient(reader)
    def _reader_grad(op, grad):
        _, index, flow = op.inputs
        g = _grad_array(op, op.get_attr("dtype"), flow, _grad_source(grad))
        return [None, None, getattr(g, write_method)(index, grad).flow]

    @RegisterGradient(writer)
    def _writer_grad(op, flow):
        flow = _after_write(op, flow)
        g = _grad_array(op, op.get_attr("T"), flow, _grad_source(flow))
        return [None, None, _shaped_like(getattr(g, read_method)(op.inputs[1]), op.inputs[2]), flow]


_register_element_grads("TensorArrayReadV3", "TensorArrayWriteV3", "write", "read")
_register_element_grads("TensorArrayGatherV3", "TensorArrayScatterV3", "scatter", "gather")


@RegisterGradient("TensorArrayConcatV3")
def _concat_grad(op, grad, unused_lengths_grad):
    flow = op.inputs[1]
    g = _grad_array(op, op.get_attr("dtype"), flow, _grad_source(grad))
    return [None, g.split(grad, lengths=op.outputs[1]).flow]


@RegisterGradient("TensorArraySplitV3")
def _split_grad(op, flow):
    flow = _after_write(op, flow)
    g = _grad_array(op, op.get_attr("T"), flow, _grad_source(flow))
    return [None, _shaped_like(g.concat(), op.inputs[1]), None, flow]
