"""Lookup table kernels (kernflow.core.ops.lookup_ops): hash tables in the device's resource manager.

A table lives in its device's resource manager under (container, shared_name, the node name when
``use_node_name_sharing``, or a private name); the value of a table handle passed between kernels is
the `LookupTable` object itself, as for queues.

A `LookupTable` keeps its entries as two aligned arrays: ``keys`` (1-D, sorted, unique) and
``values`` (``[len(keys)] + value_shape``). A lookup is a vectorised binary search
(``np.searchsorted``) over the sorted keys, for numeric and string (object array of bytes) keys
alike; an insert merges and re-sorts. Every read and write holds the table's lock.

A table initialised from a text file reads it at a path confined to the process's file root
(kernflow.core.runtime.file_root) when one is set.
"""

from __future__ import annotations

import itertools
import re
import threading

import numpy as np

from kernflow.core.framework import errors
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.runtime import file_root

__all__ = ["LookupTable", "register"]

DEVICE = "CPU"
_ids = itertools.count()
WHOLE_LINE, LINE_NUMBER = -2, -1


def _np_dtype(dtype):
    return object if dtype.name == "string" else dtype.as_numpy_dtype


def _shape_str(shape) -> str:
    return "[" + ",".join(str(int(d)) for d in shape) + "]"


