"""What a `model_fn` exports for serving: `ClassificationOutput`, `RegressionOutput`, `PredictOutput`
(TF1's tf.estimator.export.*Output).

Invariants: an output holds tensors of the model's graph, checked when it is made (classes are
strings, scores and regression values float); `as_signature_def(receiver_tensors)` turns it into a
SignatureDef over the serving input receiver's tensors. Classify and regress signatures take one
string tensor of serialized `tf.Example`s, so they raise ValueError over any other receiver; the
exporter then leaves that signature out, as TF does. `EstimatorSpec.export_outputs` is completed by
`get_export_outputs`: none means one `PredictOutput` of the predictions, a single output also
becomes the default serving signature, several outputs must name one default.
"""

from __future__ import annotations

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.framework.sparse_tensor import SparseTensor
from kernflow.core.saved_model import signature_constants as _sc
from kernflow.core.saved_model import signature_def_utils

__all__ = ["ExportOutput", "ClassificationOutput", "RegressionOutput", "PredictOutput",
           "get_export_outputs"]


def _is_tensor(x):
    return isinstance(x, (_ops.Tensor, SparseTensor))


class ExportOutput:
    """The base of the serving outputs of a model: one SignatureDef each."""

    def as_signature_def(self, receiver_tensors):
        """The SignatureDef of this output over `receiver_tensors` ({name: Tensor})."""
        raise NotImplementedError


def _single_string_input(kind, receiver_tensors):
    if len(receiver_tensors) != 1:
        raise ValueError(f"{kind} input must be a single string Tensor; got {receiver_tensors}")
    (_, examples), = receiver_tensors.items()
    if examples.dtype.base_dtype != _dtypes.string:
        raise ValueError(f"{kind} input must be a single string Tensor; got {receiver_tensors}")
    return examples


class ClassificationOutput(ExportOutput):
    """Scores and/or class names for the classify API.

    Args:
        scores: a float Tensor [batch, n] of class scores, or None.
        classes: a string Tensor [batch, n] of class names, or None.

    Raises:
        ValueError: both are None, or one is not a Tensor of the right dtype.
    """

    def __init__(self, scores=None, classes=None):
        if scores is not None and not (_is_tensor(scores) and scores.dtype.is_floating):
            raise ValueError(f"Classification scores must be a float32 Tensor; got {scores}")
        if classes is not None and not (_is_tensor(classes) and classes.dtype.base_dtype == _dtypes.string):
            raise ValueError(f"Classification classes must be a string Tensor; got {classes}")
        if scores is None and classes is None:
            raise ValueError("At least one of scores and classes must be set.")
        self._scores, self._classes = scores, classes

    scores = property(lambda self: self._scores)
    classes = property(lambda self: self._classes)

    def as_signature_def(self, receiver_tensors):
        examples = _single_string_input("Classification", receiver_tensors)
        return signature_def_utils.classification_signature_def(examples, self._classes, self._scores)


class RegressionOutput(ExportOutput):
    """One float value per example for the regress API.

    Raises:
        ValueError: `value` is not a float Tensor.
    """

    def __init__(self, value):
        if not (_is_tensor(value) and value.dtype.is_floating):
            raise ValueError(f"Regression output value must be a float32 Tensor; got {value}")
        self._value = value

    value = property(lambda self: self._value)

    def as_signature_def(self, receiver_tensors):
        examples = _single_string_input("Regression", receiver_tensors)
        return signature_def_utils.regression_signature_def(examples, self._value)


class PredictOutput(ExportOutput):
    """Any named tensors for the predict API.

    Args:
        outputs: a Tensor (exported as "output") or a dict {string key: Tensor}.

    Raises:
        ValueError: a key is not a string or a value not a Tensor.
    """

    def __init__(self, outputs):
        if not isinstance(outputs, dict):
            outputs = {"output": outputs}
        for key, value in outputs.items():
            if not isinstance(key, str):
                raise ValueError(f"Prediction output key must be a string; got {key!r}.")
            if not _is_tensor(value):
                raise ValueError(f"Prediction output value must be a Tensor; got {value!r} for key {key!r}.")
        self._outputs = dict(outputs)

    outputs = property(lambda self: self._outputs)

    def as_signature_def(self, receiver_tensors):
        return signature_def_utils.predict_signature_def(receiver_tensors, self._outputs)


def get_export_outputs(export_outputs, predictions):
    """The export outputs of an `EstimatorSpec`, completed as TF does.

    Args:
        export_outputs: {name: ExportOutput} or None.
        predictions: the spec's predictions (exported as a `PredictOutput` when there are no
            export outputs).

    Returns:
        A new dict holding a DEFAULT_SERVING_SIGNATURE_DEF_KEY entry (unless `export_outputs` is
        an empty dict).

    Raises:
        TypeError: `export_outputs` is not a dict, or a value is not an `ExportOutput`.
        ValueError: several outputs and none named DEFAULT_SERVING_SIGNATURE_DEF_KEY.
    """
    if export_outputs is None:
        return {_sc.DEFAULT_SERVING_SIGNATURE_DEF_KEY: PredictOutput(predictions)}
    if not isinstance(export_outputs, dict):
        raise TypeError(f"export_outputs must be dict, given: {export_outputs}")
    for value in export_outputs.values():
        if not isinstance(value, ExportOutput):
            raise TypeError(f"Values in export_outputs must be ExportOutput objects. Given: {export_outputs}")
    export_outputs = dict(export_outputs)
    if len(export_outputs) == 1:
        (value,) = export_outputs.values()
        export_outputs.setdefault(_sc.DEFAULT_SERVING_SIGNATURE_DEF_KEY, value)
    elif len(export_outputs) > 1 and _sc.DEFAULT_SERVING_SIGNATURE_DEF_KEY not in export_outputs:
        raise ValueError("Multiple export_outputs were provided, but none of them is specified as the "
                         "default.  Do this by naming one of them with "
                         "signature_constants.DEFAULT_SERVING_SIGNATURE_DEF_KEY.")
    return export_outputs
