"""Partitioned variables (TF1 `tf.compat.v1.PartitionedVariable` and its partitioners).

A variable too large for one ps task is made of *parts*: ordinary `kf.Variable`s named
``<name>/part_<i>`` that split the full shape along one axis, the first ``dim % n`` parts one row
longer than the rest (TF's split). Each part carries a `SaveSliceInfo` (``part._save_slice_info``)
naming the full variable and where the part sits in it, so a `Saver` writes the parts as one
logical tensor and can restore them into any other partitioning (see docs/checkpoint_format.md).

A partitioner is ``fn(shape=TensorShape, dtype=DType) -> list`` giving the number of parts along
each axis; at most one entry may exceed 1.
"""

from __future__ import annotations

import math

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts

__all__ = ["PartitionedVariable", "SaveSliceInfo", "PartitionInfo", "fixed_size_partitioner",
           "variable_axis_size_partitioner", "min_max_variable_partitioner",
           "create_partitioned_variables", "iter_slices", "slice_spec"]


def slice_spec(full_shape, var_offset, var_shape) -> str:
    """TF's checkpoint slice spec: "<full dims> <offset>,<length>:..." ("-" for a whole axis)."""
    dims = " ".join(str(int(d)) for d in full_shape)
    parts = ["-" if (o == 0 and s == f) else f"{int(o)},{int(s)}"
             for f, o, s in zip(full_shape, var_offset, var_shape)]
    return f"{dims} {':'.join(parts)}"


class SaveSliceInfo:
    """Where one part sits in its full variable (TF's `Variable.SaveSliceInfo`).

    Args:
        full_name: the full variable's name, the checkpoint key of the whole tensor.
        full_shape: the full variable's shape (list of ints).
        var_offset: the part's offset in each dimension.
        var_shape: the part's shape.
    """

    def __init__(self, full_name=None, full_shape=None, var_offset=None, var_shape=None):
        self.full_name = full_name
        self.full_shape = list(full_shape)
        self.var_offset = list(var_offset)
        self.var_shape = list(var_shape)

    @property
    def spec(self) -> str:
        """The slice spec of the part, e.g. "10 4 0,4:-"."""
        return slice_spec(self.full_shape, self.var_offset, self.var_shape)

    def __repr__(self):
        return (f"SaveSliceInfo({self.full_name!r}, full_shape={self.full_shape}, "
                f"var_offset={self.var_offset}, var_shape={self.var_shape})")


class PartitionInfo:
    """What an initializer is told about the part it initializes (TF's `_PartitionInfo`).

    Args:
        full_shape: the full variable's shape.
        var_offset: the part's offset in each dimension.

    Raises:
        TypeError: the arguments are not sequences of ints.
        ValueError: their lengths differ or an offset lies outside the full shape.
    """

    def __init__(self, full_shape, var_offset):
        if not isinstance(full_shape, (list, tuple)) or not isinstance(var_offset, (list, tuple)):
            raise TypeError(f"full_shape and var_offset must be lists, got {full_shape!r} and "
                            f"{var_offset!r}")
        if len(full_shape) != len(var_offset):
            raise ValueError(f"Expected equal length, but full_shape {full_shape} and var_offset "
                             f"{var_offset} differ.")
        for i, (f, o) in enumerate(zip(full_shape, var_offset)):
            if o < 0 or o >= max(f, 1):
                raise ValueError(f"Expected 0 <= var_offset[{i}] < full_shape[{i}], got offset "
                                 f"{o} for dimension {f}")
        self.full_shape = list(full_shape)
        self.var_offset = list(var_offset)

    @property
    def single_offset(self) -> int:
        return self.var_offset[self.single_slice_dim]

    @property
    def single_slice_dim(self) -> int:
        """The axis the variable is split along (0 for an unsplit variable)."""
        dims = [i for i, o in enumerate(self.var_offset) if o != 0]
        return dims[0] if dims else 0

    def __repr__(self):
        return f"PartitionInfo(full_shape={self.full_shape}, var_offset={self.var_offset})"


