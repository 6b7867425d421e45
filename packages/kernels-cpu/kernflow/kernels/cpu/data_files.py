"""tf.data kernels that read files: the file datasets and the file cache of `Dataset.cache`.

Split from `kernflow.kernels.cpu.data` (which registers them); the same dataset objects. File
names are confined to the process's file root (kernflow.core.runtime.file_root) when one is set.
"""

from __future__ import annotations

import itertools
import os

import numpy as np

from kernflow.core.framework import tensor_codec
from kernflow.core.runtime import file_root
from kernflow.kernels.cpu.data import _Gen, _err, _scalar, _str

__all__ = ["text_line_dataset", "tfrecord_dataset", "fixed_length_dataset", "cache_path", "write_cache",
           "read_cache"]


def _file_names(ctx, filenames) -> list:
    arr = np.asarray(filenames, dtype=object)
    if arr.ndim > 1:
        raise _err(ctx.name, f"filenames must be a scalar or a vector, got shape {list(arr.shape)}")
    names = [f.decode() if isinstance(f, bytes) else str(f) for f in arr.ravel()]
    return file_root.check_all(f"{ctx.op_type} {ctx.name}", names, write=False)


def _lines(f, name):
    for line in f:
        yield line.rstrip(b"\n").rstrip(b"\r")


def _records(f, name):
    from kernflow.core.data.tfrecord import read_records
    return read_records(f, name)


def _record_file_dataset(read):
    """A kernel for ``(filenames, compression_type, buffer_size)`` datasets of string records:
    ``read(open file, name)`` yields a file's records."""
    def factory(ctx):
        from kernflow.core.data.tfrecord import open_compressed
        node, types, shapes = ctx.name, ctx.get_attr("output_types"), ctx.get_attr("output_shapes")

        def compute(filenames, compression, buffer_size):
            names, comp = _file_names(ctx, filenames), _str(compression)

            def gen():
                for name in names:
                    with open_compressed(name, comp) as f:
                        for rec in read(f, name):
                            yield [np.asarray(rec, dtype=object)]
            return _Gen(node, types, shapes, gen)
        return compute
    return factory


text_line_dataset = _record_file_dataset(_lines)
tfrecord_dataset = _record_file_dataset(_records)


def fixed_length_dataset(ctx):
    from kernflow.core.data.tfrecord import open_compressed
    node, types, shapes = ctx.name, ctx.get_attr("output_types"), ctx.get_attr("output_shapes")

    def compute(filenames, header, record, footer, buffer_size, compression):
        names = _file_names(ctx, filenames)
        header, record, footer, comp = _scalar(header), _scalar(record), _scalar(footer), _str(compression)
        if record <= 0:
            raise _err(node, f"record_bytes must be > 0, got {record}")

        def gen():
            for name in names:
                with open_compressed(name, comp) as f:
                    data = f.read()
                body = data[header:len(data) - footer]
                for i in range(len(body) // record):
                    yield [np.asarray(body[i * record:(i + 1) * record], dtype=object)]
        return _Gen(node, types, shapes, gen)
    return compute


def cache_path(node: str, filename) -> str:
    """The file prefix of a `Dataset.cache(filename)` ("" for a cache in memory), under the root."""
    path = _str(filename)
    return file_root.check(f"CacheDataset {node}", path, write=True) if path else path


def write_cache(path: str, elements) -> None:
    """Writes a cache file: TFRecord of TensorProtos, one per component; the ``.index`` file last."""
    from kernflow.core.data.tfrecord import TFRecordWriter
    tmp = f"{path}.data.tmp{os.getpid()}"
    with TFRecordWriter(tmp) as w:
        for el in elements:
            for c in el:
                w.write(tensor_codec.serialize_tensor(np.asarray(c)))
    os.replace(tmp, path + ".data")
    with open(path + ".index", "w") as f:
        f.write(f"{len(elements)}\n")


def read_cache(path: str, types):
    from kernflow.core.data.tfrecord import tf_record_iterator
    recs = tf_record_iterator(path + ".data")
    k = len(types)
    while True:
        el = [tensor_codec.parse_tensor(rec) for rec in itertools.islice(recs, k)]
        if not el:
            return
        yield el


