"""`kf.losses`: the TF1 loss functions (``tf.compat.v1.losses``).

Every loss multiplies the per-element losses by ``weights`` (a scalar, or a tensor of the losses'
rank whose dimensions are 1 or equal to the losses'), reduces them as ``reduction`` says, casts the
result back to the input dtype and adds it to ``loss_collection``.
"""

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops

__all__ = ["Reduction", "absolute_difference", "add_loss", "compute_weighted_loss", "cosine_distance",
           "get_losses", "get_regularization_loss", "get_regularization_losses", "get_total_loss",
           "hinge_loss", "huber_loss", "log_loss", "mean_pairwise_squared_error", "mean_squared_error",
           "sigmoid_cross_entropy", "softmax_cross_entropy", "sparse_softmax_cross_entropy"]


def _kf():
    import kernflow.core as kf  # the package imports this module's siblings first
    return kf


class Reduction:
    """How `compute_weighted_loss` reduces the weighted losses (TF1 names and values)."""
    NONE = "none"
    SUM = "weighted_sum"
    SUM_OVER_BATCH_SIZE = "weighted_sum_over_batch_size"
    MEAN = "weighted_mean"
    SUM_BY_NONZERO_WEIGHTS = "weighted_sum_by_nonzero_weights"
    SUM_OVER_NONZERO_WEIGHTS = SUM_BY_NONZERO_WEIGHTS

    @classmethod
    def all(cls):
        return (cls.NONE, cls.SUM, cls.MEAN, cls.SUM_OVER_BATCH_SIZE, cls.SUM_OVER_NONZERO_WEIGHTS,
                cls.SUM_BY_NONZERO_WEIGHTS)

    @classmethod
    def validate(cls, key):
        if key not in cls.all():
            raise ValueError(f"Invalid Reduction Key {key}.")


# ------------------------------------------------------------------------------------ helpers
def div_no_nan(x, y, name=None):
    """x / y, and 0 where y == 0 (gradients stay finite there)."""
    kf = _kf()
    with _ops.name_scope(name, "div_no_nan", [x, y]) as scope:
        x = _ops.convert_to_tensor(x)
        y = _ops.convert_to_tensor(y, dtype=x.dtype.base_dtype)
        zero = kf.equal(y, kf.zeros_like(y))
        safe_y = kf.where(zero, kf.ones_like(y), y)
        quotient = kf.truediv(x, safe_y)
        return kf.where(kf.broadcast_to(zero, kf.shape(quotient)), kf.zeros_like(quotient), quotient,
                        name=scope)


def _static_rank(t):
    return t.get_shape().ndims


def assert_broadcastable(weights, values):
    """Raises ValueError when static shapes show `weights` cannot be broadcast to `values`.

    As TF1's weights_broadcast_ops: weights must be a scalar, or have values' rank with each
    dimension 1 or equal to values'. Unknown shapes are not checked.
    """
    w_shape, v_shape = weights.get_shape(), values.get_shape()
    if w_shape.ndims == 0 or w_shape.ndims is None or v_shape.ndims is None:
        return
    msg = (f"weights can not be broadcast to values. values.rank={v_shape.ndims}. "
           f"weights.rank={w_shape.ndims}. values.shape={v_shape}. weights.shape={w_shape}.")
    if w_shape.ndims != v_shape.ndims:
        raise ValueError(msg)
    for w_dim, v_dim in zip(w_shape.as_list(), v_shape.as_list()):
        if w_dim is None or v_dim is None or w_dim == 1:
            continue
        if w_dim != v_dim:
            raise ValueError(msg)


def broadcast_weights(weights, values):
    """Broadcasts `weights` to the shape of `values` (checked as `assert_broadcastable`)."""
    kf = _kf()
    weights = _ops.convert_to_tensor(weights)
    values = _ops.convert_to_tensor(values)
    if weights.get_shape().is_fully_defined() and values.get_shape().is_fully_defined() and \
            weights.get_shape().as_list() == values.get_shape().as_list():
        return weights
    assert_broadcastable(weights, values)
    return kf.multiply(weights, kf.ones_like(values, dtype=weights.dtype))


