"""Gradient checks by finite differences (TF1's `tf.test.compute_gradient[_error]`).

The Jacobian of y with respect to x is built twice: from `kf.gradients` (one backward pass per
element of y, with a one-hot `grad_ys`) and from central differences (two forward passes per
element of x). Both are [x_size, y_size] matrices: entry (i, j) is dy_j / dx_i.

Example::

    x = kf.placeholder(kf.float64, [2, 3])
    y = kf.tanh(x)
    with kf.Session():
        err = compute_gradient_error(x, [2, 3], y, [2, 3])
    assert err < 1e-4
"""

from __future__ import annotations

import numpy as np

__all__ = ["compute_gradient", "compute_gradient_error"]


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _is_variable(x) -> bool:
    return hasattr(x, "load") and hasattr(x, "initializer")


def _set(feed, sess, x, value):
    if _is_variable(x):
        x.load(value, sess)
    else:
        feed[x] = value


def _dense(value):
    return value.dense() if hasattr(value, "dense") else np.asarray(value)


def _check_dtype(t, what):
    dt = t.dtype.base_dtype
    if not dt.is_floating:
        raise TypeError(f"compute_gradient needs floating {what}, got {t.name} of type {dt.name}")


def _theoretical(sess, xs, x_shapes, x_values, y, y_shape, dy, grads, extra_feed):
    y_size = int(np.prod(y_shape, dtype=np.int64))
    dy_value = np.zeros(y_shape, dtype=dy.dtype.base_dtype.as_numpy_dtype)
    flat_dy = dy_value.reshape(-1)
    jacobians = [np.zeros((int(np.prod(s, dtype=np.int64)), y_size),
                          dtype=x.dtype.base_dtype.as_numpy_dtype) for x, s in zip(xs, x_shapes)]
    fetches = [g for g in grads if g is not None]
    for col in range(y_size):
        flat_dy[col] = 1
        feed = dict(extra_feed)
        for x, v in zip(xs, x_values):
            _set(feed, sess, x, v)
        feed[dy] = dy_value
        values = iter(sess.run(fetches, feed) if fetches else [])
        for jac, g in zip(jacobians, grads):
            if g is not None:
                jac[:, col] = _dense(next(values)).reshape(-1)
        flat_dy[col] = 0
    return jacobians


def _numerical(sess, xs, x_values, i, y, y_shape, delta, extra_feed):
    x_value = np.array(x_values[i], copy=True)
    flat = x_value.reshape(-1)
    y_size = int(np.prod(y_shape, dtype=np.int64))
    jac = np.zeros((flat.size, y_size), dtype=x_value.dtype)
    for row in range(flat.size):
        orig = flat[row]
        outs = []
        for step in (delta, -delta):
            flat[row] = orig + step
            feed = dict(extra_feed)
            for k, (x, v) in enumerate(zip(xs, x_values)):
                _set(feed, sess, x, x_value if k == i else v)
            outs.append(np.asarray(sess.run(y, feed), dtype=np.float64))
        flat[row] = orig
        jac[row, :] = ((outs[0] - outs[1]) / (2 * delta)).reshape(-1)
    return jac


def compute_gradient(x, x_shape, y, y_shape, x_init_value=None, delta=1e-3, init_targets=None,
                     extra_feed_dict=None):
    """Computes the theoretical and numerical Jacobians of y with respect to x.

    Runs in the default session (a temporary one on x's graph when there is none).

    Args:
        x: a Tensor (fed) or Variable (loaded), or a list of them.
        x_shape: the shape of x, or a list of shapes when x is a list.
        y: a floating Tensor.
        y_shape: the shape of y.
        x_init_value: numpy value(s) of x to differentiate at (default: uniform in [0, 1)).
        delta: the finite-difference step.
        init_targets: ops run first (e.g. variable initializers).
        extra_feed_dict: more feeds for every run.

    Returns:
        (theoretical, numerical) Jacobians, each [x_size, y_size]; a list of such pairs when x is
        a list.

    Raises:
        TypeError: x or y is not floating.
        ValueError: a shape does not match x, x_init_value or y.
    """
    import kernflow.core as kf
    is_list = isinstance(x, (list, tuple))
    xs = _as_list(x)
    x_shapes = list(x_shape) if is_list else [x_shape]
    if len(x_shapes) != len(xs):
        raise ValueError(f"Got {len(xs)} xs but {len(x_shapes)} x_shapes")
    inits = _as_list(x_init_value) if is_list and x_init_value is not None else [x_init_value]
    if x_init_value is None:
        inits = [None] * len(xs)
    if len(inits) != len(xs):
        raise ValueError(f"Got {len(xs)} xs but {len(inits)} x_init_values")
    x_shapes = [tuple(int(d) for d in s) for s in x_shapes]
    y_shape = tuple(int(d) for d in y_shape)
    for t in xs:
        _check_dtype(t, "x")
    _check_dtype(y, "y")
    if not y.shape.is_compatible_with(y_shape):
        raise ValueError(f"y_shape {list(y_shape)} does not match y's shape {y.shape}")
    x_values = []
    for t, s, v in zip(xs, x_shapes, inits):
        if not t.shape.is_compatible_with(s):
            raise ValueError(f"x_shape {list(s)} does not match {t.name}'s shape {t.shape}")
        np_dtype = t.dtype.base_dtype.as_numpy_dtype
        if v is None:
            v = np.random.random_sample(s)
        v = np.asarray(v, dtype=np_dtype)
        if v.shape != s:
            raise ValueError(f"x_init_value has shape {v.shape}, x_shape is {list(s)}")
        x_values.append(v)
    with y.graph.as_default():
        dy = kf.placeholder(y.dtype.base_dtype, y_shape, name="compute_gradient_dy")
        grads = kf.gradients(y, xs, grad_ys=dy)
    sess = kf.get_default_session()
    own = sess is None or sess.graph is not y.graph
    if own:
        sess = kf.Session(graph=y.graph)
    try:
        if init_targets:
            sess.run(init_targets)
        extra = dict(extra_feed_dict or {})
        theoretical = _theoretical(sess, xs, x_shapes, x_values, y, y_shape, dy, grads, extra)
        pairs = [(theoretical[i], _numerical(sess, xs, x_values, i, y, y_shape, delta, extra))
                 for i in range(len(xs))]
    finally:
        if own:
            sess.close()
    return pairs if is_list else pairs[0]


def compute_gradient_error(x, x_shape, y, y_shape, x_init_value=None, delta=1e-3, init_targets=None,
                           extra_feed_dict=None):
    """Returns the largest absolute difference between the theoretical and numerical Jacobians.

    Arguments as `compute_gradient`; with a list of xs, the largest over all of them.
    """
    grads = compute_gradient(x, x_shape, y, y_shape, x_init_value, delta, init_targets,
                             extra_feed_dict)
    if isinstance(grads, tuple):
        grads = [grads]
    error = 0.0
    for theoretical, numerical in grads:
        if theoretical.size:
            error = max(error, float(np.max(np.abs(theoretical.astype(np.float64) - numerical))))
    return error
