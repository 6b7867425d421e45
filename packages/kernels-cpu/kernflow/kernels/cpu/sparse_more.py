"""Numpy kernels of the sparse_more family (kernflow.core.ops.sparse_ops_more).

As in kernflow.kernels.cpu.sparse, entries are located by their row-major linear index; a "group"
(the set of a set op, the row of a softmax, the sequence of an edit distance, the cell of a
reduction) is the linear index of the coordinates that identify it, and entries are grouped by
sorting on it.
"""

from __future__ import annotations

import numpy as np

from kernflow.kernels.cpu.sparse import (DEVICE, _check_bounds, _check_order, _check_sparse,
                                         _invalid, _linear, _merge_sparse)


def _unravel(lin, shape):
    """Rows of coordinates of the linear indices `lin` in `shape` ([len(lin), len(shape)] int64)."""
    shape = tuple(int(d) for d in shape)
    if not len(shape) or not len(lin):
        return np.zeros((len(lin), len(shape)), np.int64)
    return np.stack(np.unravel_index(np.asarray(lin, np.int64), shape), axis=1).astype(np.int64)


def _groups(keys):
    """(sorted unique keys, inverse, order, boundaries): entries order[b[i]:b[i+1]] have key u[i]."""
    order = np.argsort(keys, kind="stable")
    u, first = np.unique(keys[order], return_index=True)
    inverse = np.empty(keys.size, np.int64)
    inverse[order] = np.repeat(np.arange(u.size), np.diff(np.append(first, keys.size)))
    return u, inverse, order, np.append(first, keys.size)


# ---------------------------------------------------------------------------- concat / split
def _sparse_concat(ctx):
    n, cdim = ctx.get_attr("N"), ctx.get_attr("concat_dim")

    def compute(*args):
        parts = [_check_sparse(ctx, args[i], args[n + i], args[2 * n + i], f"input {i} ")
                 for i in range(n)]
        shape0 = parts[0][2]
        r = shape0.size
        if not -r <= cdim < r:
            raise _invalid(ctx, f"Concat dimension must be in range [{-r}, {r}), got {cdim}")
        d = cdim % r
        offset, inds = 0, []
        for i, (ind, _, shp) in enumerate(parts):
            if shp.size != r:
                raise _invalid(ctx, f"Ranks of all input tensors must match: expected {r} but got "
                                    f"{shp.size} at position {i}")
            bad = [j for j in range(r) if j != d and shp[j] != shape0[j]]
            if bad:
                raise _invalid(ctx, f"Input shapes must match: expected {int(shape0[bad[0]])} for "
                                    f"dimension {bad[0]} but got {int(shp[bad[0]])} at position {i}")
            _check_bounds(ctx, ind, shp, f"input {i} ")
            moved = ind.astype(np.int64).copy()
            moved[:, d] += offset
            inds.append(moved)
            offset += int(shp[d])
        out_shape = shape0.astype(np.int64).copy()
        out_shape[d] = offset
        ind = np.concatenate(inds)
        vals = np.concatenate([p[1] for p in parts])
        order = np.argsort(_linear(ind, out_shape), kind="stable")
        return ind[order], vals[order], out_shape
    return compute