def remove_squeezable_dimensions(labels, predictions, expected_rank_diff=0):
    """Squeezes the last dimension of one of them when their static ranks differ by one more
    (or less) than `expected_rank_diff` and that dimension is 1 (TF1 confusion_matrix helper)."""
    kf = _kf()
    labels = _ops.convert_to_tensor(labels)
    predictions = _ops.convert_to_tensor(predictions)
    p_rank, l_rank = _static_rank(predictions), _static_rank(labels)
    if p_rank is None or l_rank is None:
        return labels, predictions
    rank_diff = p_rank - l_rank
    last = predictions.get_shape().as_list()[-1:] if p_rank else []
    if rank_diff == expected_rank_diff + 1 and last and last[0] in (1, None):
        predictions = kf.squeeze(predictions, [-1])
    last = labels.get_shape().as_list()[-1:] if l_rank else []
    if rank_diff == expected_rank_diff - 1 and last and last[0] in (1, None):
        labels = kf.squeeze(labels, [-1])
    return labels, predictions


def _remove_squeezable_dimensions(labels, predictions, weights=None, expected_rank_diff=0):
    """TF1 losses' helper: squeezes labels/predictions, then a trailing 1 of weights to labels' rank."""
    kf = _kf()
    labels, predictions = remove_squeezable_dimensions(labels, predictions, expected_rank_diff)
    if weights is None:
        return labels, predictions, None
    weights = _ops.convert_to_tensor(weights)
    w_rank, l_rank = _static_rank(weights), _static_rank(labels)
    if w_rank is not None and l_rank is not None and w_rank - l_rank == 1:
        weights = kf.squeeze(weights, [-1])
    return labels, predictions, weights


def _num_elements(losses):
    kf = _kf()
    with _ops.name_scope(None, "num_elements") as scope:
        return kf.cast(kf.size(losses, name=scope), _dtypes.float32)


def _num_present(losses, weights, per_batch=False):
    """The number of elements of `losses` with a non-zero weight (per batch entry if asked)."""
    kf = _kf()
    if isinstance(weights, float) and weights != 0.0:
        return _num_elements(losses)
    with _ops.name_scope(None, "num_present", [losses, weights]) as scope:
        weights = kf.cast(weights, _dtypes.float32)
        present = kf.where(kf.equal(weights, 0.0), kf.zeros_like(weights), kf.ones_like(weights))
        present = broadcast_weights(present, losses)
        if per_batch:
            rank = _static_rank(present)
            axis = list(range(1, rank)) if rank is not None else kf.range(1, kf.rank(present))
            return kf.reduce_sum(present, axis=axis, keepdims=True, name=scope)
        return kf.reduce_sum(present, name=scope)


def _prepare(labels, predictions, names=("labels", "predictions")):
    """None checks, float32 casts and the static shape check common to the losses."""
    kf = _kf()
    if labels is None:
        raise ValueError(f"{names[0]} must not be None.")
    if predictions is None:
        raise ValueError(f"{names[1]} must not be None.")
    predictions = kf.cast(predictions, _dtypes.float32)
    labels = kf.cast(labels, _dtypes.float32)
    predictions.get_shape().assert_is_compatible_with(labels.get_shape())
    return labels, predictions


# ------------------------------------------------------------------------------- collections
def add_loss(loss, loss_collection=_ops.GraphKeys.LOSSES):
    """Adds `loss` to `loss_collection` (nothing when the collection is None or empty)."""
    if loss_collection:
        _ops.add_to_collection(loss_collection, loss)


def get_losses(scope=None, loss_collection=_ops.GraphKeys.LOSSES):
    """The losses in `loss_collection` whose names match `scope`."""
    return _ops.get_collection(loss_collection, scope)


def get_regularization_losses(scope=None):
    """The tensors in GraphKeys.REGULARIZATION_LOSSES whose names match `scope`."""
    return _ops.get_collection(_ops.GraphKeys.REGULARIZATION_LOSSES, scope)


