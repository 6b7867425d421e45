"""Contract cases of the fused optimizer updates: one step from known state vs numpy formulas."""

import numpy as np

import kernflow.core as kf
from kernflow.core.ops import training_ops as T
from kernflow.core.testing.kernel_contract import OpCase

_r = np.random.RandomState(7)
W = _r.randn(4, 3).astype(np.float32)
G = _r.randn(4, 3).astype(np.float32)
S1 = np.abs(_r.randn(4, 3)).astype(np.float32) + 0.5
S2 = np.abs(_r.randn(4, 3)).astype(np.float32) + 0.5
S3 = (_r.randn(4, 3) * 0.1).astype(np.float32)
IDX = np.array([2, 0, 2], np.int32)
GS = _r.randn(3, 3).astype(np.float32)
LR, MOM, RHO, EPS, B1, B2, B1P, B2P = 0.1, 0.9, 0.8, 1e-6, 0.9, 0.999, 0.9 ** 3, 0.999 ** 3


def _state(*arrays):
    vs = [kf.Variable(a) for a in arrays]
    return vs, [v.initializer for v in vs]


def _dense_case(name, nslots, call, ref, sparse=False, idx=IDX, case_name=""):
    # CenteredRMSProp's first slot is the mean gradient: small, so ms - mg**2 stays positive.
    init = ([W, S3, S1, S2] if name == "CenteredRMSProp" else [W, S1, S2, S3])[:nslots + 1]

    def build(grad, *rest):
        vs, inits = _state(*init)
        with kf.control_dependencies(inits):
            out = call(vs, grad, *rest)
        return out

    def reference(grad, *rest):
        arrays = [a.copy() for a in init]
        if sparse:
            idx = rest[0]
            uniq, inv = np.unique(idx, return_inverse=True)
            summed = np.zeros((len(uniq),) + grad.shape[1:], grad.dtype)
            np.add.at(summed, inv, grad)
            rows = [a[uniq] for a in arrays]
            ref(rows, summed)
            for a, r in zip(arrays, rows):
                a[uniq] = r
        else:
            ref(arrays, grad)
        assert np.all(np.isfinite(arrays[0])), f"{name}: reference produced non-finite values"
        return arrays[0]
    inputs = [GS, idx] if sparse else [G]
    return OpCase(("SparseApply" if sparse else "Apply") + name, build, inputs, reference, rtol=1e-5,
                  atol=1e-6, dynamic_shapes=False, name=case_name)


def _gd(a, g):
    a[0] -= np.float32(LR) * g


def _mom(a, g):
    a[1][...] = a[1] * MOM + g
    a[0] -= np.float32(LR) * a[1]


def _adagrad(a, g):
    a[1] += g * g
    a[0] -= np.float32(LR) * g / np.sqrt(a[1])


def _rms(a, g):
    a[1][...] = RHO * a[1] + (1 - RHO) * g * g
    a[2][...] = MOM * a[2] + LR * g / np.sqrt(a[1] + EPS)
    a[0] -= a[2]


def _crms(a, g):
    a[1][...] = RHO * a[1] + (1 - RHO) * g
    a[2][...] = RHO * a[2] + (1 - RHO) * g * g
    a[3][...] = MOM * a[3] + LR * g / np.sqrt(a[2] - a[1] * a[1] + EPS)
    a[0] -= a[3]


def _adam(a, g):
    lr_t = LR * np.sqrt(1 - B2P) / (1 - B1P)
    a[1][...] = B1 * a[1] + (1 - B1) * g
    a[2][...] = B2 * a[2] + (1 - B2) * g * g
    a[0] -= lr_t * a[1] / (np.sqrt(a[2]) + EPS)


CASES = []
for _sparse in (False, True):
    CASES += [
        _dense_case("GradientDescent", 0, (lambda vs, g, *r: T.sparse_apply_gradient_descent(vs[0], LR, g, r[0]))
                    if _sparse else (lambda vs, g: T.apply_gradient_descent(vs[0], LR, g)), _gd, _sparse),
        _dense_case("Momentum", 1, (lambda vs, g, *r: T.sparse_apply_momentum(vs[0], vs[1], LR, g, r[0], MOM))
                    if _sparse else (lambda vs, g: T.apply_momentum(vs[0], vs[1], LR, g, MOM)), _mom, _sparse),
        _dense_case("Adagrad", 1, (lambda vs, g, *r: T.sparse_apply_adagrad(vs[0], vs[1], LR, g, r[0]))
                    if _sparse else (lambda vs, g: T.apply_adagrad(vs[0], vs[1], LR, g)), _adagrad, _sparse),
        _dense_case("RMSProp", 2, (lambda vs, g, *r: T.sparse_apply_rms_prop(vs[0], vs[1], vs[2], LR, RHO, MOM,
                                                                             EPS, g, r[0]))
                    if _sparse else (lambda vs, g: T.apply_rms_prop(vs[0], vs[1], vs[2], LR, RHO, MOM, EPS, g)),
                    _rms, _sparse),
        _dense_case("CenteredRMSProp", 3,
                    (lambda vs, g, *r: T.sparse_apply_centered_rms_prop(vs[0], vs[1], vs[2], vs[3], LR, RHO,
                                                                        MOM, EPS, g, r[0]))
                    if _sparse else (lambda vs, g: T.apply_centered_rms_prop(vs[0], vs[1], vs[2], vs[3], LR,
                                                                             RHO, MOM, EPS, g)),
                    _crms, _sparse),
        _dense_case("Adam", 2, (lambda vs, g, *r: T.sparse_apply_adam(vs[0], vs[1], vs[2], B1P, B2P, LR, B1,
                                                                      B2, EPS, g, r[0]))
                    if _sparse else (lambda vs, g: T.apply_adam(vs[0], vs[1], vs[2], B1P, B2P, LR, B1, B2,
                                                                EPS, g)), _adam, _sparse),
    ]

# Distinct but unsorted indices: each gradient row goes to its own index.
CASES.append(_dense_case("Adagrad", 1, lambda vs, g, *r: T.sparse_apply_adagrad(vs[0], vs[1], LR, g, r[0]),
                         _adagrad, True, np.array([3, 0, 2], np.int64), "unsorted_distinct"))
