"""Optimizers against numpy references; slot names; sparse updates; schedules; clipping."""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors

W0 = np.array([[1.0, -2.0], [0.5, 3.0], [-1.5, 0.25]], np.float32)
X = np.array([[1.0, 2.0, -1.0], [0.5, -0.5, 2.0]], np.float32)


def _run(opt_fn, steps=3):
    """Minimizes sum((X @ w)^2)/2 and returns the trajectory of w."""
    g = kf.Graph()
    with g.as_default():
        w = kf.Variable(W0, name="w")
        loss = kf.reduce_sum(kf.square(kf.matmul(X, w))) / 2.0
        gs = kf.train.get_or_create_global_step()
        opt = opt_fn()
        train = opt.minimize(loss, global_step=gs)
        with kf.Session() as s:
            s.run(kf.global_variables_initializer())
            out = []
            for _ in range(steps):
                s.run(train)
                out.append(s.run(w))
            assert s.run(gs) == steps
    return out, opt, w


def _grad(w):
    return X.T @ (X @ w)


def _reference(update, steps=3):
    w = W0.astype(np.float64)
    state = {}
    out = []
    for t in range(1, steps + 1):
        w = update(w, _grad(w), state, t)
        out.append(w.copy())
    return out


def _check(opt_fn, update, rtol=1e-5):
    got, opt, w = _run(opt_fn)
    want = _reference(update)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-6)
    return opt, w


def test_gradient_descent():
    _check(lambda: kf.train.GradientDescentOptimizer(0.1), lambda w, g, s, t: w - 0.1 * g)


@pytest.mark.parametrize("nesterov", [False, True])
def test_momentum(nesterov):
    def upd(w, g, s, t):
        a = s["a"] = s.get("a", 0) * 0.9 + g
        return w - 0.05 * (g + 0.9 * a if nesterov else a)
    opt, w = _check(lambda: kf.train.MomentumOptimizer(0.05, 0.9, use_nesterov=nesterov), upd)
    assert opt.get_slot(w, "momentum").op.name == "w/Momentum"
    assert opt.get_slot_names() == ["momentum"]


def test_adagrad():
    def upd(w, g, s, t):
        a = s["a"] = s.get("a", np.full_like(w, 0.1)) + g * g
        return w - 0.1 * g / np.sqrt(a)
    opt, w = _check(lambda: kf.train.AdagradOptimizer(0.1), upd)
    assert opt.get_slot(w, "accumulator").op.name == "w/Adagrad"


@pytest.mark.parametrize("centered", [False, True])
def test_rmsprop(centered):
    def upd(w, g, s, t):
        ms = s["ms"] = 0.9 * s.get("ms", np.ones_like(w)) + 0.1 * g * g
        denom = ms
        if centered:
            mg = s["mg"] = 0.9 * s.get("mg", np.zeros_like(w)) + 0.1 * g
            denom = ms - mg * mg
        mom = s["mom"] = 0.5 * s.get("mom", np.zeros_like(w)) + 0.01 * g / np.sqrt(denom + 1e-10)
        return w - mom
    opt, w = _check(lambda: kf.train.RMSPropOptimizer(0.01, momentum=0.5, centered=centered), upd,
                    rtol=2e-5)
    assert opt.get_slot(w, "rms").op.name == "w/RMSProp"
    assert opt.get_slot(w, "momentum").op.name == ("w/RMSProp_2" if centered else "w/RMSProp_1")


def test_adam():
    def upd(w, g, s, t):
        m = s["m"] = 0.9 * s.get("m", 0) + 0.1 * g
        v = s["v"] = 0.999 * s.get("v", 0) + 0.001 * g * g
        lr = 0.01 * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
        return w - lr * m / (np.sqrt(v) + 1e-8)
    opt, w = _check(lambda: kf.train.AdamOptimizer(0.01), upd, rtol=2e-5)
    assert opt.get_slot(w, "m").op.name == "w/Adam"
    assert opt.get_slot(w, "v").op.name == "w/Adam_1"
    names = sorted(v.op.name for v in opt.variables())
    assert names == ["beta1_power", "beta2_power", "w/Adam", "w/Adam_1"]


@pytest.mark.parametrize("opt_fn", [
    lambda: kf.train.GradientDescentOptimizer(0.5),
    lambda: kf.train.MomentumOptimizer(0.5, 0.9),
    lambda: kf.train.AdagradOptimizer(0.5),
    lambda: kf.train.RMSPropOptimizer(0.5),
    lambda: kf.train.AdamOptimizer(0.5),
])
def test_sparse_updates_touch_only_present_rows(opt_fn):
    g = kf.Graph()
    with g.as_default():
        table = kf.Variable(np.ones([6, 3], np.float32), name="emb")
        ids = kf.placeholder(kf.int32, [None])
        loss = kf.reduce_sum(kf.gather(table, ids) * 2.0)
        opt = opt_fn()
        (grad, _), = opt.compute_gradients(loss, [table])
        assert isinstance(grad, kf.IndexedSlices)
        train = opt.apply_gradients([(grad, table)])
        with kf.Session() as s:
            s.run(kf.global_variables_initializer())
            s.run(train, {ids: [1, 4, 1]})
            out = s.run(table)
    changed = np.where(np.any(out != 1.0, axis=1))[0].tolist()
    assert changed == [1, 4]


