"""Summary ops of TF1's ``tf.summary`` (TF's ``gen_logging_ops``): each outputs a serialized
`Summary` protobuf as a scalar string (CPU kernels in kernflow.kernels.cpu.summary).

ScalarSummary (tagged simple values), HistogramSummary (TF's exponential bucket layout),
ImageSummary (PNG), AudioSummaryV2 (16-bit WAV), TensorSummaryV2 / TensorSummary (a TensorProto)
and MergeSummary (the union of several serialized summaries). The user-facing functions
(`kf.summary.scalar`, ...) live in kernflow.core.summary; the wrappers here take the tag as given.

Example::

    s = scalar_summary("loss", kf.constant(0.5))          # b"\\n\\x0b\\n\\x04loss\\x15\\x00\\x00\\x00?"
    merged = merge_summary([s, histogram_summary("w", w)])
"""

from __future__ import annotations

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework.gradient_registry import NotDifferentiable
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.framework.op_def_registry import register_op

__all__ = ["scalar_summary", "histogram_summary", "image_summary", "audio_summary_v2", "tensor_summary_v2",
           "tensor_summary", "merge_summary"]

# Op types of this module: host only (string outputs; kernel_contract.HOST_ONLY_OPS), no gradient.
SUMMARY_OPS = ("ScalarSummary", "HistogramSummary", "ImageSummary", "AudioSummaryV2", "TensorSummaryV2",
               "TensorSummary", "MergeSummary", "_FusedScalarSummaries")


def _check_scalar(op, i: int, what: str):
    s = op.inputs[i].shape
    if s.rank is not None and s.rank != 0:
        raise ValueError(f"{op.type} {op.name}: {what} must be a scalar (rank 0), got shape {s}")


def _summary_shape(*scalar_inputs):
    def shape_fn(op):
        for i, what in scalar_inputs:
            _check_scalar(op, i, what)
        return [_ts.TensorShape([])]
    return shape_fn


register_op("ScalarSummary", inputs=["tags: string", "values: T"], outputs=["summary: string"],
            attrs=["T: realnumbertype"], shape_fn=_summary_shape(),
            doc="A Summary with one simple_value per element of `values`, tagged by the element of "
                "`tags` at the same position (tags and values have the same shape).")
register_op("HistogramSummary", inputs=["tag: string", "values: T"], outputs=["summary: string"],
            attrs=["T: realnumbertype = float"], shape_fn=_summary_shape((0, "tag")),
            doc="A Summary with a histogram of `values` (TF's default buckets: limits growing by 10% "
                "from 1e-12 to 1e20, mirrored, and 0); InvalidArgument on a NaN or infinity.")
register_op("ImageSummary", inputs=["tag: string", "tensor: T"], outputs=["summary: string"],
            attrs=["max_images: int >= 1 = 3", "T: {uint8, float, half, double} = float"],
            shape_fn=_summary_shape((0, "tag")),
            doc="A Summary with up to `max_images` PNG images from the 4-D `tensor` [batch, height, "
                "width, 1|3|4]; float images are scaled into [0, 255] per image, non-finite pixels red; "
                "tags 'tag/image/i' (or 'tag/image' when max_images is 1).")
register_op("AudioSummaryV2", inputs=["tag: string", "tensor: float", "sample_rate: float"],
            outputs=["summary: string"], attrs=["max_outputs: int >= 1 = 3"],
            shape_fn=_summary_shape((0, "tag"), (2, "sample_rate")),
            doc="A Summary with up to `max_outputs` 16-bit WAV clips from `tensor` [batch, frames, "
                "channels] or [batch, frames], values in [-1, 1]; tags 'tag/audio/i' (or 'tag/audio').")
register_op("TensorSummaryV2", inputs=["tag: string", "tensor: T", "serialized_summary_metadata: string"],
            outputs=["summary: string"], attrs=["T: type"],
            shape_fn=_summary_shape((0, "tag"), (2, "serialized_summary_metadata")),
            doc="A Summary with `tensor` as a TensorProto under `tag`, with the SummaryMetadata "
                "serialized in `serialized_summary_metadata`.")
