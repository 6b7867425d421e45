"""The checkpoint file format: a tensor bundle made of one index file and data files.

A checkpoint with prefix ``P`` is the index ``P.index`` and the data files
``P.data-00000-of-0000N``. Each data file is a 64-byte header followed by tensors stored as
little-endian raw bytes (C order), each at an offset aligned to 64 bytes; the index is a framed,
checksummed `BundleIndex` protobuf naming, for every tensor, its dtype, shape, data file, offset,
length and CRC-32C. String tensors are a table of uint64 lengths followed by the bytes. Nothing is
ever pickled. docs/checkpoint_format.md is the normative description.

Writes are atomic: the data file and the index are written under temporary names in the target
directory, fsync'ed, then renamed, the index last; a checkpoint exists only once its index does.
A temporary name carries its writer's host and process id (``P.index.tempstate-HOST-PID-TOKEN``):
a save killed midway leaves them behind, and every later save into the directory removes those
whose writer is dead (`remove_stale_files`), so repeated crashes do not fill the disk.

Example::

    write_bundle("/tmp/ckpt/model", {"w": np.ones((2, 3), np.float32)})
    r = BundleReader("/tmp/ckpt/model")
    r.read("w")          # array([[1., 1., 1.], [1., 1., 1.]], dtype=float32)

Readers raise `NotFoundError` when the index is missing and `DataLossError` (naming the file and
the tensor) when a file is truncated or a checksum does not match.
"""

from __future__ import annotations

import errno
import glob
import os
import secrets
import socket
import struct
import threading
import time

import google_crc32c
import numpy as np

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import errors
from kernflow.core.protobuf import saver_pb2
from kernflow.core.protobuf import tensor_shape_pb2

__all__ = ["INDEX_MAGIC", "DATA_MAGIC", "FILE_VERSION", "ENCODING_VERSION", "ALIGNMENT",
           "index_filename", "data_filename", "data_file_pattern", "crc32c", "BundleWriter",
           "BundleReader", "write_bundle", "merge_bundles", "delete_bundle", "bundle_exists",
           "atomic_write_bytes", "fsync_directory", "os_error", "remove_stale_files"]

INDEX_MAGIC = b"KFCKPTIX"
DATA_MAGIC = b"KFCKPTDT"
FILE_VERSION = 1          # framing of the index and data files
ENCODING_VERSION = 1      # tensor encoding (BundleHeader.version)
ALIGNMENT = 64
DATA_HEADER_SIZE = 64
TEMP_MARKER = ".tempstate"
# magic, file version, flags, payload length
_INDEX_HEAD = struct.Struct("<8sIIQ")
_INDEX_TAIL = struct.Struct("<I")
# magic, file version, flags, file id
_DATA_HEAD = struct.Struct("<8sII16s")
_ZEROS = bytes(ALIGNMENT)
_UNSUPPORTED = (_dtypes.DT_RESOURCE, _dtypes.DT_VARIANT)


def index_filename(prefix) -> str:
    """``<prefix>.index``."""
    return os.fspath(prefix) + ".index"


def data_filename(prefix, shard: int, num_shards: int) -> str:
    """``<prefix>.data-<shard>-of-<num_shards>`` (five digits each)."""
    return f"{os.fspath(prefix)}.data-{shard:05d}-of-{num_shards:05d}"


def data_file_pattern(prefix) -> str:
    """A glob matching every data file of `prefix`."""
    return glob.escape(os.fspath(prefix)) + ".data-?????-of-?????"


def crc32c(data, crc: int = 0) -> int:
    """CRC-32C (Castagnoli) of a bytes-like object or contiguous uint8 array, extending `crc`."""
    if isinstance(data, (bytearray, memoryview)):
        data = bytes(data)
    return google_crc32c.extend(crc, data) if crc else google_crc32c.value(data)


def os_error(e: OSError, what: str) -> errors.OpError:
    """Maps an OSError to the matching TF error, with `what` (the action) in the message."""
    msg = f"{what}: {e.strerror or e} ({e.filename or ''})"
    cls = {errno.ENOENT: errors.NotFoundError, errno.ENOTDIR: errors.NotFoundError,
           errno.EACCES: errors.PermissionDeniedError, errno.EPERM: errors.PermissionDeniedError,
           errno.EROFS: errors.PermissionDeniedError, errno.ENOSPC: errors.ResourceExhaustedError,
           errno.EDQUOT: errors.ResourceExhaustedError, errno.EEXIST: errors.AlreadyExistsError,
           }.get(e.errno, errors.UnknownError)
    return cls(None, None, msg)