def get_regularization_loss(scope=None, name="total_regularization_loss"):
    """The sum of the regularization losses (a 0.0 constant when there are none)."""
    kf = _kf()
    losses = get_regularization_losses(scope)
    if losses:
        return kf.add_n(losses, name=name)
    return kf.constant(0.0)


def get_total_loss(add_regularization_losses=True, name="total_loss", scope=None):
    """The sum of the losses in GraphKeys.LOSSES, plus the regularization losses if asked.

    Raises:
        ValueError: there are no losses at all.
    """
    kf = _kf()
    losses = get_losses(scope=scope)
    if add_regularization_losses:
        losses = losses + get_regularization_losses(scope=scope)
    if not losses:
        raise ValueError("No losses to sum: GraphKeys.LOSSES (and REGULARIZATION_LOSSES) are empty.")
    return kf.add_n(losses, name=name)


# ------------------------------------------------------------------------------------- losses
def compute_weighted_loss(losses, weights=1.0, scope=None, loss_collection=_ops.GraphKeys.LOSSES,
                          reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """Weights `losses` and reduces them.

    Args:
        losses: a Tensor [batch_size, d1, ..., dN].
        weights: a scalar or a Tensor broadcastable to `losses` (same rank, dims 1 or equal).
        scope: the name scope (default "weighted_loss").
        loss_collection: where the loss is added.
        reduction: a `Reduction` key.

    Returns:
        The loss, of `losses`' dtype: a scalar, or `losses`' shape for Reduction.NONE.

    Raises:
        ValueError: an invalid reduction, or weights that cannot be broadcast to losses.
    """
    kf = _kf()
    Reduction.validate(reduction)
    with _ops.name_scope(scope, "weighted_loss", [losses, weights]):
        losses = _ops.convert_to_tensor(losses)
        input_dtype = losses.dtype.base_dtype
        losses = kf.cast(losses, _dtypes.float32)
        weights = kf.cast(weights, _dtypes.float32)
        assert_broadcastable(weights, losses)
        weighted_losses = kf.multiply(losses, weights)
        if reduction == Reduction.NONE:
            loss = weighted_losses
        else:
            loss = kf.reduce_sum(weighted_losses)
            if reduction == Reduction.MEAN:
                loss = div_no_nan(loss, kf.reduce_sum(kf.ones_like(losses) * weights), name="value")
            elif reduction == Reduction.SUM_BY_NONZERO_WEIGHTS:
                loss = div_no_nan(loss, _num_present(losses, weights), name="value")
            elif reduction == Reduction.SUM_OVER_BATCH_SIZE:
                loss = div_no_nan(loss, _num_elements(losses), name="value")
        loss = kf.cast(loss, input_dtype)
        add_loss(loss, loss_collection)
        return loss


def absolute_difference(labels, predictions, weights=1.0, scope=None,
                        loss_collection=_ops.GraphKeys.LOSSES,
                        reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """Weighted |predictions - labels|. Raises ValueError on None inputs or a shape mismatch."""
    kf = _kf()
    with _ops.name_scope(scope, "absolute_difference", [predictions, labels, weights]) as scope:
        labels, predictions = _prepare(labels, predictions)
        losses = kf.abs(kf.subtract(predictions, labels))
        return compute_weighted_loss(losses, weights, scope, loss_collection, reduction=reduction)


def mean_squared_error(labels, predictions, weights=1.0, scope=None,
                       loss_collection=_ops.GraphKeys.LOSSES,
                       reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """Weighted (predictions - labels)**2. Raises ValueError on None inputs or a shape mismatch."""
    kf = _kf()
    with _ops.name_scope(scope, "mean_squared_error", [predictions, labels, weights]) as scope:
        labels, predictions = _prepare(labels, predictions)
        losses = kf.squared_difference(predictions, labels)
        return compute_weighted_loss(losses, weights, scope, loss_collection, reduction=reduction)


def cosine_distance(labels, predictions, axis=None, weights=1.0, scope=None,
                    loss_collection=_ops.GraphKeys.LOSSES,
                    reduction=Reduction.SUM_BY_NONZERO_WEIGHTS, dim=None):
    """1 - sum(labels * predictions, axis), for unit-normalized inputs.

    Raises:
        ValueError: `axis` (or its old name `dim`) missing or both given, or a shape mismatch.
    """
    kf = _kf()
    if dim is not None:
        if axis is not None:
            raise ValueError("Cannot specify both 'axis' and 'dim'")
        axis = dim
    if axis is None:
        raise ValueError("You must specify 'axis'.")
    with _ops.name_scope(scope, "cosine_distance_loss", [predictions, labels, weights]) as scope:
        labels, predictions = _prepare(labels, predictions)
        radial_diffs = kf.multiply(predictions, labels)
        losses = 1 - kf.reduce_sum(radial_diffs, axis=[axis], keepdims=True)
        return compute_weighted_loss(losses, weights, scope, loss_collection, reduction=reduction)


def hinge_loss(labels, logits, weights=1.0, scope=None, loss_collection=_ops.GraphKeys.LOSSES,
               reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """max(0, 1 - (2 * labels - 1) * logits), labels in {0, 1}."""
    kf = _kf()
    with _ops.name_scope(scope, "hinge_loss", [logits, labels, weights]) as scope:
        labels, logits = _prepare(labels, logits, ("labels", "logits"))
        all_ones = kf.ones_like(labels)
        labels = kf.subtract(2 * labels, all_ones)
        losses = kf.nn.relu(kf.subtract(all_ones, kf.multiply(labels, logits)))
        return compute_weighted_loss(losses, weights, scope, loss_collection, reduction=reduction)


def huber_loss(labels, predictions, weights=1.0, delta=1.0, scope=None,
               loss_collection=_ops.GraphKeys.LOSSES, reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """0.5 * x**2 for |x| <= delta, else 0.5 * delta**2 + delta * (|x| - delta); x = error."""
    kf = _kf()
    with _ops.name_scope(scope, "huber_loss", [predictions, labels, weights]) as scope:
        labels, predictions = _prepare(labels, predictions)
        abs_error = kf.abs(kf.subtract(predictions, labels))
        quadratic = kf.minimum(abs_error, delta)
        linear = kf.subtract(abs_error, quadratic)
        losses = kf.add(kf.multiply(0.5, kf.multiply(quadratic, quadratic)),
                        kf.multiply(float(delta), linear))
        return compute_weighted_loss(losses, weights, scope, loss_collection, reduction=reduction)


def log_loss(labels, predictions, weights=1.0, epsilon=1e-7, scope=None,
             loss_collection=_ops.GraphKeys.LOSSES, reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """-labels * log(p + eps) - (1 - labels) * log(1 - p + eps)."""
    kf = _kf()
    with _ops.name_scope(scope, "log_loss", [predictions, labels, weights]) as scope:
        labels, predictions = _prepare(labels, predictions)
        losses = -kf.multiply(labels, kf.log(predictions + epsilon)) - kf.multiply(
            (1 - labels), kf.log(1 - predictions + epsilon))
        return compute_weighted_loss(losses, weights, scope, loss_collection, reduction=reduction)


def mean_pairwise_squared_error(labels, predictions, weights=1.0, scope=None,
                                loss_collection=_ops.GraphKeys.LOSSES):
    """Mean over each batch entry's pairs (i, j) of ((p_i - p_j) - (l_i - l_j))**2, weighted.

    `weights` is a scalar or of shape [batch_size, 1, ..., 1] (one weight per batch entry).
    """
    kf = _kf()
    with _ops.name_scope(scope, "mean_pairwise_squared_error", [predictions, labels, weights]) as scope:
        labels, predictions = _prepare(labels, predictions)
        weights = kf.cast(weights, _dtypes.float32)
        diffs = kf.subtract(predictions, labels)
        rank = _static_rank(diffs)
        axis = list(range(1, rank)) if rank is not None else kf.range(1, kf.rank(diffs))
        sum_squares = kf.reduce_sum(kf.square(diffs), axis=axis, keepdims=True)
        num_present = _num_present(diffs, weights, per_batch=True)
        term1 = 2.0 * div_no_nan(sum_squares, num_present - 1)
        sum_diff = kf.reduce_sum(diffs, axis=axis, keepdims=True)
        term2 = 2.0 * div_no_nan(kf.square(sum_diff), kf.multiply(num_present, num_present - 1))
        loss = kf.reduce_sum(kf.multiply(term1 - term2, weights))
        mean_loss = kf.where(kf.reduce_sum(num_present) > 0, loss, kf.zeros_like(loss), name="value")
        add_loss(mean_loss, loss_collection)
        return mean_loss


def sigmoid_cross_entropy(multi_class_labels, logits, weights=1.0, label_smoothing=0, scope=None,
                          loss_collection=_ops.GraphKeys.LOSSES,
                          reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """Weighted sigmoid cross entropy; labels smoothed towards 1/2 when label_smoothing > 0."""
    kf = _kf()
    if multi_class_labels is None:
        raise ValueError("multi_class_labels must not be None.")
    if logits is None:
        raise ValueError("logits must not be None.")
    with _ops.name_scope(scope, "sigmoid_cross_entropy_loss",
                         [logits, multi_class_labels, weights]) as scope:
        logits = _ops.convert_to_tensor(logits)
        multi_class_labels = kf.cast(multi_class_labels, logits.dtype.base_dtype)
        logits.get_shape().assert_is_compatible_with(multi_class_labels.get_shape())
        if label_smoothing > 0:
            multi_class_labels = multi_class_labels * (1 - label_smoothing) + 0.5 * label_smoothing
        losses = kf.nn.sigmoid_cross_entropy_with_logits(labels=multi_class_labels, logits=logits,
                                                         name="xentropy")
        return compute_weighted_loss(losses, weights, scope, loss_collection, reduction=reduction)


def softmax_cross_entropy(onehot_labels, logits, weights=1.0, label_smoothing=0, scope=None,
                          loss_collection=_ops.GraphKeys.LOSSES,
                          reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """Weighted softmax cross entropy of [batch, num_classes] logits; `weights` is per example.

    With label_smoothing, labels become labels * (1 - ls) + ls / num_classes. No gradient flows
    into the labels.
    """
    kf = _kf()
    if onehot_labels is None:
        raise ValueError("onehot_labels must not be None.")
    if logits is None:
        raise ValueError("logits must not be None.")
    with _ops.name_scope(scope, "softmax_cross_entropy_loss", [logits, onehot_labels, weights]) as scope:
        logits = _ops.convert_to_tensor(logits)
        onehot_labels = kf.cast(onehot_labels, logits.dtype.base_dtype)
        logits.get_shape().assert_is_compatible_with(onehot_labels.get_shape())
        if label_smoothing > 0:
            num_classes = kf.cast(kf.shape(onehot_labels)[-1], logits.dtype.base_dtype)
            onehot_labels = onehot_labels * (1 - label_smoothing) + label_smoothing / num_classes
        onehot_labels = kf.stop_gradient(onehot_labels, name="labels_stop_gradient")
        losses = kf.nn.softmax_cross_entropy_with_logits_v2(labels=onehot_labels, logits=logits,
                                                            name="xentropy")
        return compute_weighted_loss(losses, weights, scope, loss_collection, reduction=reduction)


def sparse_softmax_cross_entropy(labels, logits, weights=1.0, scope=None,
                                 loss_collection=_ops.GraphKeys.LOSSES,
                                 reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """Weighted sparse softmax cross entropy; labels [d0..dn-1] (or with a trailing 1) of class
    ids, logits [d0..dn-1, num_classes]."""
    kf = _kf()
    if labels is None:
        raise ValueError("labels must not be None.")
    if logits is None:
        raise ValueError("logits must not be None.")
    with _ops.name_scope(scope, "sparse_softmax_cross_entropy_loss", [logits, labels, weights]) as scope:
        labels, logits, weights = _remove_squeezable_dimensions(labels, logits, weights,
                                                                expected_rank_diff=1)
        losses = kf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits,
                                                                name="xentropy")
        return compute_weighted_loss(losses, weights, scope, loss_collection, reduction=reduction)