def _sparse_split(ctx):
    n = ctx.get_attr("num_split")

    def compute(split_dim, indices, values, shape):
        ind, vals, shp = _check_sparse(ctx, indices, values, shape)
        r = shp.size
        a = int(np.asarray(split_dim).reshape(()))
        if not -r <= a < r:
            raise _invalid(ctx, f"Input split_dim should be in [{-r}, {r}), got {a}")
        a %= r
        dim = int(shp[a])
        if n > dim:
            raise _invalid(ctx, f"num_split ({n}) must be <= the size of dimension {a} ({dim})")
        sizes = np.full(n, dim // n, np.int64)
        sizes[:dim % n] += 1
        starts = np.concatenate([[0], np.cumsum(sizes)])
        piece = np.searchsorted(starts, ind[:, a], side="right") - 1
        out_i, out_v, out_s = [], [], []
        for k in range(n):
            keep = piece == k
            moved = ind[keep].astype(np.int64)
            moved[:, a] -= starts[k]
            s = shp.astype(np.int64).copy()
            s[a] = sizes[k]
            out_i.append(moved)
            out_v.append(vals[keep])
            out_s.append(s)
        return tuple(out_i + out_v + out_s)
    return compute


# ---------------------------------------------------------------------------- max / min
def _sparse_binary(fn):
    def factory(ctx):
        def compute(a_indices, a_values, a_shape, b_indices, b_values, b_shape):
            a_ind, a_val, a_shp = _check_sparse(ctx, a_indices, a_values, a_shape, "a_")
            b_ind, b_val, b_shp = _check_sparse(ctx, b_indices, b_values, b_shape, "b_")
            la, lb = _merge_sparse(ctx, a_ind, a_shp, b_ind, b_shp)
            lin = np.union1d(la, lb)
            av, bv = np.zeros(lin.size, a_val.dtype), np.zeros(lin.size, b_val.dtype)
            av[np.searchsorted(lin, la)] = a_val
            bv[np.searchsorted(lin, lb)] = b_val
            return _unravel(lin, a_shp), fn(av, bv)
        return compute
    return factory


# ---------------------------------------------------------------------------- reductions
def _reduction(ctx, indices, values, shape, reduction_axes):
    """Checks the inputs; returns (values, group keys, kept shape with 1s, output shape)."""
    ind, vals, shp = _check_sparse(ctx, indices, values, shape, "input_")
    rank = shp.size
    axes = np.asarray(reduction_axes).reshape(-1)
    bad = (axes < -rank) | (axes >= rank)
    if bad.any():
        raise _invalid(ctx, f"Invalid reduction dimension {int(axes[bad][0])}, for input with "
                            f"{rank} dimensions.")
    _check_bounds(ctx, ind, shp)
    axes = sorted({int(a) % rank for a in axes})
    kept = np.array([1 if i in axes else int(d) for i, d in enumerate(shp)], np.int64)
    kept_ind = ind.astype(np.int64).copy()
    kept_ind[:, axes] = 0
    out_shape = kept if ctx.get_attr("keep_dims") else kept[[i for i in range(rank) if i not in axes]]
    return vals, _linear(kept_ind, kept), kept, out_shape


def _reduce_factory(kind, sparse_out):
    def factory(ctx):
        def compute(input_indices, input_values, input_shape, reduction_axes):
            vals, keys, kept, out_shape = _reduction(ctx, input_indices, input_values, input_shape,
                                                     reduction_axes)
            u, inverse, _, _ = _groups(keys)
            if kind == "Max":
                lowest = -np.inf if vals.dtype.kind == "f" else np.iinfo(vals.dtype).min
                red = np.full(u.size, lowest, vals.dtype)
                np.maximum.at(red, inverse, vals)
            else:
                red = np.zeros(u.size, vals.dtype)
                np.add.at(red, inverse, vals)
            if sparse_out:
                return _unravel(u, out_shape), red, out_shape
            out = np.zeros(int(np.prod(kept)), vals.dtype)
            out[u] = red
            return out.reshape(tuple(int(d) for d in out_shape))
        return compute
    return factory


def _sparse_softmax(ctx):
    def compute(sp_indices, sp_values, sp_shape):
        ind, vals, shp = _check_sparse(ctx, sp_indices, sp_values, sp_shape, "sp_")
        if shp.size < 2:
            raise _invalid(ctx, f"SparseTensor must be at least rank 2, got shape {shp.tolist()}")
        _check_bounds(ctx, ind, shp)
        _, inverse, _, _ = _groups(_linear(ind[:, :-1], shp[:-1]))
        top = np.full(inverse.max() + 1 if inverse.size else 0, -np.inf, vals.dtype)
        np.maximum.at(top, inverse, vals)
        e = np.exp(vals - top[inverse])
        total = np.zeros(top.size, vals.dtype)
        np.add.at(total, inverse, e)
        return (e / total[inverse]).astype(vals.dtype)
    return compute


# ---------------------------------------------------------------------------- serialization
def _proto_bytes(arr):
    from kernflow.core.framework import tensor_codec
    return tensor_codec.serialize_tensor(arr)


def _serialize_sparse(ctx):
    def compute(sparse_indices, sparse_values, sparse_shape):
        ind, vals, shp = _check_sparse(ctx, sparse_indices, sparse_values, sparse_shape, "sparse_")
        return np.array([_proto_bytes(ind.astype(np.int64)), _proto_bytes(vals),
                         _proto_bytes(shp.astype(np.int64))], object)
    return compute


def _serialize_many_sparse(ctx):
    def compute(sparse_indices, sparse_values, sparse_shape):
        ind, vals, shp = _check_sparse(ctx, sparse_indices, sparse_values, sparse_shape, "sparse_")
        if shp.size < 2:
            raise _invalid(ctx, f"Rank of input SparseTensor should be > 1, but saw rank: {shp.size}")
        _check_bounds(ctx, ind, shp)
        _check_order(ctx, ind, _linear(ind, shp))
        rows = np.searchsorted(ind[:, 0], np.arange(int(shp[0]) + 1))
        out = np.empty((int(shp[0]), 3), object)
        sub_shape = _proto_bytes(shp[1:].astype(np.int64))
        for i in range(int(shp[0])):
            lo, hi = rows[i], rows[i + 1]
            out[i] = [_proto_bytes(ind[lo:hi, 1:].astype(np.int64)), _proto_bytes(vals[lo:hi]),
                      sub_shape]
        return out
    return compute


def _parse(ctx, blob, what):
    from kernflow.core.framework import tensor_codec
    try:
        return tensor_codec.parse_tensor(bytes(blob))
    except Exception as e:  # noqa: BLE001 - a bad blob in any way is the caller's bad input
        raise _invalid(ctx, f"Could not parse {what} as a serialized TensorProto: {e}") from None


def _deserialize_many_sparse(ctx):
    want = ctx.get_attr("dtype")

    def compute(serialized_sparse):
        ser = np.asarray(serialized_sparse)
        if ser.ndim != 2 or ser.shape[1] != 3 or ser.shape[0] == 0:
            raise _invalid(ctx, f"Serialized sparse should be a matrix [N >= 1, 3], got shape "
                                f"{list(ser.shape)}")
        inds, vals, shapes = [], [], []
        for i, (bi, bv, bs) in enumerate(ser):
            ind, val, shp = (_parse(ctx, b, f"serialized_sparse[{i}, {k}]")
                             for k, b in enumerate((bi, bv, bs)))
            if np.dtype(val.dtype) != np.dtype(want.as_numpy_dtype):
                raise _invalid(ctx, f"Requested SparseTensor of type {want.name} but "
                                    f"SparseTensor[{i}].values.dtype() == {val.dtype}")
            ind, val, shp = _check_sparse(ctx, ind, val, shp, f"serialized_sparse[{i}] ")
            if shapes and shp.size != shapes[0].size:
                raise _invalid(ctx, f"Inconsistent rank across SparseTensors: rank prior to "
                                    f"SparseTensor[{i}] was: {shapes[0].size} but rank of "
                                    f"SparseTensor[{i}] is: {shp.size}")
            inds.append(np.concatenate([np.full((ind.shape[0], 1), i, np.int64), ind], axis=1))
            vals.append(val)
            shapes.append(shp)
        shape = np.concatenate([[len(shapes)], np.max(np.stack(shapes), axis=0)]).astype(np.int64)
        return np.concatenate(inds), np.concatenate(vals).astype(want.as_numpy_dtype), shape
    return compute


# ---------------------------------------------------------------------------- edit distance
def _levenshtein(h, t):
    """Edit distance of two 1-D arrays; each DP row is one vectorised cumulative-min step."""
    prev = np.arange(t.size + 1)
    steps = np.arange(t.size + 1)
    for x in h:
        tmp = np.empty_like(prev)
        tmp[0] = prev[0] + 1
        tmp[1:] = np.minimum(prev[:-1] + (t != x), prev[1:] + 1)
        prev = np.minimum.accumulate(tmp - steps) + steps
    return int(prev[-1])


def _sequences(ctx, ind, vals, shp, out_lead, prefix):
    """{group key: values in last-index order} of one EditDistance operand."""
    _check_bounds(ctx, ind, shp, prefix)
    keys = _linear(ind[:, :-1], out_lead)
    order = np.lexsort((ind[:, -1], keys))
    u, first = np.unique(keys[order], return_index=True)
    return {int(k): vals[order[a:b]] for k, a, b in zip(u, first, np.append(first[1:], order.size))}


def _edit_distance(ctx):
    normalize = ctx.get_attr("normalize")

    def compute(hypothesis_indices, hypothesis_values, hypothesis_shape, truth_indices,
                truth_values, truth_shape):
        hi, hv, hs = _check_sparse(ctx, hypothesis_indices, hypothesis_values, hypothesis_shape,
                                   "hypothesis_")
        ti, tv, ts = _check_sparse(ctx, truth_indices, truth_values, truth_shape, "truth_")
        if hs.size != ts.size:
            raise _invalid(ctx, f"hypothesis and truth must have the same rank; got "
                                f"{hs.size} and {ts.size}")
        if hs.size < 1:
            raise _invalid(ctx, "hypothesis and truth must have rank >= 1")
        lead = np.maximum(hs[:-1], ts[:-1]).astype(np.int64)
        hyp = _sequences(ctx, hi, hv, hs, lead, "hypothesis_")
        truth = _sequences(ctx, ti, tv, ts, lead, "truth_")
        out = np.zeros(int(np.prod(lead)), np.float32)
        empty = hv[:0]
        for k in set(hyp) | set(truth):
            h, t = hyp.get(k, empty), truth.get(k, empty)
            d = float(_levenshtein(h, t))
            if normalize:
                d = d / t.size if t.size else (np.inf if h.size else 0.0)
            out[k] = d
        return out.reshape(tuple(int(x) for x in lead))
    return compute


# ---------------------------------------------------------------------------- sets
def _dense_sets(ctx, x, name):
    x = np.asarray(x)
    if x.ndim < 2:
        raise _invalid(ctx, f"{name} must have rank >= 2 (a group of sets), got shape "
                            f"{list(x.shape)}")
    lead = np.array(x.shape[:-1], np.int64)
    rows = x.reshape(-1, x.shape[-1])
    return lead, {k: rows[k] for k in range(rows.shape[0])}


def _sparse_sets(ctx, indices, values, shape, name, validate):
    ind, vals, shp = _check_sparse(ctx, indices, values, shape, f"{name}_")
    if shp.size < 2:
        raise _invalid(ctx, f"{name} must have rank >= 2 (a group of sets), got shape "
                            f"{shp.tolist()}")
    _check_bounds(ctx, ind, shp, f"{name}_")
    if validate:
        _check_order(ctx, ind, _linear(ind, shp), f"{name}_")
    lead = shp[:-1].astype(np.int64)
    u, _, order, b = _groups(_linear(ind[:, :-1], lead))
    return lead, {int(k): vals[order[b[i]:b[i + 1]]] for i, k in enumerate(u)}


_SET_FNS = {"intersection": np.intersect1d, "union": np.union1d,
            "a-b": lambda a, b: np.setdiff1d(a, b), "b-a": lambda a, b: np.setdiff1d(b, a)}


def _set_result(ctx, lead1, sets1, lead2, sets2, dtype):
    how = ctx.get_attr("set_operation")
    how = how.decode() if isinstance(how, bytes) else how
    if how not in _SET_FNS:
        raise _invalid(ctx, f"Invalid set_operation {how!r}: expected one of {sorted(_SET_FNS)}")
    if lead1.tolist() != lead2.tolist():
        raise _invalid(ctx, f"Shapes of the two sets differ before the last dim: "
                            f"{lead1.tolist()} vs {lead2.tolist()}")
    empty = np.zeros(0, dtype)
    results = {}
    for k in sorted(set(sets1) | set(sets2)):
        r = _SET_FNS[how](sets1.get(k, empty), sets2.get(k, empty))
        if r.size:
            results[k] = r
    width = max((r.size for r in results.values()), default=0)
    keys = np.array(sorted(results), np.int64)
    counts = np.array([results[k].size for k in keys], np.int64)
    group = _unravel(np.repeat(keys, counts), lead1)
    pos = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    values = np.concatenate([results[k] for k in keys]) if keys.size else empty
    return (np.concatenate([group, pos[:, None]], axis=1).astype(np.int64),
            np.asarray(values).astype(dtype), np.append(lead1, width).astype(np.int64))


def _dense_dense_set(ctx):
    def compute(set1, set2):
        a, b = np.asarray(set1), np.asarray(set2)
        return _set_result(ctx, *_dense_sets(ctx, a, "set1"), *_dense_sets(ctx, b, "set2"), a.dtype)
    return compute


def _dense_sparse_set(ctx):
    validate = ctx.get_attr("validate_indices")

    def compute(set1, set2_indices, set2_values, set2_shape):
        a = np.asarray(set1)
        return _set_result(ctx, *_dense_sets(ctx, a, "set1"),
                           *_sparse_sets(ctx, set2_indices, set2_values, set2_shape, "set2", validate),
                           a.dtype)
    return compute


def _sparse_sparse_set(ctx):
    validate = ctx.get_attr("validate_indices")

    def compute(set1_indices, set1_values, set1_shape, set2_indices, set2_values, set2_shape):
        return _set_result(ctx, *_sparse_sets(ctx, set1_indices, set1_values, set1_shape, "set1",
                                              validate),
                           *_sparse_sets(ctx, set2_indices, set2_values, set2_shape, "set2", validate),
                           np.asarray(set1_values).dtype)
    return compute


def _set_size(ctx):
    validate = ctx.get_attr("validate_indices")

    def compute(set_indices, set_values, set_shape):
        lead, sets = _sparse_sets(ctx, set_indices, set_values, set_shape, "set", validate)
        out = np.zeros(int(np.prod(lead)), np.int32)
        for k, v in sets.items():
            out[k] = np.unique(v).size
        return out.reshape(tuple(int(d) for d in lead))
    return compute


def register(registry, device=DEVICE):
    """Registers this family's CPU kernels."""
    table = {"SparseConcat": _sparse_concat, "SparseSplit": _sparse_split,
             "SparseSparseMaximum": _sparse_binary(np.maximum),
             "SparseSparseMinimum": _sparse_binary(np.minimum),
             "SparseReduceMax": _reduce_factory("Max", False),
             "SparseReduceMaxSparse": _reduce_factory("Max", True),
             "SparseReduceSumSparse": _reduce_factory("Sum", True),
             "SparseSoftmax": _sparse_softmax, "SerializeSparse": _serialize_sparse,
             "SerializeManySparse": _serialize_many_sparse,
             "DeserializeManySparse": _deserialize_many_sparse, "EditDistance": _edit_distance,
             "SetSize": _set_size, "DenseToDenseSetOperation": _dense_dense_set,
             "DenseToSparseSetOperation": _dense_sparse_set,
             "SparseToSparseSetOperation": _sparse_sparse_set}
    for op, factory in table.items():
        registry.register(op, device, factory)
    _register_cross_and_counts(registry, device)


# ---------------------------------------------------------------------------- cross, counts
_MASK64 = (1 << 64) - 1
_KMUL = 0xc6a4a7935bd1e995


def _shift_mix(v):
    return v ^ (v >> 47)


def _fingerprint_cat64(fp1, fp2):
    """TF's FingerprintCat64: combines two 64-bit fingerprints (order matters)."""
    r = fp1 ^ _KMUL
    r ^= (_shift_mix((fp2 * _KMUL) & _MASK64) * _KMUL) & _MASK64
    r = (r * _KMUL) & _MASK64
    return _shift_mix((_shift_mix(r) * _KMUL) & _MASK64)


def _feature_columns(ctx, args, n):
    """Per input: (batch size, list of per-row feature lists), sparse inputs first."""
    inds, vals, shapes, dense = args[:n], args[n:2 * n], args[2 * n:3 * n], args[3 * n:]
    cols = []
    for i in range(n):
        ind, val, shp = _check_sparse(ctx, inds[i], vals[i], shapes[i], f"input {i} ")
        if shp.size != 2:
            raise _invalid(ctx, f"Expected 2-D sparse input {i}, got shape {shp.tolist()}")
        rows = [[] for _ in range(int(shp[0]))]
        for r, v in zip(ind[:, 0].tolist(), val.tolist()):
            rows[r].append(v)
        cols.append(rows)
    for j, d in enumerate(dense):
        d = np.asarray(d)
        if d.ndim != 2:
            raise _invalid(ctx, f"Expected 2-D dense input {j}, got shape {list(d.shape)}")
        cols.append([list(row) for row in d.tolist()])
    sizes = {len(c) for c in cols}
    if len(sizes) > 1:
        raise _invalid(ctx, f"Expected batch sizes of all inputs to match, got {sorted(sizes)}")
    return sizes.pop() if sizes else 0, cols


def _crosses(ctx, args, n, combine):
    import itertools
    batch, cols = _feature_columns(ctx, args, n)
    out_ind, out_val, width = [], [], 0
    for b in range(batch):
        row = [combine(feats) for feats in itertools.product(*[c[b] for c in cols])] if cols else []
        out_ind.extend([b, k] for k in range(len(row)))
        out_val.extend(row)
        width = max(width, len(row))
    return np.array(out_ind, np.int64).reshape(-1, 2), out_val, np.array([batch, width], np.int64)


def _as_text(v):
    return v if isinstance(v, bytes) else str(v).encode()


def _sparse_cross(ctx):
    n = ctx.get_attr("N")
    hashed, buckets, key = (ctx.get_attr(a) for a in ("hashed_output", "num_buckets", "hash_key"))

    def fingerprint(feats):
        from kernflow.kernels.cpu.strings import _fingerprint64
        h = key & _MASK64
        for f in feats:
            h = _fingerprint_cat64(h, _fingerprint64(f) if isinstance(f, bytes) else f & _MASK64)
        return h % buckets if buckets > 0 else h % ((1 << 63) - 1)

    def compute(*args):
        if hashed:
            ind, vals, shape = _crosses(ctx, args, n, fingerprint)
            return ind, np.array(vals, np.uint64).astype(np.int64), shape
        ind, vals, shape = _crosses(ctx, args, n, lambda fs: b"_X_".join(_as_text(f) for f in fs))
        return ind, np.array(vals, object), shape
    return compute


def _sparse_cross_v2(ctx):
    n = ctx.get_attr("N")

    def compute(*args):
        sep = _as_text(np.asarray(args[-1]).reshape(()).item())
        ind, vals, shape = _crosses(ctx, args[:-1], n, lambda fs: sep.join(_as_text(f) for f in fs))
        return ind, np.array(vals, object), shape
    return compute


def _count_factory(sparse_input):
    def factory(ctx):
        lo, hi, binary = (ctx.get_attr(a) for a in ("minlength", "maxlength", "binary_output"))
        out_dt = np.dtype(ctx.output_dtypes[1].as_numpy_dtype)

        def compute(*args):
            if sparse_input:
                ind, vals, shp = _check_sparse(ctx, *args[:3])
                rows = ind[:, 0] if shp.size == 2 else None
                n_rows = int(shp[0]) if shp.size == 2 else 0
            else:
                vals = np.asarray(args[0])
                n_rows = vals.shape[0] if vals.ndim == 2 else 0
                rows = np.repeat(np.arange(n_rows), vals.shape[1]) if vals.ndim == 2 else None
                shp = np.array(vals.shape)
            if shp.size not in (1, 2):
                raise _invalid(ctx, f"Input must be a 1-D or 2-D tensor, got shape {shp.tolist()}")
            vals = vals.reshape(-1).astype(np.int64)
            w = np.asarray(args[-1]).reshape(-1)
            if w.size and w.size != vals.size:
                raise _invalid(ctx, f"Weights and values must have the same number of entries, got "
                                    f"{w.size} and {vals.size}")
            if (vals < 0).any():
                raise _invalid(ctx, f"Input values must all be non-negative, got {int(vals.min())}")
            size = max(int(vals.max()) + 1 if vals.size else 0, lo)
            if hi >= 0:
                size = min(size, hi)
            keep = vals < size
            weight = np.ones(vals.size, out_dt) if binary or not w.size else w.astype(out_dt)
            key = vals if rows is None else rows * size + vals
            u, inverse, _, _ = _groups(key[keep])
            out = np.zeros(u.size, out_dt)
            np.add.at(out, inverse, weight[keep])
            if binary:
                out = np.ones_like(out)
            shape = np.array([size] if rows is None else [n_rows, size], np.int64)
            return _unravel(u, shape), out, shape
        return compute
    return factory


def _register_cross_and_counts(registry, device):
    registry.register("SparseCross", device, _sparse_cross)
    registry.register("SparseCrossV2", device, _sparse_cross_v2)
    registry.register("DenseCountSparseOutput", device, _count_factory(False))
    registry.register("SparseCountSparseOutput", device, _count_factory(True))
