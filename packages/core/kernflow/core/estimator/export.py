"""`kf.estimator.export`: what an `Estimator` serves when it exports a SavedModel (TF1).

A `serving_input_receiver_fn` builds, in the export graph, the tensors a client feeds
(`receiver_tensors`, e.g. one string placeholder of serialized Examples) and the `features` the
model_fn reads from them; `ServingInputReceiver` names both. The export graph is then the model
in PREDICT mode over those features, and every `ExportOutput` of its `EstimatorSpec` becomes a
SignatureDef over the receiver tensors (outputs that cannot be signed over them, e.g. a classify
signature over float placeholders, are left out and logged, as TF does).

Export directories are timestamped: `<export_dir_base>/<seconds since the epoch>`, built under
`<export_dir_base>/temp-<seconds>` and renamed into place, so a reader never sees half an export.
"""

from __future__ import annotations

import collections
import logging
import os
import time

from kernflow.core.estimator.export_output import (ClassificationOutput, ExportOutput, PredictOutput,
                                                   RegressionOutput)
from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.framework.sparse_tensor import SparseTensor
from kernflow.core.framework.tensor_shape import TensorShape

__all__ = ["ServingInputReceiver", "TensorServingInputReceiver", "build_parsing_serving_input_receiver_fn",
           "build_raw_serving_input_receiver_fn", "ExportOutput", "ClassificationOutput",
           "RegressionOutput", "PredictOutput"]

_log = logging.getLogger(__name__)

SINGLE_FEATURE_DEFAULT_NAME = "feature"
SINGLE_RECEIVER_DEFAULT_NAME = "input"


def _wrap_and_check(tensors, field_name):
    """{name: Tensor or SparseTensor}; a single tensor is named by the field's default name."""
    if not isinstance(tensors, dict):
        tensors = {SINGLE_FEATURE_DEFAULT_NAME if field_name == "features"
                   else SINGLE_RECEIVER_DEFAULT_NAME: tensors}
    if not tensors:
        raise ValueError(f"{field_name} must be defined.")
    for name, tensor in tensors.items():
        if not isinstance(name, str):
            raise ValueError(f"{field_name} keys must be strings: {name!r}.")
        if not isinstance(tensor, (_ops.Tensor, SparseTensor)):
            raise ValueError(f"{field_name} must be a Tensor or SparseTensor: {tensor!r} for key {name!r}.")
    return tensors


def _check_alternatives(alternatives):
    if alternatives is None:
        return None
    if not isinstance(alternatives, dict):
        raise ValueError(f"receiver_tensors_alternatives must be a dict: {alternatives}.")
    return {key: _wrap_and_check(tensors, "receiver_tensors_alternative")
            for key, tensors in alternatives.items()}


class ServingInputReceiver(collections.namedtuple(
        "ServingInputReceiver", ["features", "receiver_tensors", "receiver_tensors_alternatives"])):
    """The features a model reads and the tensors a serving client feeds.

    Args:
        features: a Tensor, SparseTensor or dict {string: Tensor or SparseTensor} passed to the
            model_fn (a single tensor becomes {"feature": tensor}).
        receiver_tensors: a Tensor or dict {string: Tensor}: the signature inputs (a single
            tensor becomes {"input": tensor}).
        receiver_tensors_alternatives: {name: receiver tensors}: more sets of inputs, each
            giving signatures named "<name>:<output key>".

    Raises:
        ValueError: a key is not a string or a value not a tensor.
    """

    def __new__(cls, features, receiver_tensors, receiver_tensors_alternatives=None):
        return super().__new__(cls, _wrap_and_check(features, "features"),
                               _wrap_and_check(receiver_tensors, "receiver_tensors"),
                               _check_alternatives(receiver_tensors_alternatives))


class TensorServingInputReceiver(collections.namedtuple(
        "TensorServingInputReceiver", ["features", "receiver_tensors", "receiver_tensors_alternatives"])):
    """A `ServingInputReceiver` whose features are one Tensor, passed to the model_fn as is.

    Raises:
        ValueError: `features` is not a single Tensor or SparseTensor.
    """

    def __new__(cls, features, receiver_tensors, receiver_tensors_alternatives=None):
        if features is None or isinstance(features, dict):
            raise ValueError(f"features must be defined and a single Tensor: {features!r}.")
        receiver = ServingInputReceiver(features, receiver_tensors, receiver_tensors_alternatives)
        return super().__new__(cls, receiver.features[SINGLE_FEATURE_DEFAULT_NAME],
                               receiver.receiver_tensors, receiver.receiver_tensors_alternatives)