class LookupTable:
    """A hash table resource.

    Args:
        kind: "HashTable" (static: filled once by an initializer), "MutableHashTable" or
            "MutableDenseHashTable".
        name: the resource name.
        key_dtype, value_dtype: DTypes.
        value_shape: the shape of each value (() for scalars).
        empty_key, deleted_key: the reserved keys of a dense table (None otherwise).
    """

    def __init__(self, kind, name, key_dtype, value_dtype, value_shape=(), empty_key=None,
                 deleted_key=None):
        self.kind, self.name = kind, name
        self.key_dtype, self.value_dtype = key_dtype, value_dtype
        self.value_shape = tuple(int(d) for d in value_shape)
        self._knp, self._vnp = _np_dtype(key_dtype), _np_dtype(value_dtype)
        self.keys = np.empty((0,), self._knp)
        self.values = np.empty((0,) + self.value_shape, self._vnp)
        self.reserved = [k for k in (empty_key, deleted_key) if k is not None]
        self.initialized = kind != "HashTable"
        self.lock = threading.Lock()

    def size(self) -> int:
        with self.lock:
            return len(self.keys)

    # ---------------------------------------------------------------- argument checks
    def check_types(self, node, key_dtype, value_dtype=None) -> None:
        if key_dtype is not None and key_dtype.base_dtype != self.key_dtype:
            raise errors.InvalidArgumentError(None, None, f"{node}: table '{self.name}' has key type "
                                              f"{self.key_dtype.name}, got keys of type {key_dtype.name}")
        if value_dtype is not None and value_dtype.base_dtype != self.value_dtype:
            raise errors.InvalidArgumentError(None, None, f"{node}: table '{self.name}' has value type "
                                              f"{self.value_dtype.name}, got values of type "
                                              f"{value_dtype.name}")

    def _flat_keys(self, node, keys) -> np.ndarray:
        flat = np.asarray(keys, self._knp).reshape(-1)
        for which, r in zip(("empty_key", "deleted_key"), self.reserved):
            if flat.size and (flat == r).any():
                raise errors.InvalidArgumentError(None, None, f"{node}: using the {which} ({r!r}) as a "
                                                  f"table key is not allowed")
        return flat

    def _flat_values(self, node, keys, values) -> np.ndarray:
        keys, values = np.asarray(keys), np.asarray(values, self._vnp)
        want = keys.shape + self.value_shape
        if values.shape != want:
            raise errors.InvalidArgumentError(None, None, f"{node}: expected values of shape "
                                              f"{_shape_str(want)} (keys shape + value shape), got "
                                              f"{_shape_str(values.shape)}")
        return values.reshape((-1,) + self.value_shape)

    # ---------------------------------------------------------------- operations
    def _positions(self, flat):
        """(index into self.keys, found mask) for each key of `flat` (lock held)."""
        n = len(self.keys)
        if n == 0:
            return np.zeros(flat.shape, np.intp), np.zeros(flat.shape, bool)
        pos = np.minimum(np.searchsorted(self.keys, flat), n - 1)
        return pos, np.asarray(self.keys[pos] == flat, bool)

    def find(self, node, keys, default):
        keys = np.asarray(keys)
        default = np.asarray(default, self._vnp)
        if default.shape != self.value_shape:
            raise errors.InvalidArgumentError(None, None, f"{node}: expected shape "
                                              f"{_shape_str(self.value_shape)} for default_value, got "
                                              f"{_shape_str(default.shape)}")
        flat = self._flat_keys(node, keys)
        with self.lock:
            if not self.initialized:
                raise errors.FailedPreconditionError(None, None, f"{node}: Table not initialized.")
            pos, found = self._positions(flat)
            vals = self.values[pos] if len(self.keys) else np.empty((flat.size,) + self.value_shape,
                                                                     self._vnp)
        mask = found.reshape(found.shape + (1,) * len(self.value_shape))
        out = np.where(mask, vals, default)
        return out.astype(self._vnp, copy=False).reshape(keys.shape + self.value_shape)

    def insert(self, node, keys, values) -> None:
        flat, vals = self._flat_keys(node, keys), self._flat_values(node, keys, values)
        with self.lock:
            # Reversed so that the last of duplicate keys wins, new entries before the old ones.
            allk = np.concatenate([flat[::-1], self.keys])
            allv = np.concatenate([vals[::-1], self.values])
            self.keys, first = np.unique(allk, return_index=True)
            self.values = allv[first]

    def remove(self, node, keys) -> None:
        flat = self._flat_keys(node, keys)
        with self.lock:
            pos, found = self._positions(flat)
            keep = np.ones(len(self.keys), bool)
            keep[pos[found]] = False
            self.keys, self.values = self.keys[keep], self.values[keep]

    def import_values(self, node, keys, values) -> None:
        """Replaces the contents (a static table: initializes it, see `initialize`)."""
        if self.kind == "HashTable":
            self.initialize(node, keys, values)
            return
        flat, vals = self._flat_keys(node, keys), self._flat_values(node, keys, values)
        with self.lock:
            self.keys, self.values = self.keys[:0], self.values[:0]
        self.insert(node, flat, vals)

    def initialize(self, node, keys, values) -> None:
        """Fills a static table once. Initializing again with the same entries does nothing.

        Raises:
            FailedPreconditionError: a key given twice with different values, or a table already
                initialized with different entries.
        """
        flat, vals = self._flat_keys(node, keys), self._flat_values(node, keys, values)
        uniq, first, inverse = np.unique(flat, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
        differs = np.nonzero(np.asarray(vals != vals[first][inverse], bool).reshape(len(flat), -1).any(1))[0]
        if differs.size:
            i = int(differs[0])
            raise errors.FailedPreconditionError(
                None, None, f"{node}: HashTable has different value for same key. Key {_show(flat[i])} "
                f"has {_show(vals[first][inverse[i]])} and trying to add value {_show(vals[i])}")
        with self.lock:
            if self.initialized:
                if not (np.array_equal(uniq, self.keys) and
                        np.array_equal(vals[first], self.values)):
                    raise errors.FailedPreconditionError(
                        None, None, f"{node}: Table '{self.name}' was already initialized with "
                        f"different data.")
                return
            self.keys, self.values, self.initialized = uniq, vals[first], True

    def export(self):
        with self.lock:
            return self.keys.copy(), self.values.copy()


def _show(v) -> str:
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return str(v.tolist() if isinstance(v, np.ndarray) else v)


# ---------------------------------------------------------------------------- text files
def _read_lines(node, filename: str, vocab_size: int) -> list:
    try:
        with open(filename, "rb") as f:
            data = f.read()
    except OSError as e:
        raise errors.NotFoundError(None, None, f"{node}: {filename}: {e.strerror}") from None
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    lines = [ln[:-1] if ln.endswith(b"\r") else ln for ln in lines]
    if vocab_size >= 0:
        if len(lines) < vocab_size:
            raise errors.InvalidArgumentError(None, None, f"{node}: Invalid vocab_size in {filename}: "
                                              f"expected {vocab_size} but got {len(lines)}")
        lines = lines[:vocab_size]
    return lines


def _column(node, filename, lines, tokens, index, dtype, offset):
    """The keys or values of a text file table: one per line."""
    if index == LINE_NUMBER:
        return np.arange(offset, offset + len(lines), dtype=np.int64)
    if index == WHOLE_LINE:
        out = np.empty(len(lines), object)
        out[:] = lines
        return out
    col = []
    for i, (line, toks) in enumerate(zip(lines, tokens)):
        if index >= len(toks):
            raise errors.InvalidArgumentError(
                None, None, f"{node}: Invalid number of columns in {filename} line {i} "
                f"({_show(line)}) : expected at least {index + 1} got {len(toks)}")
        col.append(toks[index])
    if dtype.name == "string":
        out = np.empty(len(col), object)
        out[:] = col
        return out
    conv = int if dtype.is_integer else float
    try:
        return np.array([conv(t) for t in col], dtype.as_numpy_dtype)
    except (ValueError, OverflowError):
        bad = next(i for i, t in enumerate(col) if not _parses(conv, t))
        raise errors.InvalidArgumentError(
            None, None, f"{node}: Field {_show(col[bad])} in line {bad} of {filename} is not a valid "
            f"{dtype.name}.") from None


def _parses(conv, tok) -> bool:
    try:
        conv(tok)
        return True
    except (ValueError, OverflowError):
        return False


def _init_from_text_file(ctx):
    node = ctx.name
    key_index, value_index = ctx.get_attr("key_index"), ctx.get_attr("value_index")
    vocab_size, offset = ctx.get_attr("vocab_size"), ctx.get_attr("offset")
    delim = ctx.get_attr("delimiter")
    delim = delim.encode() if isinstance(delim, str) else bytes(delim)
    splitter = re.compile(b"[" + re.escape(delim) + b"]")

    def compute(handle, filename):
        table = _table_of(handle, node)
        filename = np.asarray(filename).item()
        filename = filename.decode() if isinstance(filename, bytes) else str(filename)
        filename = file_root.check(f"InitializeTableFromTextFileV2 {node}", filename, write=False)
        lines = _read_lines(node, filename, vocab_size)
        tokens = [splitter.split(ln) for ln in lines]
        keys = _column(node, filename, lines, tokens, key_index, table.key_dtype, offset)
        values = _column(node, filename, lines, tokens, value_index, table.value_dtype, offset)
        table.initialize(node, keys.astype(table._knp), values.astype(table._vnp))
    return compute


# ---------------------------------------------------------------------------- kernels
_KINDS = {"HashTableV2": "HashTable", "MutableHashTableV2": "MutableHashTable",
          "MutableHashTableOfTensorsV2": "MutableHashTable",
          "MutableDenseHashTableV2": "MutableDenseHashTable"}


def _check_shared(t, want: LookupTable) -> None:
    if not isinstance(t, LookupTable):
        raise errors.InvalidArgumentError(None, None, f"Resource '{want.name}' is a "
                                          f"{type(t).__name__}, not a lookup table")
    have = (t.kind, t.key_dtype.name, t.value_dtype.name, t.value_shape)
    asked = (want.kind, want.key_dtype.name, want.value_dtype.name, want.value_shape)
    if have != asked:
        raise errors.InvalidArgumentError(None, None, f"Shared table '{want.name}' is (kind, key type, "
                                          f"value type, value shape) {have} but {asked} was requested")


def _table_op(ctx):
    kind = _KINDS[ctx.op_type]
    container = ctx.get_attr("container")
    name = ctx.get_attr("shared_name") or (ctx.name if ctx.get_attr("use_node_name_sharing")
                                           else f"_{next(_ids)}_{ctx.name}")
    key_dtype, value_dtype = ctx.get_attr("key_dtype"), ctx.get_attr("value_dtype")
    value_shape = _ts.as_shape(ctx.get_attr("value_shape")).as_list() if ctx.op_type in (
        "MutableHashTableOfTensorsV2", "MutableDenseHashTableV2") else ()
    value_shape = tuple(value_shape) if value_shape is not None else (None,)
    if any(d is None or d < 0 for d in value_shape):
        raise errors.InvalidArgumentError(None, None, f"{ctx.name}: value_shape must be fully defined, "
                                          f"got {value_shape}")

    def getter(*reserved):
        if reserved:
            reserved = [np.asarray(r, _np_dtype(key_dtype)) for r in reserved]
            if any(r.shape != () for r in reserved):
                raise errors.InvalidArgumentError(None, None, f"{ctx.name}: empty_key and deleted_key "
                                                  f"must be scalars (keys of rank > 0 are not supported)")
            if reserved[0] == reserved[1]:
                raise errors.InvalidArgumentError(None, None, f"{ctx.name}: empty_key and deleted_key "
                                                  f"must have different values")
            reserved = [r.item() for r in reserved]
        make = lambda: LookupTable(kind, name, key_dtype, value_dtype, value_shape, *reserved)  # noqa: E731
        want = make()
        return ctx.resource_mgr.cached_getter(container, name, make, lambda t: _check_shared(t, want))

    if kind == "MutableDenseHashTable":
        return lambda empty_key, deleted_key: getter(empty_key, deleted_key)()
    return getter()


def _table_of(handle, node: str) -> LookupTable:
    if not isinstance(handle, LookupTable):
        raise errors.InvalidArgumentError(None, None, f"{node}: input 0 is not a lookup table handle "
                                          f"(got {type(handle).__name__})")
    return handle


def _typed(method, key_attr=None, value_attr=None):
    """A kernel calling ``table.method(node, *inputs)`` after checking the key/value type attrs."""
    def factory(ctx):
        node = ctx.name
        kt = ctx.get_attr(key_attr) if key_attr else None
        vt = ctx.get_attr(value_attr) if value_attr else None

        def compute(handle, *args):
            table = _table_of(handle, node)
            table.check_types(node, kt, vt)
            return getattr(table, method)(node, *args)
        return compute
    return factory


def _size(ctx):
    node = ctx.name
    return lambda handle: np.int64(_table_of(handle, node).size())


def _export(ctx):
    node = ctx.name
    kt, vt = ctx.get_attr("Tkeys"), ctx.get_attr("Tvalues")

    def compute(handle):
        table = _table_of(handle, node)
        table.check_types(node, kt, vt)
        return table.export()
    return compute


def register(registry) -> None:
    """Registers the CPU lookup table kernels."""
    for op in _KINDS:
        registry.register(op, DEVICE, _table_op)
    registry.register("InitializeTableV2", DEVICE, _typed("initialize", "Tkey", "Tval"))
    registry.register("InitializeTableFromTextFileV2", DEVICE, _init_from_text_file)
    registry.register("LookupTableFindV2", DEVICE, _typed("find", "Tin", "Tout"))
    registry.register("LookupTableInsertV2", DEVICE, _typed("insert", "Tin", "Tout"))
    registry.register("LookupTableRemoveV2", DEVICE, _typed("remove", "Tin"))
    registry.register("LookupTableImportV2", DEVICE, _typed("import_values", "Tin", "Tout"))
    registry.register("LookupTableSizeV2", DEVICE, _size)
    registry.register("LookupTableExportV2", DEVICE, _export)