register_op("TensorSummary", inputs=["tensor: T"], outputs=["summary: string"],
            attrs=["T: type", "description: string = ''", "labels: list(string) = []",
                   "display_name: string = ''"], shape_fn=_summary_shape(),
            doc="The first tensor summary op: a Summary with `tensor` as a TensorProto under the op's "
                "node_name; `description` is a SummaryDescription as JSON (get_summary_description).")
register_op("MergeSummary", inputs=["inputs: N * string"], outputs=["summary: string"],
            attrs=["N: int >= 1"], shape_fn=_summary_shape(),
            doc="The union of the values of the serialized Summary protos in `inputs` (any shapes); "
                "InvalidArgument on a duplicate tag or bytes that do not parse.")

register_op("_FusedScalarSummaries", inputs=["values: T"], outputs=["summary: string"],
            attrs=["T: list(type)", "tags: list(string)", "summary_nodes: list(string)"],
            shape_fn=lambda op: [_ts.TensorShape([])],
            doc="What MergeSummary of scalar ScalarSummary ops with distinct constant tags outputs: "
                "one simple_value per value, tagged `tags[i]`. Made by the summary fusion pass "
                "(kernflow.core.runtime.summary_fusion); `summary_nodes` names the ScalarSummary "
                "node of each value for errors.")

for _op in SUMMARY_OPS:
    NotDifferentiable(_op)


def _string(value, name):
    return _ops.convert_to_tensor(value, dtype=_dtypes.string, name=name)


def scalar_summary(tags, values, name=None):
    """Outputs a Summary with scalar values (TF1 `tf.scalar_summary`'s op).

    Args:
        tags: a string tensor (or str): the tags.
        values: a real numeric tensor of the same shape as `tags`.
        name: op name.

    Returns:
        A scalar string tensor: the serialized Summary.
    """
    return apply_op("ScalarSummary", [_string(tags, "tags"), values], name=name).outputs[0]


def histogram_summary(tag, values, name=None):
    """Outputs a Summary with a histogram of `values` under `tag` (a scalar string)."""
    return apply_op("HistogramSummary", [_string(tag, "tag"), values], name=name).outputs[0]


def image_summary(tag, tensor, max_images=3, name=None):
    """Outputs a Summary with up to `max_images` PNG images of the 4-D `tensor`."""
    return apply_op("ImageSummary", [_string(tag, "tag"), tensor], {"max_images": max_images},
                    name=name).outputs[0]


def audio_summary_v2(tag, tensor, sample_rate, max_outputs=3, name=None):
    """Outputs a Summary with up to `max_outputs` WAV clips of `tensor` at `sample_rate` Hz."""
    rate = _ops.convert_to_tensor(sample_rate, dtype=_dtypes.float32, name="sample_rate")
    return apply_op("AudioSummaryV2", [_string(tag, "tag"), tensor, rate], {"max_outputs": max_outputs},
                    name=name).outputs[0]


def tensor_summary_v2(tag, tensor, serialized_summary_metadata, name=None):
    """Outputs a Summary with `tensor` under `tag` and the given serialized SummaryMetadata."""
    return apply_op("TensorSummaryV2", [_string(tag, "tag"), tensor,
                                        _string(serialized_summary_metadata, "serialized_summary_metadata")],
                    name=name).outputs[0]


def tensor_summary(tensor, description="", labels=None, display_name="", name=None):
    """Outputs a Summary with `tensor` under the op's node name (the first TensorSummary op).

    Args:
        tensor: any tensor.
        description: a SummaryDescription as JSON (read back by `kf.summary.get_summary_description`).
        labels: strings kept on the node.
        display_name: kept on the node.
        name: op name.
    """
    attrs = {"description": description, "labels": list(labels or []), "display_name": display_name}
    return apply_op("TensorSummary", [tensor], attrs, name=name).outputs[0]


def merge_summary(inputs, name=None):
    """Outputs the union of the serialized Summary protos of the string tensors `inputs`."""
    tensors = [_string(x, "inputs") for x in inputs]
    return apply_op("MergeSummary", [tensors], name=name).outputs[0]
