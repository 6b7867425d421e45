"""Contract cases of fractional pooling (kernflow.core.ops.nn_ops_fractional) against numpy references.

The boundary sequences are random unless the pooled length divides the input's, so the exact cases
pool by integer factors (sequences 0, k, 2k, ...); one case per op checks that drawn sequences
have steps K or K + 1; the grad ops take explicit, uneven sequences.
"""

import numpy as np

import kernflow.core as kf
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.testing.kernel_contract import OpCase

_r = np.random.RandomState(23)
# distinct values, far apart compared to the finite-difference step
_X = (_r.permutation(2 * 6 * 8 * 2).reshape(2, 6, 8, 2) / 8.0).astype(np.float64)
_ROWS = np.array([0, 2, 3, 5, 6], np.int64)
_COLS = np.array([0, 1, 3, 4, 6, 8], np.int64)


def fractional_pool_ref(x, rows, cols, overlapping, reduce):
    """Pools x [b, h, w, c] over regions [rows[i], rows[i+1]) x [cols[j], cols[j+1]) (ends included
    when overlapping)."""
    end = 1 if overlapping else 0
    out = np.empty((x.shape[0], len(rows) - 1, len(cols) - 1, x.shape[3]), x.dtype)
    for i in range(len(rows) - 1):
        for j in range(len(cols) - 1):
            win = x[:, rows[i]:rows[i + 1] + end, cols[j]:cols[j + 1] + end]
            out[:, i, j] = reduce(win, axis=(1, 2))
    return out


def _even(n, k):
    return np.arange(0, n + 1, k, dtype=np.int64)


def _pool_case(op_type, fn, ratio, overlapping, reduce, name):
    rows, cols = _even(6, int(ratio[1])), _even(8, int(ratio[2]))
    return OpCase(op_type, lambda x: list(fn(x, ratio, overlapping=overlapping)), [_X],
                  lambda x: [fractional_pool_ref(x, rows, cols, overlapping, reduce), rows, cols],
                  grad=True, grad_inputs=[0], name=name)


def _valid_sequences(actual, expected):
    """Drawn outputs: the pooled shape exactly; sequences from 0 to the length in steps of K or K + 1."""
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    if actual.ndim == 1:
        steps = np.diff(actual)
        assert actual[0] == 0 and actual[-1] == expected[-1], actual
        assert steps.min() >= expected[1] and steps.max() <= expected[1] + 1, (actual, expected)


def _drawn_case(op_type, fn, **kw):
    # 6 rows into 4 (K = 1), 8 columns into 3 (K = 2)
    return OpCase(op_type, lambda x: list(fn(x, [1.0, 1.5, 2.5, 1.0], **kw)), [_X],
                  lambda x: [np.zeros((2, 4, 3, 2)), np.array([0, 1, 0, 0, 6]), np.array([0, 2, 0, 8])],
                  compare=_valid_sequences, name="drawn")


def _max_grad_ref(x, g, rows, cols):
    dx = np.zeros_like(x)
    for i in range(len(rows) - 1):
        for j in range(len(cols) - 1):
            win = x[:, rows[i]:rows[i + 1], cols[j]:cols[j + 1]]
            for b in range(x.shape[0]):
                for c in range(x.shape[3]):
                    r, q = np.unravel_index(np.argmax(win[b, :, :, c]), win.shape[1:3])
                    dx[b, rows[i] + r, cols[j] + q, c] += g[b, i, j, c]
    return dx


def _avg_grad_ref(shape, g, rows, cols):
    dx = np.zeros(shape, g.dtype)
    for i in range(len(rows) - 1):
        for j in range(len(cols) - 1):
            n = (rows[i + 1] - rows[i]) * (cols[j + 1] - cols[j])
            dx[:, rows[i]:rows[i + 1], cols[j]:cols[j + 1]] += g[:, i, j][:, None, None] / n
    return dx


_G = _r.randn(2, 4, 5, 2)
_Y = fractional_pool_ref(_X, _ROWS, _COLS, False, np.max)

CASES = [
    _pool_case("FractionalMaxPool", kf.nn.fractional_max_pool, [1.0, 2.0, 2.0, 1.0], False, np.max, "by_2"),
    _pool_case("FractionalMaxPool", kf.nn.fractional_max_pool, [1.0, 3.0, 2.0, 1.0], True, np.max,
               "overlapping"),
    _drawn_case("FractionalMaxPool", kf.nn.fractional_max_pool),
    _pool_case("FractionalAvgPool", kf.nn.fractional_avg_pool, [1.0, 2.0, 4.0, 1.0], False, np.mean,
               "by_2_4"),
    _pool_case("FractionalAvgPool", kf.nn.fractional_avg_pool, [1.0, 3.0, 2.0, 1.0], True, np.mean,
               "overlapping"),
    _drawn_case("FractionalAvgPool", kf.nn.fractional_avg_pool, pseudo_random=True),
    OpCase("FractionalMaxPoolGrad",
           lambda x, g, r, c: apply_op("FractionalMaxPoolGrad", [x, kf.constant(_Y), g, r, c]).outputs[0],
           [_X, _G, _ROWS, _COLS], _max_grad_ref),
    OpCase("FractionalAvgPoolGrad",
           lambda s, g, r, c: apply_op("FractionalAvgPoolGrad", [s, g, r, c]).outputs[0],
           [np.array(_X.shape, np.int64), _G, _ROWS, _COLS], _avg_grad_ref),
]

