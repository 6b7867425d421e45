"""Contract cases of the checkpoint I/O ops: each saves its inputs and reads them back.

The ops write files, so every build uses a fresh prefix in a temporary directory removed at exit;
a SaveV2 and a RestoreV2 of the same prefix run in one graph, ordered by a control dependency.
"""

import atexit
import itertools
import os
import shutil
import tempfile

import numpy as np

import kernflow.core as kf
from kernflow.core.ops import io_ops
from kernflow.core.testing.kernel_contract import OpCase

_tmp = []
_counter = itertools.count()


def _prefix(tag):
    if not _tmp:
        _tmp.append(tempfile.mkdtemp(prefix="kf_io_cases_"))
        atexit.register(shutil.rmtree, _tmp[0], True)
    return os.path.join(_tmp[0], f"{tag}_{next(_counter)}", "ckpt")


def _save_restore(specs=None):
    """Saves every input, then restores them all (optionally through slice specs)."""
    def build(*xs):
        prefix = _prefix("sr")
        names = [f"t{i}" for i in range(len(xs))]
        save = io_ops.save_v2(prefix, names, [""] * len(xs), list(xs))
        with kf.control_dependencies([save]):
            outs = io_ops.restore_v2(prefix, names, specs or [""] * len(xs), [x.dtype for x in xs])
        return outs
    return build


def _merge(x, y):
    base = _prefix("merge")
    parts = [io_ops.sharded_filename(base, i, 2) for i in range(2)]
    s0 = io_ops.save_v2(parts[0], ["x"], [""], [x])
    s1 = io_ops.save_v2(parts[1], ["y"], [""], [y])
    with kf.control_dependencies([s0, s1]):
        merge = io_ops.merge_v2_checkpoints(kf.stack(parts), base)
    with kf.control_dependencies([merge]):
        return io_ops.restore_v2(base, ["y", "x"], ["", ""], [y.dtype, x.dtype])


_r = np.random.RandomState(7)
_f32 = _r.randn(3, 4).astype(np.float32)
_f64 = _r.randn(5).astype(np.float64)
_i32 = _r.randint(-100, 100, size=(2, 3)).astype(np.int32)
_i64 = np.array([2 ** 40, -3, 0], np.int64)
_u8 = np.arange(7, dtype=np.uint8)
_f16 = _r.randn(2, 2).astype(np.float16)
_c64 = (_r.randn(3) + 1j * _r.randn(3)).astype(np.complex64)
_bool = np.array([[True, False], [False, True]])
_str = np.array([b"alpha", b"", "\u00e9t\u00e9".encode()], dtype=object)
_empty = np.zeros((0, 3), np.float32)
_scalar = np.float64(2.5)


def _same(*xs):
    return list(xs)


CASES = [
    OpCase("SaveV2", _save_restore(), [_f32, _f64, _i32], _same, name="float_int"),
    OpCase("SaveV2", _save_restore(), [_i64, _u8, _f16, _c64], _same, name="wide_types"),
    OpCase("SaveV2", _save_restore(), [_bool, _str], _same, name="bool_string"),
    OpCase("SaveV2", _save_restore(), [_empty, _scalar], _same, name="empty_scalar"),
    OpCase("RestoreV2", _save_restore(), [_f32], _same, name="single"),
    OpCase("RestoreV2", _save_restore(["3 4 1,2:-", "2 3 -:0,2"]), [_f32, _i32],
           lambda a, b: [a[1:3], b[:, 0:2]], name="slices"),
    OpCase("MergeV2Checkpoints", _merge, [_f32, _str], lambda x, y: [y, x]),
    # Reshaped to [1]: a fetched scalar string comes back as `bytes`, which the kit cannot compare.
    OpCase("ShardedFilename", lambda b, s, n: kf.reshape(io_ops.sharded_filename(b, s, n), [1]),
           [np.array(b"/tmp/model", dtype=object), np.int32(3), np.int32(12)],
           lambda b, s, n: np.array([b"/tmp/model-00003-of-00012"], dtype=object)),
]