def fsync_directory(path: str) -> None:
    """Makes renames and unlinks in directory `path` durable (a no-op where unsupported)."""
    try:
        fd = os.open(path or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


_HOST = socket.gethostname().replace("-", "_") or "host"
# A temporary file of an unknown or remote writer, and a data file without its index, count as
# left behind once untouched for this long (a live save renames its data file and then its index
# within microseconds, and writes its temporary files continuously).
STALE_AFTER_S = 600.0
_SCAN_INTERVAL_S = 30.0
_scanned: dict[str, float] = {}
_scan_lock = threading.Lock()


def _temp_name(path: str) -> str:
    return f"{path}{TEMP_MARKER}-{_HOST}-{os.getpid()}-{secrets.token_hex(8)}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:          # EPERM: it exists (another user's)
        return True
    return True


def _temp_writer_dead(name: str, ctime: float, now: float) -> bool:
    """Whether the temporary file `name` (a base name holding TEMP_MARKER) was left by a writer
    that is gone: a dead process of this host, else (another host's, or an older kernflow's name
    without a writer) untouched for STALE_AFTER_S."""
    tail = name.rsplit(TEMP_MARKER, 1)[1]
    parts = tail.split("-")
    if len(parts) == 4 and parts[0] == "" and parts[1] == _HOST and parts[2].isdigit():
        pid = int(parts[2])
        return pid != os.getpid() and not _pid_alive(pid)
    return now - ctime > STALE_AFTER_S


def remove_stale_files(directory: str, force: bool = False) -> list[str]:
    """Removes what killed saves left in `directory`; returns the removed paths.

    Removed: temporary files (``*.tempstate*``) whose writer is dead (`_temp_writer_dead`), and data
    files (``*.data-*-of-*``) without their index that were untouched for STALE_AFTER_S (a save
    killed between renaming its data file and its index). Checkpoints (an index and its data) are
    never touched. A directory is scanned at most every _SCAN_INTERVAL_S per process unless `force`.
    """
    directory = directory or "."
    now = time.time()
    key = os.path.abspath(directory)
    with _scan_lock:
        if not force and now - _scanned.get(key, 0.0) < _SCAN_INTERVAL_S:
            return []
        _scanned[key] = now
    removed = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    names = {e.name for e in entries}
    for e in entries:
        try:
            if not e.is_file(follow_symlinks=False):
                continue
            ctime = e.stat(follow_symlinks=False).st_ctime
        except OSError:
            continue
        name = e.name
        stale = False
        if TEMP_MARKER in name:
            stale = _temp_writer_dead(name, ctime, now)
        elif ".data-" in name and "-of-" in name:
            prefix = name.split(".data-", 1)[0]
            stale = prefix + ".index" not in names and now - ctime > STALE_AFTER_S
        if stale:
            try:
                os.remove(e.path)
                removed.append(e.path)
            except OSError:
                pass
    return removed


def _remove_quietly(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


def atomic_write_bytes(path, data: bytes) -> None:
    """Replaces `path` with `data` atomically: temp file, fsync, rename, directory fsync."""
    path = os.fspath(path)
    tmp = _temp_name(path)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        _remove_quietly(tmp)
        raise
    fsync_directory(os.path.dirname(path))


# ---------------------------------------------------------------------------- tensor encoding
def _as_dtype(value, dtype):
    if dtype is not None:
        dt = _dtypes.as_dtype(dtype).base_dtype
    else:
        dt = _dtypes.as_dtype(value.dtype)
    if dt.as_datatype_enum in _UNSUPPORTED:
        raise errors.InvalidArgumentError(None, None, f"cannot save tensors of dtype {dt.name}")
    return dt


def _string_parts(arr: np.ndarray):
    items = []
    for v in arr.reshape(-1):
        if isinstance(v, bytes):
            items.append(v)
        elif isinstance(v, str):
            items.append(v.encode("utf-8"))
        else:
            items.append(bytes(v))
    lengths = np.fromiter((len(b) for b in items), dtype="<u8", count=len(items))
    return lengths.view(np.uint8), b"".join(items)


def _numeric_bytes(arr: np.ndarray, dt) -> np.ndarray:
    """A C-contiguous little-endian uint8 view of `arr`'s elements (no copy when already so)."""
    want = np.dtype(dt.as_numpy_dtype).newbyteorder("<")
    a = np.require(arr, dtype=want, requirements="C")
    return a.reshape(-1).view(np.uint8)


def _shape_proto(shape) -> tensor_shape_pb2.TensorShapeProto:
    p = tensor_shape_pb2.TensorShapeProto()
    for d in shape:
        p.dim.add(size=int(d))
    return p


# ---------------------------------------------------------------------------- writing
class BundleWriter:
    """Writes one data file and the index of a checkpoint, atomically.

    Tensors go straight to a temporary data file as they are added (no buffering of values);
    `finish` fsyncs, writes the index and renames both into place, the index last. Used as a
    context manager, an exception before `finish` removes the temporary files.

    Args:
        prefix: the checkpoint prefix; its directory is created if missing.
    """

    def __init__(self, prefix):
        self._prefix = os.fspath(prefix)
        self._dir = os.path.dirname(self._prefix)
        try:
            if self._dir:
                os.makedirs(self._dir, exist_ok=True)
            remove_stale_files(self._dir)
            self._data_final = data_filename(self._prefix, 0, 1)
            self._data_tmp = _temp_name(self._data_final)
            self._file_id = os.urandom(16)
            self._f = open(self._data_tmp, "wb")
        except OSError as e:
            raise os_error(e, f"Failed to create checkpoint {self._prefix}") from e
        head = _DATA_HEAD.pack(DATA_MAGIC, FILE_VERSION, 0, self._file_id)
        self._f.write(head + bytes(DATA_HEADER_SIZE - len(head)))
        self._pos = DATA_HEADER_SIZE
        self._entries: dict[str, saver_pb2.BundleEntry] = {}
        self._done = False

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if not self._done:
            self.abort()

    def add(self, name: str, value, dtype=None) -> None:
        """Appends tensor `value` (array-like) under `name`, as `dtype` (default: value's dtype).

        Raises:
            InvalidArgumentError: on a duplicate or empty name, or an unsavable dtype.
        """
        if self._done:
            raise ValueError("BundleWriter.add after finish/abort")
        if isinstance(name, bytes):
            name = name.decode("utf-8")
        if not name:
            raise errors.InvalidArgumentError(None, None, "tensor names in a checkpoint must be non-empty")
        if name in self._entries:
            raise errors.InvalidArgumentError(None, None, f"Adding duplicate key: {name}")
        arr = value if isinstance(value, np.ndarray) else np.asarray(value)
        dt = _as_dtype(arr, dtype)
        pad = -self._pos % ALIGNMENT
        try:
            if pad:
                self._f.write(_ZEROS[:pad])
                self._pos += pad
            if dt == _dtypes.string:
                parts = _string_parts(np.asarray(arr, dtype=object))
            else:
                parts = (_numeric_bytes(arr, dt),)
            crc, size = 0, 0
            for p in parts:
                self._f.write(p)
                crc = crc32c(p, crc) if len(p) else crc
                size += len(p)
        except OSError as e:
            raise os_error(e, f"Failed to write tensor '{name}' to {self._data_tmp}") from e
        self._entries[name] = saver_pb2.BundleEntry(
            name=name, dtype=dt.as_datatype_enum, shape=_shape_proto(arr.shape), shard_id=0,
            offset=self._pos, size=size, crc32c=crc)
        self._pos += size

    def finish(self) -> None:
        """Makes the checkpoint durable and visible (index renamed last)."""
        index_final = index_filename(self._prefix)
        index_tmp = _temp_name(index_final)
        try:
            self._f.flush()
            os.fsync(self._f.fileno())
            self._f.close()
            header = saver_pb2.BundleHeader(num_shards=1, endianness=saver_pb2.BundleHeader.LITTLE,
                                            version=ENCODING_VERSION, data_file_ids=[self._file_id])
            _write_index_file(index_tmp, header, self._entries.values())
            # Overwriting a prefix: drop the old index first so that a crash before the new one is
            # renamed in leaves no checkpoint rather than an index pointing at foreign data.
            if os.path.exists(index_final):
                os.remove(index_final)
                fsync_directory(self._dir)
            os.replace(self._data_tmp, self._data_final)
            os.replace(index_tmp, index_final)
        except OSError as e:
            self.abort()
            _remove_quietly(index_tmp)
            raise os_error(e, f"Failed to write checkpoint {self._prefix}") from e
        except BaseException:
            self.abort()
            _remove_quietly(index_tmp)
            raise
        self._done = True
        fsync_directory(self._dir)

    def abort(self) -> None:
        """Closes and removes the temporary data file."""
        self._done = True
        try:
            self._f.close()
        except OSError:
            pass
        _remove_quietly(self._data_tmp)


def _index_bytes(header, entries) -> bytes:
    idx = saver_pb2.BundleIndex(header=header)
    idx.entries.extend(sorted(entries, key=lambda e: e.name))
    payload = idx.SerializeToString(deterministic=True)
    head = _INDEX_HEAD.pack(INDEX_MAGIC, FILE_VERSION, 0, len(payload))
    body = head + payload
    return body + _INDEX_TAIL.pack(crc32c(body))


def _write_index_file(path: str, header, entries) -> None:
    with open(path, "wb") as f:
        f.write(_index_bytes(header, entries))
        f.flush()
        os.fsync(f.fileno())


def write_bundle(prefix, tensors, dtypes=None) -> None:
    """Writes the checkpoint `prefix` holding `tensors` ({name: array-like}) atomically.

    Args:
        dtypes: optional {name: DType} overriding the arrays' own dtypes.
    """
    with BundleWriter(prefix) as w:
        for name, value in tensors.items():
            w.add(name, value, (dtypes or {}).get(name))
        w.finish()


# ---------------------------------------------------------------------------- reading
def _not_found(prefix: str) -> errors.NotFoundError:
    return errors.NotFoundError(None, None, f"Unsuccessful TensorSliceReader constructor: Failed to "
                                f"find any matching files for {prefix}")


def _parse_index(data: bytes, path: str) -> saver_pb2.BundleIndex:
    def loss(why):
        return errors.DataLossError(None, None, f"Index file {path} is corrupted: {why}")
    if len(data) < _INDEX_HEAD.size + _INDEX_TAIL.size:
        raise loss(f"only {len(data)} bytes, shorter than the {_INDEX_HEAD.size + _INDEX_TAIL.size}"
                   f"-byte framing (truncated?)")
    magic, version, _flags, n = _INDEX_HEAD.unpack_from(data)
    if magic != INDEX_MAGIC:
        raise loss(f"bad magic {magic!r} (expected {INDEX_MAGIC!r}); not a kernflow checkpoint index")
    if version != FILE_VERSION:
        raise loss(f"unsupported index file version {version} (this reader knows {FILE_VERSION})")
    want = _INDEX_HEAD.size + n + _INDEX_TAIL.size
    if len(data) != want:
        raise loss(f"{len(data)} bytes but the header says {want} (truncated or trailing bytes)")
    body = data[:_INDEX_HEAD.size + n]
    (stored,) = _INDEX_TAIL.unpack_from(data, _INDEX_HEAD.size + n)
    computed = crc32c(body)
    if stored != computed:
        raise loss(f"checksum stored 0x{stored:08x}, computed 0x{computed:08x}")
    idx = saver_pb2.BundleIndex()
    try:
        idx.ParseFromString(body[_INDEX_HEAD.size:])
    except Exception as e:  # noqa: BLE001 - protobuf's DecodeError and friends
        raise loss(f"cannot parse the index: {e}") from e
    h = idx.header
    if h.version != ENCODING_VERSION:
        raise loss(f"unsupported tensor encoding version {h.version}")
    if h.endianness != saver_pb2.BundleHeader.LITTLE:
        raise loss("big-endian checkpoints are not supported")
    if h.num_shards < 1 or len(h.data_file_ids) != h.num_shards:
        raise loss(f"header names {h.num_shards} shards and {len(h.data_file_ids)} data file ids")
    return idx


class BundleReader:
    """Reads the tensors of checkpoint `prefix`, verifying every checksum.

    Raises:
        NotFoundError: if ``<prefix>.index`` does not exist.
        DataLossError: if the index is truncated or corrupted.
    """

    def __init__(self, prefix):
        self._prefix = os.fspath(prefix)
        path = index_filename(self._prefix)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            raise _not_found(self._prefix) from None
        except OSError as e:
            raise os_error(e, f"Failed to read checkpoint index of {self._prefix}") from e
        idx = _parse_index(data, path)
        self._header = idx.header
        self._entries = {e.name: e for e in idx.entries}
        self._verified_shards: set[int] = set()

    @property
    def prefix(self) -> str:
        return self._prefix

    @property
    def num_shards(self) -> int:
        return self._header.num_shards

    @property
    def header(self) -> saver_pb2.BundleHeader:
        return self._header

    def keys(self) -> list[str]:
        """Tensor names, sorted."""
        return sorted(self._entries)

    def __contains__(self, name) -> bool:
        return _text(name) in self._entries

    def entry(self, name) -> saver_pb2.BundleEntry:
        """The index entry of `name`. Raises NotFoundError if absent."""
        name = _text(name)
        e = self._entries.get(name)
        if e is None:
            raise errors.NotFoundError(None, None, f"Key {name} not found in checkpoint")
        return e

    def dtype(self, name) -> _dtypes.DType:
        return _dtypes.as_dtype(self.entry(name).dtype)

    def shape(self, name) -> list[int]:
        return [d.size for d in self.entry(name).shape.dim]

    def data_file(self, shard: int) -> str:
        return data_filename(self._prefix, shard, self._header.num_shards)

    def _open_data(self, e, name):
        if not 0 <= e.shard_id < self._header.num_shards:
            raise errors.DataLossError(None, None, f"Index of {self._prefix} is corrupted: tensor "
                                       f"'{name}' names shard {e.shard_id} of {self._header.num_shards}")
        path = self.data_file(e.shard_id)
        try:
            f = open(path, "rb")
        except FileNotFoundError:
            raise errors.DataLossError(None, None, f"Data file {path} of checkpoint {self._prefix} is "
                                       f"missing (needed for tensor '{name}')") from None
        except OSError as e2:
            raise os_error(e2, f"Failed to open {path}") from e2
        if e.shard_id not in self._verified_shards:
            head = f.read(_DATA_HEAD.size)
            ok = len(head) == _DATA_HEAD.size
            magic, version, _flags, file_id = _DATA_HEAD.unpack(head) if ok else (b"", 0, 0, b"")
            if not ok or magic != DATA_MAGIC or version != FILE_VERSION:
                f.close()
                raise errors.DataLossError(None, None, f"Data file {path} is corrupted or truncated: "
                                           f"bad header (reading tensor '{name}')")
            if file_id != self._header.data_file_ids[e.shard_id]:
                f.close()
                raise errors.DataLossError(
                    None, None, f"Data file {path} does not belong to the index of {self._prefix} "
                    f"(file id mismatch: an interrupted save overwrote part of this checkpoint); "
                    f"reading tensor '{name}'")
            self._verified_shards.add(e.shard_id)
        return f, path

    def read(self, name, dtype=None) -> np.ndarray:
        """Returns the tensor `name` as a new numpy array (an object array of bytes for strings).

        Args:
            dtype: if given, the stored dtype must equal it (InvalidArgumentError otherwise).

        Raises:
            NotFoundError: no tensor `name`.
            DataLossError: truncated data, a bad size or a checksum mismatch (names the tensor).
        """
        name = _text(name)
        e = self.entry(name)
        dt = _dtypes.as_dtype(e.dtype)
        if dtype is not None and _dtypes.as_dtype(dtype).base_dtype != dt:
            raise errors.InvalidArgumentError(
                None, None, f"tensor_name = {name}; expected dtype "
                f"{_dtypes.as_dtype(dtype).base_dtype.name} does not equal original dtype {dt.name}")
        shape = tuple(d.size for d in e.shape.dim)
        n = int(np.prod(shape, dtype=np.int64))
        if dt == _dtypes.string:
            buf = np.empty(e.size, dtype=np.uint8)
            want = None
        else:
            npdt = np.dtype(dt.as_numpy_dtype)
            want = n * npdt.itemsize
            if e.size != want:
                raise errors.DataLossError(None, None, f"Index of {self._prefix} is corrupted: tensor "
                                           f"'{name}' of shape {list(shape)} and dtype {dt.name} "
                                           f"needs {want} bytes, the entry says {e.size}")
            out = np.empty(shape, dtype=npdt.newbyteorder("<"))
            buf = out.reshape(-1).view(np.uint8)
        f, path = self._open_data(e, name)
        with f:
            try:
                f.seek(e.offset)
                got = f.readinto(memoryview(buf)) if e.size else 0
            except OSError as e2:
                raise os_error(e2, f"Failed to read tensor '{name}' from {path}") from e2
        if got != e.size:
            raise errors.DataLossError(None, None, f"Data file {path} is truncated: tensor '{name}' "
                                       f"needs bytes [{e.offset}, {e.offset + e.size}), got {got}")
        computed = crc32c(buf) if e.size else 0
        if computed != e.crc32c:
            raise errors.DataLossError(None, None, f"Checksum does not match for tensor '{name}': "
                                       f"stored 0x{e.crc32c:08x}, computed 0x{computed:08x} "
                                       f"(file {path})")
        if want is None:
            return _decode_strings(buf, shape, n, name, path)
        return out if out.dtype.isnative else out.astype(out.dtype.newbyteorder("="))


def _decode_strings(buf, shape, n, name, path):
    table = 8 * n
    if len(buf) < table:
        raise errors.DataLossError(None, None, f"String tensor '{name}' in {path} is corrupted: "
                                   f"{len(buf)} bytes cannot hold {n} lengths")
    lengths = buf[:table].view("<u8").astype(np.int64)
    if int(lengths.sum()) != len(buf) - table:
        raise errors.DataLossError(None, None, f"String tensor '{name}' in {path} is corrupted: "
                                   f"lengths add up to {int(lengths.sum())}, data has "
                                   f"{len(buf) - table} bytes")
    data = buf[table:].tobytes()
    out = np.empty(n, dtype=object)
    pos = 0
    for i, ln in enumerate(lengths.tolist()):
        out[i] = data[pos:pos + ln]
        pos += ln
    return out.reshape(shape)


def _text(name) -> str:
    return name.decode("utf-8") if isinstance(name, bytes) else str(name)


# ---------------------------------------------------------------------------- whole checkpoints
def bundle_exists(prefix) -> bool:
    """True if the checkpoint's index exists (it is renamed into place last)."""
    return os.path.isfile(index_filename(prefix))


def delete_bundle(prefix) -> None:
    """Deletes a checkpoint: its index first (so it stops existing at once), then its data files."""
    prefix = os.fspath(prefix)
    _remove_quietly(index_filename(prefix))
    for p in glob.glob(data_file_pattern(prefix)):
        _remove_quietly(p)


def merge_bundles(src_prefixes, dest_prefix, delete_old_dirs: bool = True,
                  allow_missing_files: bool = False) -> None:
    """Merges the single- or multi-shard checkpoints `src_prefixes` into `dest_prefix`.

    Data files are renamed (not copied) to ``<dest>.data-<k>-of-<total>``; a merged index is then
    written atomically and the source indexes deleted.

    Raises:
        NotFoundError: a source is missing and not `allow_missing_files`.
        InvalidArgumentError: the same tensor name appears in two sources.
    """
    dest = os.fspath(dest_prefix)
    readers = []
    for p in src_prefixes:
        p = _text(p)
        if allow_missing_files and not bundle_exists(p):
            continue
        readers.append(BundleReader(p))
    if not readers:
        raise errors.InvalidArgumentError(None, None, f"MergeV2Checkpoints: no checkpoints to merge "
                                          f"into {dest}")
    total = sum(r.num_shards for r in readers)
    entries, ids, seen = [], [], {}
    base = 0
    for r in readers:
        for name in r.keys():
            if name in seen:
                raise errors.InvalidArgumentError(None, None, f"MergeV2Checkpoints: duplicate tensor "
                                                  f"'{name}' in {seen[name]} and {r.prefix}")
            seen[name] = r.prefix
            e = saver_pb2.BundleEntry()
            e.CopyFrom(r.entry(name))
            e.shard_id += base
            entries.append(e)
        ids.extend(r.header.data_file_ids)
        base += r.num_shards
    dest_dir = os.path.dirname(dest)
    index_final = index_filename(dest)
    index_tmp = _temp_name(index_final)
    try:
        if dest_dir:
            os.makedirs(dest_dir, exist_ok=True)
        header = saver_pb2.BundleHeader(num_shards=total, endianness=saver_pb2.BundleHeader.LITTLE,
                                        version=ENCODING_VERSION, data_file_ids=ids)
        _write_index_file(index_tmp, header, entries)
        if os.path.exists(index_final):
            os.remove(index_final)
            fsync_directory(dest_dir)
        k = 0
        for r in readers:
            for s in range(r.num_shards):
                os.replace(r.data_file(s), data_filename(dest, k, total))
                k += 1
        os.replace(index_tmp, index_final)
        fsync_directory(dest_dir)
    except OSError as e:
        _remove_quietly(index_tmp)
        raise os_error(e, f"Failed to merge checkpoints into {dest}") from e
    for r in readers:
        _remove_quietly(index_filename(r.prefix))
        d = os.path.dirname(r.prefix)
        if delete_old_dirs and os.path.abspath(d or ".") != os.path.abspath(dest_dir or "."):
            try:
                os.rmdir(d)
            except OSError:
                pass
