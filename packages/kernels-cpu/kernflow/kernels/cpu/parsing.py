"""Numpy kernels of the parsing ops (kernflow.core.ops.parsing_ops) and of the two ops the input
producers need (CountUpTo, MatchingFiles: kernflow.core.ops.input_producers).

Example protos are decoded with kernflow.core.protobuf.example_pb2 (TensorFlow's field numbers),
one message per record; each feature's values are then gathered with numpy (concatenation and
index arithmetic, no per-value Python). Error messages are TF's, naming the example and the key.
"""

from __future__ import annotations

import re

import numpy as np

from kernflow.core.framework import errors
from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.runtime import file_root

DEVICE = "CPU"

_KIND = {"float32": "float_list", "int64": "int64_list", "string": "bytes_list"}
_KIND_TYPE = {"float_list": "float", "int64_list": "int64", "bytes_list": "string"}
_KIND_WORD = {"float_list": "float", "int64_list": "int64", "bytes_list": "bytes"}


def _text(v) -> str:
    return v.decode("utf-8") if isinstance(v, bytes) else str(v)


def _bytes(v) -> bytes:
    return v if isinstance(v, bytes) else str(v).encode("utf-8")


def _invalid(msg: str):
    return errors.InvalidArgumentError(None, None, msg)


def _outputs(outs):
    """A kernel's return value: the array of a single output, else the tuple."""
    return outs[0] if len(outs) == 1 else tuple(outs)


def _np_type(dt):
    return object if dt.base_dtype == _dtypes.string else dt.base_dtype.as_numpy_dtype


# ---------------------------------------------------------------------------- Example protos
def _decode(message_cls, data, what):
    from google.protobuf.message import DecodeError
    msg = message_cls()
    try:
        msg.ParseFromString(_bytes(data))
    except DecodeError:
        shown = _bytes(data)[:60].decode("latin-1")
        raise _invalid(f"Could not parse {what} input, value: '{shown}'") from None
    return msg


class _Feature:
    """One feature's spec: key, dtype name ("float32"...) and where errors say it was."""

    def __init__(self, key, dtype):
        self.key, self.dtype = _text(key), dtype.base_dtype
        self.kind = _KIND[self.dtype.name]

    def values(self, feature, prefix, index):
        """The feature's values as a numpy vector (None when the feature has no kind)."""
        kind = feature.WhichOneof("kind")
        if kind is None:
            return None
        if kind != self.kind:
            raise _invalid(f"{prefix}Key: {self.key}, Index: {index}.  Data types don't match. Data type: "
                           f"{_KIND_TYPE[kind]} but expected type: {_KIND_TYPE[self.kind]}")
        vals = getattr(feature, kind).value
        return np.array(list(vals), dtype=_np_type(self.dtype)).reshape(-1)

    def lookup(self, features, prefix, index):
        return self.values(features[self.key], prefix, index) if self.key in features else None


def _empty(dt):
    return np.zeros(0, dtype=_np_type(dt))


def _ragged(per_example, dt):
    """Concatenated values, the lengths and each value's position within its example."""
    vals = [v if v is not None else _empty(dt) for v in per_example]
    lens = np.array([len(v) for v in vals], dtype=np.int64)
    flat = np.concatenate(vals) if vals else _empty(dt)
    if dt == _dtypes.string:
        flat = flat.astype(object)
    starts = np.repeat(np.cumsum(lens) - lens, lens)
    return flat, lens, np.arange(flat.shape[0], dtype=np.int64) - starts


def _sparse(per_example, dt):
    """A VarLen feature of a batch: indices [[example, position]], values, shape [batch, max]."""
    flat, lens, pos = _ragged(per_example, dt)
    rows = np.repeat(np.arange(len(lens), dtype=np.int64), lens)
    shape = np.array([len(lens), lens.max() if lens.size else 0], dtype=np.int64)
    return np.stack([rows, pos], axis=1).reshape(-1, 2), flat, shape