# ---------------------------------------------------------------------------- partitioners
def _axis_dim(shape, axis) -> int:
    shape = _ts.as_shape(shape)
    if shape.rank is None or axis >= shape.rank:
        raise ValueError(f"Can not partition variable along axis {axis} when shape is only {shape}")
    d = _ts.dimension_value(shape[axis])
    if d is None:
        raise ValueError(f"shape is not fully defined: {shape}")
    return d


def _element_size(dtype, bytes_per_string_element) -> int:
    dtype = _dtypes.as_dtype(dtype).base_dtype
    return bytes_per_string_element if dtype == _dtypes.string else dtype.size


def fixed_size_partitioner(num_shards, axis=0):
    """A partitioner that splits `axis` into `num_shards` parts (fewer if the axis is shorter).

    Args:
        num_shards: the number of parts.
        axis: the axis to split.

    Returns:
        ``fn(shape, **kwargs) -> [1, ..., min(num_shards, shape[axis]), ..., 1]``.
    """
    def _partitioner(shape, **unused_args):
        partitions = [1] * len(_ts.as_shape(shape))
        partitions[axis] = min(num_shards, _axis_dim(shape, axis))
        return partitions
    return _partitioner


def variable_axis_size_partitioner(max_shard_bytes, axis=0, bytes_per_string_element=16,
                                   max_shards=None):
    """A partitioner that keeps each part under `max_shard_bytes` (whole rows of `axis`).

    Args:
        max_shard_bytes: the most bytes per part (a single row may exceed it).
        axis: the axis to split.
        bytes_per_string_element: the assumed size of one string element.
        max_shards: at most this many parts.

    Raises:
        ValueError: a non-positive byte count or `max_shards`.
    """
    if max_shard_bytes < 1 or bytes_per_string_element < 1:
        raise ValueError(f"Both max_shard_bytes and bytes_per_string_element must be positive. "
                         f"Currently, max_shard_bytes is {max_shard_bytes} and "
                         f"bytes_per_string_element is {bytes_per_string_element}")
    if max_shards is not None and max_shards < 1:
        raise ValueError("max_shards must be positive.")

    def _partitioner(shape, dtype):
        shape = _ts.as_shape(shape)
        if not shape.is_fully_defined():
            raise ValueError(f"shape is not fully defined: {shape}")
        if not isinstance(dtype, _dtypes.DType):
            raise ValueError(f"dtype is not a DType: {dtype}")
        rows = _axis_dim(shape, axis)
        partitions = [1] * shape.rank
        bytes_per_slice = shape.num_elements() / max(rows, 1) * _element_size(
            dtype, bytes_per_string_element)
        slices_per_shard = max(1, math.floor(max_shard_bytes / max(bytes_per_slice, 1e-300)))
        axis_shards = int(math.ceil(rows / slices_per_shard))
        if max_shards:
            axis_shards = min(max_shards, axis_shards)
        partitions[axis] = max(axis_shards, 1)
        return partitions
    return _partitioner


def min_max_variable_partitioner(max_partitions=1, axis=0, min_slice_size=256 << 10,
                                 bytes_per_string_element=16):
    """A partitioner that makes parts of at least `min_slice_size` bytes, at most `max_partitions`.

    Args:
        max_partitions: the most parts.
        axis: the axis to split.
        min_slice_size: the fewest bytes per part (the last one may be smaller).
        bytes_per_string_element: the assumed size of one string element.
    """
    def _partitioner(shape, dtype):
        shape = _ts.as_shape(shape)
        rows = _axis_dim(shape, axis)
        total = shape.num_elements() * _element_size(dtype, bytes_per_string_element)
        partitions = [1] * shape.rank
        partitions[axis] = max(1, min(rows, max_partitions, int(math.ceil(total / min_slice_size))))
        return partitions
    return _partitioner