def test_minimize_without_gradients_raises():
    g = kf.Graph()
    with g.as_default():
        w = kf.Variable(1.0)
        c = kf.constant(2.0)
        with pytest.raises(ValueError, match="No gradients provided"):
            kf.train.GradientDescentOptimizer(0.1).minimize(c * 1.0, var_list=[w])


def test_optimizers_come_from_the_registry():
    assert kf.train.get_optimizer("Adam") is kf.train.AdamOptimizer
    for name in ("Adadelta", "AdagradDA", "Ftrl", "ProximalAdagrad", "ProximalGradientDescent"):
        assert kf.train.get_optimizer(name) is getattr(kf.train, f"{name}Optimizer")
    with pytest.raises(errors.NotFoundError, match="GradientDescent"):
        kf.train.get_optimizer("Nope")


def test_exponential_decay_and_piecewise_constant():
    g = kf.Graph()
    with g.as_default():
        step = kf.placeholder(kf.int64, [])
        lr = kf.train.exponential_decay(0.1, step, 10, 0.5)
        lr_s = kf.train.exponential_decay(0.1, step, 10, 0.5, staircase=True)
        pc = kf.train.piecewise_constant(step, [5, 10], [1.0, 0.5, 0.1])
        with kf.Session() as s:
            for t in (0, 5, 15, 25):
                a, b, c = s.run([lr, lr_s, pc], {step: t})
                np.testing.assert_allclose(a, 0.1 * 0.5 ** (t / 10), rtol=1e-6)
                np.testing.assert_allclose(b, 0.1 * 0.5 ** (t // 10), rtol=1e-6)
                assert c == pytest.approx(1.0 if t <= 5 else 0.5 if t <= 10 else 0.1)


def test_clip_by_global_norm():
    g = kf.Graph()
    with g.as_default():
        a = kf.constant([3.0, 4.0])
        b = kf.constant([[0.0, 12.0]])
        clipped, norm = kf.clip_by_global_norm([a, None, b], 6.5)
        with kf.Session() as s:
            ca, cb, n = s.run([clipped[0], clipped[2], norm])
    assert clipped[1] is None
    assert n == pytest.approx(13.0)
    np.testing.assert_allclose(ca, [1.5, 2.0], rtol=1e-6)
    np.testing.assert_allclose(cb, [[0.0, 6.0]], rtol=1e-6)


def test_training_reduces_loss_with_every_optimizer():
    for make in (lambda: kf.train.GradientDescentOptimizer(0.05), lambda: kf.train.AdamOptimizer(0.05),
                 lambda: kf.train.RMSPropOptimizer(0.01), lambda: kf.train.AdagradOptimizer(0.1),
                 lambda: kf.train.MomentumOptimizer(0.02, 0.9)):
        got, _, _ = _run(make, steps=30)
        before = np.sum((X @ W0) ** 2)
        after = np.sum((X @ got[-1]) ** 2)
        assert after < before / 2, (make().get_name(), before, after)


def test_a_subclass_apply_sparse_sees_each_index_once_with_rows_summed():
    """TF1's `_apply_sparse_duplicate_indices`: repeated indices of an IndexedSlices gradient reach
    a custom `_apply_sparse` summed (TF 2.21 observed: a sign-SGD step moves a row once, by lr)."""
    seen = []

    class SignSGD(kf.train.Optimizer):
        def __init__(self, lr):
            super().__init__(False, "SignSGD")
            self._lr = lr

        def _apply_dense(self, grad, var):
            return var.assign_sub(self._lr * kf.sign(grad)).op

        def _apply_sparse(self, grad, var):
            seen.append(grad)
            return kf.scatter_sub(var, grad.indices, self._lr * kf.sign(grad.values)).op

    g = kf.Graph()
    with g.as_default():
        v = kf.Variable(np.ones((3, 2), np.float32))
        e = kf.gather(v, [0, 0, 2])
        loss = kf.reduce_sum(e * kf.constant([[1., -2.], [3., 4.], [5., 6.]]))
        step = SignSGD(0.5).minimize(loss)
        with kf.Session() as s:
            s.run(kf.global_variables_initializer())
            idx, vals = s.run([seen[0].indices, seen[0].values])
            s.run(step)
            got = s.run(v)
    assert sorted(idx.tolist()) == [0, 2]
    np.testing.assert_allclose(vals[idx.tolist().index(0)], [4.0, 2.0])
    np.testing.assert_allclose(got, [[0.5, 0.5], [1.0, 1.0], [0.5, 0.5]])
