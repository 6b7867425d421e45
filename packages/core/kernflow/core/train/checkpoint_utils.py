"""Reading checkpoints outside a graph: `load_checkpoint`, `list_variables`, `load_variable`
(TF's tf.train.load_checkpoint / NewCheckpointReader).

Example::

    reader = load_checkpoint("/tmp/run")                # a directory or a prefix
    reader.get_variable_to_shape_map()                  # {"w": [2, 3], "global_step": []}
    reader.get_tensor("w")                              # numpy array
"""

from __future__ import annotations

import os

from kernflow.core.train import checkpoint_format as _cf
from kernflow.core.train import checkpoint_management as _cm

__all__ = ["CheckpointReader", "NewCheckpointReader", "load_checkpoint", "list_variables",
           "load_variable"]


class CheckpointReader:
    """Reads the tensors of one checkpoint (TF's py_checkpoint_reader.CheckpointReader).

    Raises:
        NotFoundError: if the checkpoint does not exist.
        DataLossError: if its index is corrupted (and, in `get_tensor`, if the data is).
    """

    def __init__(self, filepattern):
        self._reader = _cf.BundleReader(_cm._fspath(filepattern))

    def has_tensor(self, tensor_str) -> bool:
        return tensor_str in self._reader

    def get_tensor(self, tensor_str):
        """The tensor's value as a numpy array. Raises NotFoundError if absent."""
        return self._reader.read(tensor_str)

    def get_variable_to_shape_map(self) -> dict:
        return {k: self._reader.shape(k) for k in self._reader.keys()}

    def get_variable_to_dtype_map(self) -> dict:
        return {k: self._reader.dtype(k) for k in self._reader.keys()}

    def debug_string(self) -> bytes:
        lines = [f"{k} ({self._reader.dtype(k).name}) {self._reader.shape(k)}"
                 for k in self._reader.keys()]
        return ("\n".join(lines) + "\n").encode("utf-8")


def NewCheckpointReader(filepattern):  # noqa: N802 - TF name
    """A `CheckpointReader` of the checkpoint with prefix `filepattern`."""
    return CheckpointReader(filepattern)


def _checkpoint_filename(ckpt_dir_or_file) -> str | None:
    path = _cm._fspath(ckpt_dir_or_file)
    if os.path.isdir(path):
        return _cm.latest_checkpoint(path)
    return path


def load_checkpoint(ckpt_dir_or_file):
    """A `CheckpointReader` for a checkpoint prefix, or the latest checkpoint of a directory.

    Raises:
        ValueError: `ckpt_dir_or_file` is a directory with no checkpoint.
        NotFoundError: the checkpoint does not exist.
    """
    filename = _checkpoint_filename(ckpt_dir_or_file)
    if filename is None:
        raise ValueError(f"Couldn't find 'checkpoint' file or checkpoints in given directory "
                         f"{ckpt_dir_or_file}")
    return CheckpointReader(filename)


def list_variables(ckpt_dir_or_file):
    """Sorted ``(name, shape)`` pairs of every tensor in the checkpoint."""
    reader = load_checkpoint(ckpt_dir_or_file)
    shapes = reader.get_variable_to_shape_map()
    return [(name, shapes[name]) for name in sorted(shapes)]


def load_variable(ckpt_dir_or_file, name):
    """The value of tensor `name` (a trailing ":0" is ignored) in the checkpoint."""
    if name.endswith(":0"):
        name = name[:-2]
    return load_checkpoint(ckpt_dir_or_file).get_tensor(name)