def build_parsing_serving_input_receiver_fn(feature_spec, default_batch_size=None):
    """A serving_input_receiver_fn that parses serialized `tf.Example`s with `feature_spec`.

    Args:
        feature_spec: {feature name: FixedLenFeature, VarLenFeature, ...} (as `kf.parse_example`).
        default_batch_size: the static batch size of the input (None: any).

    Returns:
        A function returning a `ServingInputReceiver` with one string placeholder
        "input_example_tensor" under the key "examples".
    """
    def serving_input_receiver_fn():
        from kernflow.core.ops import array_ops, parsing_ops
        serialized = array_ops.placeholder(_dtypes.string, [default_batch_size], name="input_example_tensor")
        features = parsing_ops.parse_example(serialized, feature_spec)
        return ServingInputReceiver(features, {"examples": serialized})
    return serving_input_receiver_fn


def build_raw_serving_input_receiver_fn(features, default_batch_size=None):
    """A serving_input_receiver_fn feeding the features directly through placeholders.

    Args:
        features: {name: Tensor}: each gives a placeholder of its dtype, name and shape (the first
            dimension replaced by `default_batch_size`).
        default_batch_size: the static batch size (None: any).

    Returns:
        A function returning a `ServingInputReceiver` whose features are its receiver tensors.
    """
    def serving_input_receiver_fn():
        from kernflow.core.ops import array_ops
        receiver_tensors = {}
        for name, tensor in features.items():
            dims = tensor.get_shape().as_list()
            if dims:
                dims[0] = default_batch_size
            receiver_tensors[name] = array_ops.placeholder(tensor.dtype, TensorShape(dims),
                                                           name=tensor.op.name)
        return ServingInputReceiver(receiver_tensors, dict(receiver_tensors))
    return serving_input_receiver_fn


def build_all_signature_defs(receiver_tensors, export_outputs, receiver_tensors_alternatives=None,
                             serving_only=True):
    """{signature key: SignatureDef} of each export output over each set of receiver tensors.

    Outputs that raise ValueError over the receiver tensors are left out (and logged); with
    `serving_only`, so are signatures `is_valid_signature` rejects.

    Raises:
        ValueError: `export_outputs` is not a dict.
    """
    from kernflow.core.saved_model.signature_def_utils import is_valid_signature
    if not isinstance(receiver_tensors, dict):
        receiver_tensors = {SINGLE_RECEIVER_DEFAULT_NAME: receiver_tensors}
    if not isinstance(export_outputs, dict):
        raise ValueError(f"export_outputs must be a dict and not {type(export_outputs)}")
    sets = [("", receiver_tensors)] + sorted((receiver_tensors_alternatives or {}).items())
    signatures, excluded = {}, {}
    for receiver_name, tensors in sets:
        for output_key, output in export_outputs.items():
            key = f"{receiver_name}:{output_key}" if receiver_name else f"{output_key or 'None'}"
            try:
                signatures[key] = output.as_signature_def(tensors)
            except ValueError as e:
                excluded[key] = str(e)
    for key, why in sorted(excluded.items()):
        _log.info("Signature %s was not exported: %s", key, why)
    if serving_only:
        signatures = {k: v for k, v in signatures.items() if is_valid_signature(v)}
    return signatures


def get_timestamped_export_dir(export_dir_base):
    """`<export_dir_base>/<seconds since the epoch>`, as bytes, naming a directory that does not
    exist yet (waits up to 10 s for a free second).

    Raises:
        RuntimeError: every candidate for 10 seconds exists.
    """
    for attempt in range(1, 11):
        path = os.path.join(os.fsdecode(export_dir_base), str(int(time.time())))
        if not os.path.exists(path):
            return os.fsencode(path)
        _log.warning("Directory %s already exists; retrying (attempt %d/10).", path, attempt)
        time.sleep(1)
    raise RuntimeError("Failed to obtain a unique export directory name after 10 attempts.")


def get_temp_export_dir(timestamped_export_dir):
    """The staging directory `temp-<timestamp>` beside a timestamped export dir (bytes)."""
    head, tail = os.path.split(os.fsdecode(timestamped_export_dir))
    return os.fsencode(os.path.join(head, "temp-" + tail))