# ---------------------------------------------------------------------------- layout
def check_partitions(partitions, shape, name=""):
    """Validates a partitioner's result for `shape`; returns (slice_dim, num_slices).

    Raises:
        ValueError: not a list of the variable's rank, a count below 1, more than one split
            axis, or more parts than rows.
    """
    shape = _ts.as_shape(shape)
    if not isinstance(partitions, (list, tuple)):
        raise ValueError(f"Partitioner must return a sequence, but saw: {partitions}")
    partitions = [int(p) for p in partitions]
    if len(partitions) != shape.rank:
        raise ValueError(f"Partitioner returned a partition list that does not match the "
                         f"Variable's rank: {partitions} vs. {shape}")
    if any(p < 1 for p in partitions):
        raise ValueError(f"Partitioner returned zero partitions for some axes: {partitions}")
    split = [i for i, p in enumerate(partitions) if p > 1]
    if len(split) > 1:
        raise ValueError(f"Can only slice a variable along one dimension: shape: {shape}, "
                         f"partitioning: {partitions}")
    dim = split[0] if split else 0
    n = partitions[dim]
    size = shape.as_list()[dim]
    if n > size:
        raise ValueError(f"Cannot create {n} slices for size {size} of variable {name}. shape: "
                         f"{shape}, partitioning: {partitions}")
    return dim, n


def iter_slices(full_shape, num_slices, slice_dim):
    """Yields (offset, shape) of each part: the first ``dim % n`` parts get one extra row."""
    full_shape = list(full_shape)
    extra = full_shape[slice_dim] % num_slices
    base = full_shape[slice_dim] // num_slices
    offset = [0] * len(full_shape)
    for i in range(num_slices):
        shape = list(full_shape)
        shape[slice_dim] = base + (1 if i < extra else 0)
        yield list(offset), shape
        offset[slice_dim] += shape[slice_dim]


# ---------------------------------------------------------------------------- PartitionedVariable
class PartitionedVariable:
    """A variable stored as parts (TF1 `PartitionedVariable`); iterating yields the parts.

    Args:
        name: the full variable's name (the parts are "<name>/part_<i>").
        shape: the full shape.
        dtype: the element type.
        variable_list: the parts, in offset order, each with a `_save_slice_info`.
        partitions: the partitioner's result (parts per axis).

    Raises:
        ValueError: the parts are missing, or their slice infos do not describe this variable.
    """

    def __init__(self, name, shape, dtype, variable_list, partitions):
        if not isinstance(variable_list, (list, tuple)) or not variable_list:
            raise ValueError(f"variable_list is not a non-empty list: {variable_list!r}")
        if not isinstance(partitions, (list, tuple)):
            raise TypeError(f"partitions is not a list or tuple: {partitions!r}")
        for v in variable_list:
            info = getattr(v, "_save_slice_info", None)
            if info is None:
                raise ValueError(f"All variables must have a save_slice_info available: {v.name}")
            if list(info.full_shape) != _ts.as_shape(shape).as_list() or info.full_name != name:
                raise ValueError(f"All variables' full shapes and names must match shape "
                                 f"{shape} and name {name}; {v.name} has {info}")
        self._variable_list = sorted(variable_list, key=lambda v: v._save_slice_info.var_offset)
        self._name = name
        self._shape = _ts.as_shape(shape)
        self._dtype = _dtypes.as_dtype(dtype)
        self._partitions = list(partitions)
        self._as_tensor = None

    def __iter__(self):
        return iter(self._variable_list)

    def __len__(self):
        n = 1
        for p in self._partitions:
            n *= p
        if n != len(self._variable_list):
            raise ValueError(f"Partitioned variable {self._name} has {len(self._variable_list)} "
                             f"parts but its partitions {self._partitions} imply {n}")
        return n

    def _partition_axes(self):
        axes = [i for i, p in enumerate(self._partitions) if p > 1]
        return axes or [0]

    def _concat(self):
        """The parts concatenated along the split axis (one ConcatV2, on the first part's task)."""
        from kernflow.core.ops import array_ops
        if len(self._variable_list) == 1:
            with _ops.name_scope(None):
                return array_ops.identity(self._variable_list[0], name=self._name)
        axis = self._partition_axes()[0]
        with _ops.name_scope(self._name + "/ConcatPartitions/"):
            values = [v.value() for v in self._variable_list]
            with _ops.colocate_with(self._variable_list[0]):
                return array_ops.concat(values, axis, name="concat")

    def as_tensor(self):
        """The full value, concatenated from the parts (outside any control dependencies)."""
        with _ops.control_dependencies(None):
            return self._concat()

    def _get_variable_list(self):
        return self._variable_list

    def _get_partitions(self):
        return self._partitions

    @property
    def name(self):
        return self._name

    @property
    def dtype(self):
        return self._dtype

    @property
    def shape(self):
        return self._shape

    def get_shape(self):
        return self._shape

    @property
    def graph(self):
        return self._variable_list[0].graph

    @property
    def op(self):
        """Like TF, a PartitionedVariable has no single op: this is the first part's."""
        return self._variable_list[0].op

    def assign(self, value, use_locking=False, name=None, read_value=True):
        """Assigns `value` (of the full shape) by splitting it over the parts; returns a group op."""
        from kernflow.core.ops import array_ops, control_flow_ops
        value = _ops.convert_to_tensor(value, dtype=self._dtype)
        axis = self._partition_axes()[0]
        sizes = [v._save_slice_info.var_shape[axis] for v in self._variable_list]
        pieces = [value] if len(sizes) == 1 else array_ops.split(value, sizes, axis=axis)
        ops = [v.assign(p, use_locking=use_locking, read_value=False)
               for v, p in zip(self._variable_list, pieces)]
        return control_flow_ops.group(*ops, name=name or self._name.split("/")[-1] + "_assign")

    def __repr__(self):
        return (f"<kf.PartitionedVariable '{self._name}' shape={self._shape} "
                f"dtype={self._dtype.name} parts={len(self._variable_list)}>")


