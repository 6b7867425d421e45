"""The kernel contract kit: every op checked against a numpy reference, on any device type.

Op semantics live in core as `OpCase`s (``kernflow/core/testing/op_cases/<family>.py``, each module
with a ``CASES`` list). A kernel package's tests subclass `KernelContractTests` and set
`device_type`; the kit runs every case on that device and checks, for each:

* the values against the numpy reference (rtol/atol per case) and the dtype against the graph's;
* the static shape the shape function inferred from fully known input shapes against the actual
  shape, and that the op also builds (and runs) from placeholders of unknown shape;
* the gradient against central finite differences, for cases with ``grad=True`` once gradients
  exist (``kf.gradients``).

Example::

    OpCase("Add", lambda x, y: kf.add(x, y), [a, b], np.add)
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from typing import Callable

import numpy as np

from kernflow.core.ops.accumulator_ops import ACCUMULATOR_OPS
from kernflow.core.ops.array_ops_more import ARRAY_MORE_OPS
from kernflow.core.ops.array_ops_extra import UNIQUE_OPS
from kernflow.core.ops.candidate_sampling_ops import CANDIDATE_SAMPLING_OPS
from kernflow.core.ops.critical_section_ops import MUTEX_OPS
from kernflow.core.ops.data_flow_ops import QUEUE_OPS
from kernflow.core.ops.data_ops import DATA_OPS
from kernflow.core.ops.image_ops import IMAGE_OPS
from kernflow.core.ops.nn_ops_ctc import CTC_OPS
from kernflow.core.ops.input_producers import INPUT_PRODUCER_OPS
from kernflow.core.ops.io_ops_more import IO_MORE_OPS
from kernflow.core.ops.lookup_ops import LOOKUP_OPS
from kernflow.core.ops.math_ops_more import MATH_MORE_OPS
from kernflow.core.ops.misc_ops_more import MISC_MORE_OPS
from kernflow.core.ops.quantization_ops import QUANTIZATION_OPS
from kernflow.core.ops.nn_ops_quantized import QUANTIZED_NN_OPS
from kernflow.core.ops.parsing_ops import PARSING_OPS
from kernflow.core.ops.reader_ops import READER_OPS
from kernflow.core.ops.script_ops import SCRIPT_OPS
from kernflow.core.ops.session_ops import SESSION_OPS
from kernflow.core.ops.sparse_ops_more import SPARSE_MORE_OPS
from kernflow.core.ops.nn_ops_extra import NN_EXTRA_OPS
from kernflow.core.ops.nn_ops_fractional import FRACTIONAL_POOL_OPS
from kernflow.core.ops.string_ops import STRING_OPS
from kernflow.core.ops.audio_ops import AUDIO_OPS
from kernflow.core.ops.summary_ops import SUMMARY_OPS
from kernflow.core.ops.training_ops_more import TRAINING_MORE_OPS
from kernflow.core.ops.sparse_ops import SPARSE_OPS
from kernflow.core.ops.linalg_ops import LINALG_OPS
from kernflow.core.ops.math_ops_special import SPECIAL_MATH_OPS
from kernflow.core.ops.math_ops_special_functions import SPECIAL_FUNCTION_OPS

__all__ = ["OpCase", "all_cases", "run_case", "KernelContractTests", "op_types_with_cases",
           "HOST_ONLY_OPS", "HOST_RESOURCE_OPS"]


@dataclasses.dataclass
class OpCase:
    """One contract check of one op type.

    Attributes:
        op_type: the op type exercised (for the coverage meta-test).
        build: fn(*input tensors) -> Tensor or list of Tensors (the op under test).
        inputs: numpy arrays fed to placeholders (their dtypes define the placeholders').
        reference: fn(*input arrays) -> array or list of arrays (numpy semantics to match).
        rtol, atol: comparison tolerances.
        dynamic_shapes: also build from placeholders of unknown shape and run (default True).
        grad: check gradients w.r.t. floating inputs by finite differences.
        grad_inputs: indices of inputs to differentiate (default: every floating input).
        compare: optional fn(actual, expected) for outputs that are not elementwise comparable
            (random ops compare statistics); replaces the value check.
        name: test id suffix.
    """
    op_type: str
    build: Callable
    inputs: list
    reference: Callable | None = None
    rtol: float = 1e-5
    atol: float = 1e-6
    dynamic_shapes: bool = True
    grad: bool = False
    grad_inputs: list | None = None
    compare: Callable | None = None
    name: str = ""
    delta: float = 1e-3
    grad_tol: float = 2e-3

    @property
    def id(self) -> str:
        return f"{self.op_type}-{self.name}" if self.name else self.op_type


def all_cases() -> list[OpCase]:
    """Collects the CASES of every module in kernflow.core.testing.op_cases."""
    from kernflow.core.testing import op_cases
    out = []
    for info in sorted(pkgutil.iter_modules(op_cases.__path__), key=lambda i: i.name):
        mod = importlib.import_module(f"{op_cases.__name__}.{info.name}")
        out.extend(getattr(mod, "CASES", []))
    seen = {}
    for c in out:
        n = seen.get(c.id, 0)
        seen[c.id] = n + 1
        if n:
            c.name = f"{c.name}{n}" if c.name else str(n)
    return out


# Ops of queues, conditional accumulators and mutexes: host tensors only, with no GPU kernel by
# design (as in TF); placement keeps them on the CPU. The sparse ops, Unique and the candidate samplers
# (stateful numpy generators), the special math ops and the linear algebra ops have no GPU kernel
# yet: host only too, like the tf.data ops (their values are Python objects: datasets, iterators),
# the string ops and the newer nn ops (depthwise and 3-D convolutions, 3-D pooling, LRN, ...).
HOST_ONLY_OPS = frozenset(QUEUE_OPS) | frozenset(ACCUMULATOR_OPS) | frozenset(MUTEX_OPS) | \
    frozenset(SPARSE_OPS) | \
    frozenset(UNIQUE_OPS) | frozenset(CANDIDATE_SAMPLING_OPS) | frozenset(SPECIAL_MATH_OPS) | \
    frozenset(LINALG_OPS) | frozenset(DATA_OPS) | frozenset(NN_EXTRA_OPS) | frozenset(STRING_OPS) | \
    frozenset(IMAGE_OPS) | frozenset(PARSING_OPS) | frozenset(INPUT_PRODUCER_OPS) | \
    frozenset(CTC_OPS) | frozenset(SPARSE_MORE_OPS) | frozenset(LOOKUP_OPS) | frozenset(IO_MORE_OPS) | \
    frozenset(READER_OPS) | frozenset(SCRIPT_OPS) | frozenset(ARRAY_MORE_OPS) | \
    frozenset(TRAINING_MORE_OPS) | frozenset(MATH_MORE_OPS) | frozenset(MISC_MORE_OPS) | \
    frozenset(SUMMARY_OPS) | frozenset(AUDIO_OPS) | frozenset(SESSION_OPS) | frozenset(QUANTIZATION_OPS) | \
    frozenset(QUANTIZED_NN_OPS) | \
    frozenset(FRACTIONAL_POOL_OPS) | frozenset(SPECIAL_FUNCTION_OPS)

# Ops whose state is a host-side resource (queues, accumulators, mutexes, datasets and iterators,
# stacks, TensorArrays, session tensors): exercised by their own tests (tests/queues,
# tests/ops/test_accumulator_ops.py, test_critical_section.py, test_tensor_array.py,
# test_stack_ops.py, test_session_ops.py) rather than required to have contract cases. Stacks and TensorArrays keep
# their handles on the host but have GPU kernels.
HOST_RESOURCE_OPS = frozenset(QUEUE_OPS) | frozenset(ACCUMULATOR_OPS) | frozenset(MUTEX_OPS) | \
    frozenset(DATA_OPS) | \
    frozenset(LOOKUP_OPS) | frozenset(SESSION_OPS) | \
    frozenset({
    "StackV2", "StackPushV2", "StackPopV2", "StackCloseV2",
    "TensorArrayV3", "TensorArrayReadV3", "TensorArrayWriteV3", "TensorArrayGatherV3",
    "TensorArrayScatterV3", "TensorArrayConcatV3", "TensorArraySplitV3",
    "TensorArraySizeV3", "TensorArrayCloseV3", "TensorArrayGradV3"})


def op_types_with_cases() -> set[str]:
    return {c.op_type for c in all_cases()}


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _build(case: OpCase, device: str, static: bool):
    import kernflow.core as kf
    g = kf.Graph()
    with g.as_default(), kf.device(device):
        phs = []
        for i, a in enumerate(case.inputs):
            a = np.asarray(a)
            shape = a.shape if static else None
            phs.append(kf.placeholder(kf.as_dtype(a.dtype), shape, name=f"in{i}"))
        outs = case.build(*phs)
    return g, phs, outs


def run_case(case: OpCase, device_type: str = "CPU", config=None) -> None:
    """Runs every check of `case` on the first device of `device_type`; raises AssertionError."""
    import kernflow.core as kf
    device = f"/device:{device_type}:0"
    g, phs, outs = _build(case, device, static=True)
    out_list = _as_list(outs)
    feed = {p: np.asarray(a) for p, a in zip(phs, case.inputs)}
    with kf.Session(graph=g, config=config) as sess:
        actual = sess.run(out_list, feed)
    expected = _as_list(case.reference(*[np.asarray(a) for a in case.inputs])) if case.reference else None
    for i, (t, a) in enumerate(zip(out_list, actual)):
        a_arr = np.asarray(a)
        assert a_arr.dtype == np.dtype(t.dtype.base_dtype.as_numpy_dtype), (
            f"{case.id}: output {i} has dtype {a_arr.dtype}, graph says {t.dtype.name}")
        assert t.shape.is_compatible_with(a_arr.shape), (
            f"{case.id}: output {i} has shape {a_arr.shape}, shape function says {t.shape}")
        if case.compare is not None:
            case.compare(a_arr if len(out_list) > 1 else a_arr, expected[i] if expected else None)
        elif expected is not None:
            e = np.asarray(expected[i])
            assert a_arr.shape == e.shape, f"{case.id}: output {i} shape {a_arr.shape} != reference {e.shape}"
            if a_arr.dtype.kind in "fc":
                np.testing.assert_allclose(a_arr, e, rtol=case.rtol, atol=case.atol,
                                           err_msg=f"{case.id}: output {i}")
            else:
                np.testing.assert_array_equal(a_arr, e, err_msg=f"{case.id}: output {i}")
    if case.dynamic_shapes:
        g2, phs2, outs2 = _build(case, device, static=False)
        with kf.Session(graph=g2, config=config) as sess:
            dyn = sess.run(_as_list(outs2), {p: np.asarray(a) for p, a in zip(phs2, case.inputs)})
        if case.compare is None:
            for i, (a, b) in enumerate(zip(actual, dyn)):
                if np.asarray(a).dtype.kind in "fc":
                    np.testing.assert_allclose(np.asarray(b, dtype=np.asarray(a).dtype), a, rtol=1e-6,
                                               atol=1e-7, err_msg=f"{case.id}: unknown-shape run, output {i}")
                else:
                    np.testing.assert_array_equal(b, a)
    if case.grad and hasattr(kf, "gradients"):
        check_gradient(case, device, config)


def _grad_graph(case: OpCase, device: str, static: bool, weights=None):
    """Builds loss = sum(outputs * weights) and its gradients w.r.t. the inputs checked."""
    import kernflow.core as kf
    g, phs, outs = _build(case, device, static=static)
    with g.as_default():
        out_list = [o for o in _as_list(outs) if o.dtype.is_floating]
        if weights is None:
            rng = np.random.RandomState(0)
            weights = [rng.uniform(0.5, 1.5, size=[d if d is not None else 1 for d in o.shape.as_list()])
                       .astype(o.dtype.as_numpy_dtype) for o in out_list]
        loss = kf.add_n([kf.reduce_sum(o * w) for o, w in zip(out_list, weights)])
        idxs = case.grad_inputs if case.grad_inputs is not None else [
            i for i, a in enumerate(case.inputs) if np.asarray(a).dtype.kind == "f"]
        grads = kf.gradients(loss, [phs[i] for i in idxs])
    return g, phs, loss, idxs, grads, weights


def _dense_value(v):
    return v.dense() if hasattr(v, "dense") else np.asarray(v)


def check_gradient(case: OpCase, device: str, config=None) -> None:
    """Compares kf.gradients of sum(outputs * random weights) with central differences.

    A None gradient must match a zero numeric one. With `dynamic_shapes`, the gradients built from
    placeholders of unknown shape must also give the same values (the run-time shape paths).
    """
    import kernflow.core as kf
    g, phs, loss, idxs, grads, weights = _grad_graph(case, device, static=True)
    feed = {p: np.asarray(a, dtype=np.asarray(a).dtype) for p, a in zip(phs, case.inputs)}
    with kf.Session(graph=g, config=config) as sess:
        sym = sess.run([gr if gr is not None else loss for gr in grads], feed)
        sym = [None if gr is None else _dense_value(v) for gr, v in zip(grads, sym)]
        for k, i in enumerate(idxs):
            x = np.asarray(case.inputs[i], dtype=np.float64)
            num = np.zeros_like(x)
            flat = x.reshape(-1)
            for j in range(flat.size):
                orig = flat[j]
                vals = []
                for sgn in (1, -1):
                    flat[j] = orig + sgn * case.delta
                    f = dict(feed)
                    f[phs[i]] = x.astype(np.asarray(case.inputs[i]).dtype)
                    vals.append(float(sess.run(loss, f)))
                flat[j] = orig
                num.reshape(-1)[j] = (vals[0] - vals[1]) / (2 * case.delta)
            s = np.zeros_like(num) if sym[k] is None else np.asarray(sym[k], dtype=np.float64)
            assert s.shape == num.shape, (f"{case.id}: gradient of input {i} has shape {s.shape}, "
                                          f"the input has shape {num.shape}")
            err = np.max(np.abs(s - num) / (1.0 + np.abs(num))) if num.size else 0.0
            assert err < case.grad_tol, (f"{case.id}: gradient of input {i} differs from finite "
                                         f"differences by {err:.2e}\nsymbolic={s}\nnumeric={num}")
    if not case.dynamic_shapes:
        return
    g2, phs2, _, _, grads2, _ = _grad_graph(case, device, static=False, weights=weights)
    with kf.Session(graph=g2, config=config) as sess:
        fetch = [gr for gr in grads2 if gr is not None]
        dyn = iter(sess.run(fetch, {p: np.asarray(a) for p, a in zip(phs2, case.inputs)}))
    for k, (gr, i) in enumerate(zip(grads2, idxs)):
        assert (gr is None) == (grads[k] is None), (
            f"{case.id}: gradient of input {i} is None with {'unknown' if gr is None else 'static'} "
            f"input shapes only")
        if gr is None:
            continue
        d = _dense_value(next(dyn))
        tol = 1e-5 if d.dtype.itemsize < 8 else 1e-9
        np.testing.assert_allclose(d, sym[k], rtol=tol, atol=tol,
                                   err_msg=f"{case.id}: gradient of input {i} with unknown shapes")


class KernelContractTests:
    """Subclass in a kernel package's tests and set `device_type`; pytest collects `test_contract`.

    Example::

        class TestCPUKernels(KernelContractTests):
            device_type = "CPU"
    """

    device_type = "CPU"
    config = None

    def pytest_generate_tests_cases(self):  # pragma: no cover - documented hook name only
        return all_cases()

    def test_contract(self, op_case):
        run_case(op_case, self.device_type, self.config)