def _padded(spec, shape, default, per_example, prefixes):
    """A variable-length dense feature (shape[0] None): [batch, max steps] + shape[1:], padded with
    the default (0 or b"" when it is empty)."""
    dt = spec.dtype
    stride = int(np.prod(shape[1:], dtype=np.int64))
    for i, v in enumerate(per_example):
        if v is not None and (stride == 0 or len(v) % stride):
            dims = ",".join("?" if d is None else str(d) for d in shape)
            raise _invalid(f"{prefixes[i]}Key: {spec.key}, Index: {i}.  Number of {_KIND_WORD[spec.kind]} "
                           f"values is not a multiple of stride length. Saw {len(v)} values but output "
                           f"shape is: [{dims}]")
    flat, lens, pos = _ragged(per_example, dt)
    steps = lens // max(stride, 1)
    pad = default.reshape(-1)[0] if default.size else (b"" if dt == _dtypes.string else 0)
    out = np.full((len(lens), int(steps.max()) if steps.size else 0, stride), pad, dtype=_np_type(dt))
    out[np.repeat(np.arange(len(lens)), lens), pos // max(stride, 1), pos % max(stride, 1)] = flat
    return out.reshape((len(lens), out.shape[1]) + tuple(shape[1:]))


def _dense(spec, shape, default, per_example, prefixes):
    """A dense feature of a batch: [batch] + shape (the default where missing), or `_padded`."""
    if shape and shape[0] is None:
        return _padded(spec, shape, default, per_example, prefixes)
    size = int(np.prod(shape, dtype=np.int64))
    out = np.empty((len(per_example),) + tuple(shape), dtype=_np_type(spec.dtype))
    for i, v in enumerate(per_example):
        if v is None:
            if not default.size:
                raise _invalid(f"{prefixes[i]}Feature: {spec.key} (data type: {_KIND_TYPE[spec.kind]}) is "
                               f"required but could not be found.")
            out[i] = default.reshape(shape)
        elif v.size != size:
            raise _invalid(f"{prefixes[i]}Key: {spec.key}, Index: {i}.  Number of {_KIND_WORD[spec.kind]} "
                           f"values != expected.  Values size: {v.size} but output shape: {list(shape)}")
        else:
            out[i] = v.reshape(shape)
    return out


def _shape_list(shape):
    return list(shape.dim_values) if hasattr(shape, "dim_values") else [None if d < 0 else d for d in shape]


def _parse_examples(serialized, prefixes, sparse, dense, defaults):
    """The outputs of ParseExample: sparse indices, values and shapes, then the dense values."""
    from kernflow.core.protobuf.example_pb2 import Example
    maps = [_decode(Example, s, "example").features.feature for s in serialized]
    sp = [_sparse([f.lookup(m, p, i) for i, (m, p) in enumerate(zip(maps, prefixes))], f.dtype)
          for f in sparse]
    dn = [_dense(f, shape, np.asarray(d, dtype=_np_type(f.dtype)),
                 [f.lookup(m, p, i) for i, (m, p) in enumerate(zip(maps, prefixes))], prefixes)
          for (f, shape), d in zip(dense, defaults)]
    return [s[0] for s in sp] + [s[1] for s in sp] + [s[2] for s in sp] + dn


def _parse_example(ctx):
    ns, nd = ctx.get_attr("Nsparse"), ctx.get_attr("Ndense")
    stypes, dtypes = ctx.get_attr("sparse_types"), ctx.get_attr("Tdense")
    shapes = [_shape_list(s) for s in ctx.get_attr("dense_shapes")]

    def compute(serialized, names, *rest):
        keys, dkeys, defaults = rest[:ns], rest[ns:ns + nd], rest[ns + nd:]
        ser = np.asarray(serialized, dtype=object)
        if ser.ndim != 1:
            raise _invalid(f"ParseExample {ctx.name}: serialized must be a vector, got shape "
                           f"{list(ser.shape)}")
        nm = np.asarray(names, dtype=object).reshape(-1)
        if nm.size not in (0, ser.size):
            raise _invalid(f"ParseExample {ctx.name}: names must be empty or have {ser.size} entries (one "
                           f"per example), got {nm.size}")
        prefixes = [f"Name: {_text(nm[i]) if nm.size else '<unknown>'}, " for i in range(ser.size)]
        sparse = [_Feature(np.asarray(k).item(), t) for k, t in zip(keys, stypes)]
        dense = [(_Feature(np.asarray(k).item(), t), s) for k, t, s in zip(dkeys, dtypes, shapes)]
        return _outputs(_parse_examples(list(ser), prefixes, sparse, dense, defaults))
    return compute


def _unbatch(outs, ns):
    """ParseExample outputs of one example -> ParseSingleExample's (no batch dimension)."""
    ind = [i[:, 1:] for i in outs[:ns]]
    shp = [s[1:] for s in outs[2 * ns:3 * ns]]
    return ind + outs[ns:2 * ns] + shp + [d[0] for d in outs[3 * ns:]]


def _parse_single_example(ctx):
    keys, dkeys = ctx.get_attr("sparse_keys"), ctx.get_attr("dense_keys")
    sparse = [_Feature(k, t) for k, t in zip(keys, ctx.get_attr("sparse_types"))]
    dense = [(_Feature(k, t), _shape_list(s))
             for k, t, s in zip(dkeys, ctx.get_attr("Tdense"), ctx.get_attr("dense_shapes"))]

    def compute(serialized, *defaults):
        ser = np.asarray(serialized, dtype=object)
        if ser.ndim != 0:
            raise _invalid(f"ParseSingleExample {ctx.name}: serialized must be a scalar, got shape "
                           f"{list(ser.shape)}")
        outs = _parse_examples([ser.item()], [""], sparse, dense, defaults)
        return _outputs(_unbatch(outs, len(sparse)))
    return compute


def _keys(tensors, types, shapes=None):
    keys = [np.asarray(k, dtype=object).item() for k in tensors]
    if shapes is None:
        return [_Feature(k, t) for k, t in zip(keys, types)]
    return [(_Feature(k, t), _shape_list(s)) for k, t, s in zip(keys, types, shapes)]


def _context(cmap, sparse, dense, defaults, prefix):
    """A SequenceExample's context: ParseSingleExample's outputs."""
    sp = [_sparse([f.lookup(cmap, prefix, 0)], f.dtype) for f in sparse]
    dn = [_dense(f, shape, np.asarray(d, dtype=_np_type(f.dtype)), [f.lookup(cmap, prefix, 0)], [prefix])
          for (f, shape), d in zip(dense, defaults)]
    return _unbatch([s[0] for s in sp] + [s[1] for s in sp] + [s[2] for s in sp] + dn, len(sparse))


def _dense_list(f, shape, lists, missing_ok, prefix):
    """A dense feature list: [steps] + shape, every step holding exactly prod(shape) values."""
    if f.key not in lists and f.key not in missing_ok:
        raise _invalid(f"{prefix}Feature list '{f.key}' is required but could not be found.  Did you mean "
                       f"to include it in feature_list_dense_missing_assumed_empty or "
                       f"feature_list_dense_defaults?")
    steps = lists[f.key].feature if f.key in lists else []
    size = int(np.prod(shape, dtype=np.int64))
    vals = [f.values(x, prefix, i) for i, x in enumerate(steps)]
    for i, v in enumerate(vals):
        if v is None or v.size != size:
            raise _invalid(f"{prefix}Key: {f.key}, Index: {i}.  Number of values != expected.  values size: "
                           f"{0 if v is None else v.size} but output shape: {list(shape)}")
    if not vals:
        return np.zeros([0] + shape, dtype=_np_type(f.dtype))
    return np.stack([v.reshape(shape) for v in vals]).astype(_np_type(f.dtype))


def _parse_single_sequence_example(ctx):
    a = ctx.get_attr
    nc, ncd = a("Ncontext_sparse"), a("Ncontext_dense")
    nf, nfd = a("Nfeature_list_sparse"), a("Nfeature_list_dense")

    def compute(serialized, missing_ok, *rest):
        from kernflow.core.protobuf.example_pb2 import SequenceExample
        bounds = np.cumsum([0, nc, ncd, nf, nfd])
        ck, cdk, fk, fdk = (rest[bounds[i]:bounds[i + 1]] for i in range(4))
        cdefaults, debug_name = rest[bounds[4]:-1], _text(np.asarray(rest[-1], dtype=object).item())
        prefix = f"Name: {debug_name or '<unknown>'}, "
        seq = _decode(SequenceExample, np.asarray(serialized, dtype=object).item(), "sequence example")
        context = _context(seq.context.feature, _keys(ck, a("context_sparse_types")),
                           _keys(cdk, a("Tcontext_dense"), a("context_dense_shapes")), cdefaults, prefix)
        lists = seq.feature_lists.feature_list
        sp = [_sparse([f.values(x, prefix, i) for i, x in
                       enumerate(lists[f.key].feature if f.key in lists else [])], f.dtype)
              for f in _keys(fk, a("feature_list_sparse_types"))]
        ok = {_text(k) for k in np.asarray(missing_ok, dtype=object).reshape(-1)}
        dense = [_dense_list(f, shape, lists, ok, prefix)
                 for f, shape in _keys(fdk, a("feature_list_dense_types"), a("feature_list_dense_shapes"))]
        return _outputs(context + [s[0] for s in sp] + [s[1] for s in sp] + [s[2] for s in sp] + dense)
    return compute


# ---------------------------------------------------------------------------- DecodeRaw
def _decode_raw(ctx):
    out_dt = ctx.get_attr("out_type").base_dtype
    little = ctx.get_attr("little_endian")
    np_dt = np.dtype(out_dt.as_numpy_dtype)
    if np_dt.itemsize > 1 and np_dt != np.bool_:
        np_dt = np_dt.newbyteorder("<" if little else ">")

    def compute(data):
        arr = np.asarray(data, dtype=object)
        flat = [_bytes(b) for b in arr.reshape(-1)]
        size0 = len(flat[0]) if flat else 0
        for i, b in enumerate(flat):
            if len(b) != size0:
                raise _invalid(f"DecodeRaw requires input strings to all be the same "
                               f"size, but element {i} has size {size0} != {len(b)}")
        if size0 % np_dt.itemsize:
            raise _invalid(f"Input to DecodeRaw has length {size0} that is not a "
                           f"multiple of {np_dt.itemsize}, the size of {out_dt.name}")
        n = size0 // np_dt.itemsize
        raw = np.frombuffer(b"".join(flat), dtype=np.uint8 if np_dt == np.bool_ else np_dt)
        out = (raw != 0) if np_dt == np.bool_ else raw.astype(out_dt.as_numpy_dtype)
        return out.reshape(arr.shape + (n,))
    return compute


# ---------------------------------------------------------------------------- DecodeCSV
_INT = re.compile(r"[+-]?[0-9]+")
_INT_RANGE = {"int32": (-2 ** 31, 2 ** 31 - 1), "int64": (-2 ** 63, 2 ** 63 - 1)}
_CSV_TYPE = {"float32": "float", "float64": "double", "int32": "int32", "int64": "int64", "string": "string"}


def _split_quoted(rec: str, delim: str):
    """TF's CSV field splitter: "..." fields with "" for a quote, a quote nowhere else."""
    fields, i, n = [], 0, len(rec)
    while True:
        if i < n and rec[i] == '"':
            buf, i = [], i + 1
            while True:
                if i >= n:
                    raise ValueError("Quoted field has to end with quote followed by delim or end")
                if rec[i] == '"':
                    if i + 1 < n and rec[i + 1] == '"':
                        buf.append('"')
                        i += 2
                        continue
                    if i + 1 < n and rec[i + 1] != delim:
                        raise ValueError("Quote inside a string has to be escaped by another quote")
                    i += 1
                    break
                buf.append(rec[i])
                i += 1
            fields.append("".join(buf))
        else:
            j = rec.find(delim, i)
            j = n if j < 0 else j
            field = rec[i:j]
            if any(c in field for c in '"\r\n'):
                raise ValueError("Unquoted fields cannot have quotes/CRLFs inside")
            fields.append(field)
            i = j
        if i >= n:
            return fields
        i += 1  # the delimiter
        if i == n:
            fields.append("")
            return fields


def _split(rec: str, delim: str, quotes: bool):
    if not rec:
        return []
    if quotes and '"' in rec:
        return _split_quoted(rec, delim)
    return rec.split(delim)


def _convert(field: str, dt, col: int, row: int):
    name = dt.name
    if name == "string":
        return field.encode("utf-8")
    text = field.strip()
    if name in _INT_RANGE:
        lo, hi = _INT_RANGE[name]
        if _INT.fullmatch(text) and lo <= int(text) <= hi:
            return int(text)
    elif "_" not in text:
        try:
            return float(text)
        except ValueError:
            pass
    raise ValueError(f"Field {col} in record {row} is not a valid {_CSV_TYPE[name]}: {field}")


def _decode_csv(ctx):
    delim = ctx.get_attr("field_delim")
    quotes, na = ctx.get_attr("use_quote_delim"), ctx.get_attr("na_value")
    select = list(ctx.get_attr("select_cols"))
    types = [t.base_dtype for t in ctx.get_attr("OUT_TYPE")]
    if len(delim) != 1:
        raise _invalid(f"DecodeCSV {ctx.name}: field_delim should be only 1 char, got {delim!r}")

    def compute(records, *defaults):
        recs = np.asarray(records, dtype=object)
        for i, d in enumerate(defaults):
            if np.size(d) > 1:
                raise _invalid(f"DecodeCSV {ctx.name}: Shape of a default must be a length-0 or length-1 "
                               f"vector, or a scalar: record_defaults[{i}] has shape {list(np.shape(d))}")
        want = select[-1] + 1 if select else len(types)
        cols = select or list(range(len(types)))
        outs = [np.empty(recs.size, dtype=_np_type(t)) for t in types]
        try:
            for row, rec in enumerate(recs.reshape(-1)):
                fields = _split(_text(rec), delim, quotes)
                if (select and len(fields) < want) or (not select and len(fields) != want):
                    raise ValueError(f"Expect {want} fields but have {len(fields)} in record {row}")
                for k, (c, t) in enumerate(zip(cols, types)):
                    f = fields[c]
                    if f == "" or f == na:
                        if np.size(defaults[k]) == 0:
                            raise ValueError(f"Field {k} is required but missing in record {row}!")
                        outs[k][row] = np.asarray(defaults[k]).reshape(-1)[0]
                    else:
                        outs[k][row] = _convert(f, t, k, row)
        except ValueError as e:
            raise _invalid(str(e)) from None
        return _outputs([o.reshape(recs.shape) for o in outs])
    return compute


# ---------------------------------------------------------------------------- input producers
def _count_up_to(ctx):
    limit = ctx.get_attr("limit")

    def compute(var):
        with var.lock:
            buf = var.read()
            before = buf.copy()
            if before >= limit:
                raise errors.OutOfRangeError(None, None, f"Reached limit of {limit}")
            buf += 1
            return before
    return compute


def _matching_files(ctx):
    def compute(pattern):
        pats = np.asarray(pattern, dtype=object)
        if pats.ndim > 1:
            raise errors.InvalidArgumentError(None, None, f"MatchingFiles {ctx.name}: pattern must be a "
                                              f"scalar or vector, got shape {list(pats.shape)}")
        # as TF: every pattern's matches, then one sort (a file two patterns match appears twice);
        # under a file root, each pattern and each match must lie inside it
        where = f"MatchingFiles {ctx.name}"
        names = sorted(f for p in pats.reshape(-1) for f in file_root.matching_files(where, _text(p)))
        return np.array([n.encode("utf-8") for n in names] or [], dtype=object).reshape(-1)
    return compute


def register(registry, device=DEVICE):
    """Registers this family's CPU kernels."""
    table = {"ParseExample": _parse_example, "ParseSingleExample": _parse_single_example,
             "ParseSingleSequenceExample": _parse_single_sequence_example, "DecodeRaw": _decode_raw,
             "DecodeCSV": _decode_csv}
    for op, factory in table.items():
        registry.register(op, device, factory)
    registry.register("CountUpTo", device, _count_up_to)
    registry.register("MatchingFiles", device, _matching_files, expensive=True)