def _conversion(v, dtype=None, name=None, as_ref=False):
    del name
    if as_ref:
        raise ValueError(f"Reference conversion of PartitionedVariable {v.name} is not allowed")
    if dtype is not None and not dtype.is_compatible_with(v.dtype):
        raise ValueError(f"Incompatible type conversion requested to type '{dtype.name}' for "
                         f"PartitionedVariable of type '{v.dtype.name}'")
    return v.as_tensor()


_ops.register_tensor_conversion_function(PartitionedVariable, _conversion)


def create_partitioned_variables(shape, slicing, initializer, dtype=_dtypes.float32, trainable=True,
                                 collections=None, name=None, reuse=None):
    """Creates the parts of a partitioned variable; returns them as a list (TF1's function).

    Args:
        shape: the full shape.
        slicing: parts per axis (one entry may exceed 1).
        initializer: an initializer, a Tensor or a value of the full shape.
        dtype: element type.
        trainable, collections: as for `get_variable`.
        name: the variable scope (and full name); default "PartitionedVariable".
        reuse: reuse existing parts.

    Raises:
        ValueError: `shape` and `slicing` differ in length, or `shape` is a scalar.
    """
    from kernflow.core.ops import variable_scope as vs
    if len(shape) != len(slicing):
        raise ValueError(f"The 'shape' and 'slicing' of a partitioned Variable must have the "
                         f"length: shape: {shape}, slicing: {slicing}")
    if len(shape) < 1:
        raise ValueError(f"A partitioned Variable must have rank at least 1: shape: {shape}")
    with vs.variable_scope(name, "PartitionedVariable", reuse=reuse) as scope:
        store = vs._get_default_variable_store()
        pv = store._get_partitioned_variable(
            scope.name, partitioner=lambda **_: list(slicing), shape=shape, dtype=dtype,
            initializer=initializer, trainable=trainable, collections=collections,
            reuse=scope.reuse)
    return list(pv)
