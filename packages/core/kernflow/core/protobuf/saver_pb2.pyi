from kernflow.core.protobuf import tensor_shape_pb2 as _tensor_shape_pb2
from kernflow.core.protobuf import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SaverDef(_message.Message):
    __slots__ = ("filename_tensor_name", "save_tensor_name", "restore_op_name", "max_to_keep", "sharded", "keep_checkpoint_every_n_hours", "version")
    class CheckpointFormatVersion(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        LEGACY: _ClassVar[SaverDef.CheckpointFormatVersion]
        V1: _ClassVar[SaverDef.CheckpointFormatVersion]
        V2: _ClassVar[SaverDef.CheckpointFormatVersion]
    LEGACY: SaverDef.CheckpointFormatVersion
    V1: SaverDef.CheckpointFormatVersion
    V2: SaverDef.CheckpointFormatVersion
    FILENAME_TENSOR_NAME_FIELD_NUMBER: _ClassVar[int]
    SAVE_TENSOR_NAME_FIELD_NUMBER: _ClassVar[int]
    RESTORE_OP_NAME_FIELD_NUMBER: _ClassVar[int]
    MAX_TO_KEEP_FIELD_NUMBER: _ClassVar[int]
    SHARDED_FIELD_NUMBER: _ClassVar[int]
    KEEP_CHECKPOINT_EVERY_N_HOURS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    filename_tensor_name: str
    save_tensor_name: str
    restore_op_name: str
    max_to_keep: int
    sharded: bool
    keep_checkpoint_every_n_hours: float
    version: SaverDef.CheckpointFormatVersion
    def __init__(self, filename_tensor_name: _Optional[str] = ..., save_tensor_name: _Optional[str] = ..., restore_op_name: _Optional[str] = ..., max_to_keep: _Optional[int] = ..., sharded: _Optional[bool] = ..., keep_checkpoint_every_n_hours: _Optional[float] = ..., version: _Optional[_Union[SaverDef.CheckpointFormatVersion, str]] = ...) -> None: ...

class CheckpointState(_message.Message):
    __slots__ = ("model_checkpoint_path", "all_model_checkpoint_paths", "all_model_checkpoint_timestamps", "last_preserved_timestamp")
    MODEL_CHECKPOINT_PATH_FIELD_NUMBER: _ClassVar[int]
    ALL_MODEL_CHECKPOINT_PATHS_FIELD_NUMBER: _ClassVar[int]
    ALL_MODEL_CHECKPOINT_TIMESTAMPS_FIELD_NUMBER: _ClassVar[int]
    LAST_PRESERVED_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    model_checkpoint_path: str
    all_model_checkpoint_paths: _containers.RepeatedScalarFieldContainer[str]
    all_model_checkpoint_timestamps: _containers.RepeatedScalarFieldContainer[float]
    last_preserved_timestamp: float
    def __init__(self, model_checkpoint_path: _Optional[str] = ..., all_model_checkpoint_paths: _Optional[_Iterable[str]] = ..., all_model_checkpoint_timestamps: _Optional[_Iterable[float]] = ..., last_preserved_timestamp: _Optional[float] = ...) -> None: ...

class BundleHeader(_message.Message):
    __slots__ = ("num_shards", "endianness", "version", "data_file_ids")
    class Endianness(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        LITTLE: _ClassVar[BundleHeader.Endianness]
        BIG: _ClassVar[BundleHeader.Endianness]
    LITTLE: BundleHeader.Endianness
    BIG: BundleHeader.Endianness
    NUM_SHARDS_FIELD_NUMBER: _ClassVar[int]
    ENDIANNESS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    DATA_FILE_IDS_FIELD_NUMBER: _ClassVar[int]
    num_shards: int
    endianness: BundleHeader.Endianness
    version: int
    data_file_ids: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, num_shards: _Optional[int] = ..., endianness: _Optional[_Union[BundleHeader.Endianness, str]] = ..., version: _Optional[int] = ..., data_file_ids: _Optional[_Iterable[bytes]] = ...) -> None: ...

class BundleEntry(_message.Message):
    __slots__ = ("name", "dtype", "shape", "shard_id", "offset", "size", "crc32c")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    SHARD_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    CRC32C_FIELD_NUMBER: _ClassVar[int]
    name: str
    dtype: _types_pb2.DataType
    shape: _tensor_shape_pb2.TensorShapeProto
    shard_id: int
    offset: int
    size: int
    crc32c: int
    def __init__(self, name: _Optional[str] = ..., dtype: _Optional[_Union[_types_pb2.DataType, str]] = ..., shape: _Optional[_Union[_tensor_shape_pb2.TensorShapeProto, _Mapping]] = ..., shard_id: _Optional[int] = ..., offset: _Optional[int] = ..., size: _Optional[int] = ..., crc32c: _Optional[int] = ...) -> None: ...

class BundleIndex(_message.Message):
    __slots__ = ("header", "entries")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    header: BundleHeader
    entries: _containers.RepeatedCompositeFieldContainer[BundleEntry]
    def __init__(self, header: _Optional[_Union[BundleHeader, _Mapping]] = ..., entries: _Optional[_Iterable[_Union[BundleEntry, _Mapping]]] = ...) -> None: ...
