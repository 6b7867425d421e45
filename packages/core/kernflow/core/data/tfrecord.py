"""TFRecord files: TF's record format, read and written byte for byte as TensorFlow does.

A record is ``uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)``
(little endian), where ``masked(c) = ((c >> 15 | c << 17) + 0xa282ead8) mod 2**32``. A file may be
compressed as a whole with GZIP or ZLIB (`TFRecordOptions`). Used by `kf.data.TFRecordDataset`,
`kf.python_io` (TFRecordWriter, tf_record_iterator) and the summary writer's event files.
"""

from __future__ import annotations

import gzip
import io
import struct
import zlib

import google_crc32c

from kernflow.core.framework import errors

__all__ = ["masked_crc32c", "TFRecordCompressionType", "TFRecordOptions", "TFRecordWriter",
           "tf_record_iterator", "read_records", "open_compressed"]

_MASK_DELTA = 0xA282EAD8


def masked_crc32c(data: bytes) -> int:
    c = google_crc32c.value(data)
    return (((c >> 15) | (c << 17)) + _MASK_DELTA) & 0xFFFFFFFF


class TFRecordCompressionType:
    NONE = 0
    ZLIB = 1
    GZIP = 2


_BY_NAME = {"": TFRecordCompressionType.NONE, "NONE": TFRecordCompressionType.NONE,
            "ZLIB": TFRecordCompressionType.ZLIB, "GZIP": TFRecordCompressionType.GZIP}


class TFRecordOptions:
    """How a TFRecord file is compressed (TF1's tf.io.TFRecordOptions; the zlib tuning knobs
    other than `compression_level` are accepted and ignored)."""

    compression_type_map = {TFRecordCompressionType.ZLIB: "ZLIB", TFRecordCompressionType.GZIP: "GZIP",
                            TFRecordCompressionType.NONE: ""}

    def __init__(self, compression_type=None, flush_mode=None, input_buffer_size=None,
                 output_buffer_size=None, window_bits=None, compression_level=None,
                 compression_method=None, mem_level=None, compression_strategy=None):
        self.compression_type = _compression(compression_type)
        self.compression_level = -1 if compression_level is None else compression_level

    @classmethod
    def get_compression_type_string(cls, options) -> str:
        if options is None:
            return ""
        if isinstance(options, TFRecordOptions):
            return cls.compression_type_map[options.compression_type]
        return cls.compression_type_map[_compression(options)]


def _compression(value) -> int:
    if value is None:
        return TFRecordCompressionType.NONE
    if isinstance(value, TFRecordOptions):
        return value.compression_type
    if isinstance(value, str):
        if value.upper() not in _BY_NAME:
            raise ValueError(f"Unknown TFRecord compression type {value!r}: expected '', 'ZLIB' or 'GZIP'")
        return _BY_NAME[value.upper()]
    if value not in (0, 1, 2):
        raise ValueError(f"Unknown TFRecord compression type {value!r}")
    return int(value)


def open_compressed(path: str, compression, mode: str = "rb"):
    """A binary file object for `path`, (de)compressing GZIP or ZLIB."""
    kind = _compression(compression)
    try:
        raw = open(path, mode)
    except FileNotFoundError:
        raise errors.NotFoundError(None, None, f"{path}; No such file or directory") from None
    if kind == TFRecordCompressionType.GZIP:
        return gzip.GzipFile(fileobj=raw, mode=mode)
    if kind == TFRecordCompressionType.ZLIB:
        if "r" in mode:
            data = zlib.decompress(raw.read())
            raw.close()
            return io.BytesIO(data)
        return _ZlibWriter(raw)
    return raw


class _ZlibWriter:
    def __init__(self, raw):
        self._raw, self._z = raw, zlib.compressobj()

    def write(self, b):
        self._raw.write(self._z.compress(b))

    def flush(self):
        self._raw.write(self._z.flush(zlib.Z_SYNC_FLUSH))
        self._raw.flush()

    def close(self):
        self._raw.write(self._z.flush())
        self._raw.close()


_PACK_U64 = struct.Struct("<Q").pack
_PACK_U32 = struct.Struct("<I").pack
# Record length -> its 12-byte header (length and the length's masked CRC): a writer's records are
# mostly of a few sizes (an event file's scalar summaries: one), so the header costs a dict lookup.
_HEADERS: dict = {}
_MAX_HEADERS = 4096


def encode_record(data: bytes) -> bytes:
    """`data` framed as one TFRecord."""
    n = len(data)
    header = _HEADERS.get(n)
    if header is None:
        length = _PACK_U64(n)
        header = length + _PACK_U32(masked_crc32c(length))
        if len(_HEADERS) < _MAX_HEADERS:
            _HEADERS[n] = header
    return header + data + _PACK_U32(masked_crc32c(data))


def read_records(f, path: str = "<file>"):
    """Yields the records of an open TFRecord file, checking both CRCs.

    Raises:
        DataLossError: a truncated record or a CRC mismatch (naming the file and offset).
    """
    offset = 0
    while True:
        header = f.read(12)
        if not header:
            return
        if len(header) < 12:
            raise errors.DataLossError(None, None, f"truncated record at byte {offset} of {path}")
        n_bytes = header[:8]
        (n,) = struct.unpack("<Q", n_bytes)
        (crc,) = struct.unpack("<I", header[8:])
        if masked_crc32c(n_bytes) != crc:
            raise errors.DataLossError(None, None, f"corrupted record at byte {offset} of {path}: "
                                       "length CRC mismatch")
        body = f.read(n + 4)
        if len(body) < n + 4:
            raise errors.DataLossError(None, None, f"truncated record at byte {offset} of {path}")
        data = body[:n]
        (dcrc,) = struct.unpack("<I", body[n:])
        if masked_crc32c(data) != dcrc:
            raise errors.DataLossError(None, None, f"corrupted record at byte {offset} of {path}: "
                                       "data CRC mismatch")
        offset += 16 + n
        yield data


def tf_record_iterator(path: str, options=None):
    """Yields the records of the TFRecord file at `path` as bytes (TF1's tf_record_iterator)."""
    with open_compressed(path, options, "rb") as f:
        yield from read_records(f, path)


class TFRecordWriter:
    """Writes records to a TFRecord file (TF1's tf.io.TFRecordWriter / tf.python_io)."""

    def __init__(self, path: str, options=None):
        self._path = path
        self._f = open_compressed(path, options, "wb")

    def write(self, record) -> None:
        if isinstance(record, str):
            record = record.encode()
        self._f.write(encode_record(bytes(record)))

    def flush(self) -> None:
        self._f.flush()

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
