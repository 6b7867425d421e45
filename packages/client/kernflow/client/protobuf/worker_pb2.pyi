from kernflow.core.protobuf import config_pb2 as _config_pb2
from kernflow.core.protobuf import cost_graph_pb2 as _cost_graph_pb2
from kernflow.core.protobuf import graph_pb2 as _graph_pb2
from kernflow.core.protobuf import step_stats_pb2 as _step_stats_pb2
from kernflow.core.protobuf import tensor_pb2 as _tensor_pb2
from kernflow.core.protobuf import tensor_shape_pb2 as _tensor_shape_pb2
from kernflow.core.protobuf import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DeviceAttributes(_message.Message):
    __slots__ = ("name", "device_type", "memory_limit", "incarnation")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DEVICE_TYPE_FIELD_NUMBER: _ClassVar[int]
    MEMORY_LIMIT_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    name: str
    device_type: str
    memory_limit: int
    incarnation: int
    def __init__(self, name: _Optional[str] = ..., device_type: _Optional[str] = ..., memory_limit: _Optional[int] = ..., incarnation: _Optional[int] = ...) -> None: ...

class NamedTensor(_message.Message):
    __slots__ = ("name", "tensor")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TENSOR_FIELD_NUMBER: _ClassVar[int]
    name: str
    tensor: _tensor_pb2.TensorProto
    def __init__(self, name: _Optional[str] = ..., tensor: _Optional[_Union[_tensor_pb2.TensorProto, _Mapping]] = ...) -> None: ...

class GetStatusRequest(_message.Message):
    __slots__ = ("transport_probes", "list_kernels", "kernels_digest")
    class TransportProbesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: bytes
        def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ...) -> None: ...
    TRANSPORT_PROBES_FIELD_NUMBER: _ClassVar[int]
    LIST_KERNELS_FIELD_NUMBER: _ClassVar[int]
    KERNELS_DIGEST_FIELD_NUMBER: _ClassVar[int]
    transport_probes: _containers.ScalarMap[str, bytes]
    list_kernels: bool
    kernels_digest: str
    def __init__(self, transport_probes: _Optional[_Mapping[str, bytes]] = ..., list_kernels: _Optional[bool] = ..., kernels_digest: _Optional[str] = ...) -> None: ...

class TransportOffer(_message.Message):
    __slots__ = ("name", "params")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    name: str
    params: bytes
    def __init__(self, name: _Optional[str] = ..., params: _Optional[bytes] = ...) -> None: ...

class GetStatusResponse(_message.Message):
    __slots__ = ("device_attributes", "job", "task", "recv_tensor_bytes_served", "recv_tensor_calls_served", "graph_runs", "graph_runs_failed", "last_error", "last_error_time_ms", "start_time_ms", "protocol_version", "host_id", "transports", "local_channel", "kernels", "kernels_digest", "pushed_bytes_received", "pushed_tensors_received")
    DEVICE_ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    RECV_TENSOR_BYTES_SERVED_FIELD_NUMBER: _ClassVar[int]
    RECV_TENSOR_CALLS_SERVED_FIELD_NUMBER: _ClassVar[int]
    GRAPH_RUNS_FIELD_NUMBER: _ClassVar[int]
    GRAPH_RUNS_FAILED_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    START_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    HOST_ID_FIELD_NUMBER: _ClassVar[int]
    TRANSPORTS_FIELD_NUMBER: _ClassVar[int]
    LOCAL_CHANNEL_FIELD_NUMBER: _ClassVar[int]
    KERNELS_FIELD_NUMBER: _ClassVar[int]
    KERNELS_DIGEST_FIELD_NUMBER: _ClassVar[int]
    PUSHED_BYTES_RECEIVED_FIELD_NUMBER: _ClassVar[int]
    PUSHED_TENSORS_RECEIVED_FIELD_NUMBER: _ClassVar[int]
    device_attributes: _containers.RepeatedCompositeFieldContainer[DeviceAttributes]
    job: str
    task: int
    recv_tensor_bytes_served: int
    recv_tensor_calls_served: int
    graph_runs: int
    graph_runs_failed: int
    last_error: str
    last_error_time_ms: int
    start_time_ms: int
    protocol_version: int
    host_id: str
    transports: _containers.RepeatedCompositeFieldContainer[TransportOffer]
    local_channel: LocalChannelOffer
    kernels: _containers.RepeatedCompositeFieldContainer[KernelList]
    kernels_digest: str
    pushed_bytes_received: int
    pushed_tensors_received: int
    def __init__(self, device_attributes: _Optional[_Iterable[_Union[DeviceAttributes, _Mapping]]] = ..., job: _Optional[str] = ..., task: _Optional[int] = ..., recv_tensor_bytes_served: _Optional[int] = ..., recv_tensor_calls_served: _Optional[int] = ..., graph_runs: _Optional[int] = ..., graph_runs_failed: _Optional[int] = ..., last_error: _Optional[str] = ..., last_error_time_ms: _Optional[int] = ..., start_time_ms: _Optional[int] = ..., protocol_version: _Optional[int] = ..., host_id: _Optional[str] = ..., transports: _Optional[_Iterable[_Union[TransportOffer, _Mapping]]] = ..., local_channel: _Optional[_Union[LocalChannelOffer, _Mapping]] = ..., kernels: _Optional[_Iterable[_Union[KernelList, _Mapping]]] = ..., kernels_digest: _Optional[str] = ..., pushed_bytes_received: _Optional[int] = ..., pushed_tensors_received: _Optional[int] = ...) -> None: ...

class KernelList(_message.Message):
    __slots__ = ("device_type", "op_types", "constrained")
    DEVICE_TYPE_FIELD_NUMBER: _ClassVar[int]
    OP_TYPES_FIELD_NUMBER: _ClassVar[int]
    CONSTRAINED_FIELD_NUMBER: _ClassVar[int]
    device_type: str
    op_types: _containers.RepeatedScalarFieldContainer[str]
    constrained: _containers.RepeatedCompositeFieldContainer[ConstrainedKernel]
    def __init__(self, device_type: _Optional[str] = ..., op_types: _Optional[_Iterable[str]] = ..., constrained: _Optional[_Iterable[_Union[ConstrainedKernel, _Mapping]]] = ...) -> None: ...

class ConstrainedKernel(_message.Message):
    __slots__ = ("op_type", "constraints")
    OP_TYPE_FIELD_NUMBER: _ClassVar[int]
    CONSTRAINTS_FIELD_NUMBER: _ClassVar[int]
    op_type: str
    constraints: _containers.RepeatedCompositeFieldContainer[KernelConstraint]
    def __init__(self, op_type: _Optional[str] = ..., constraints: _Optional[_Iterable[_Union[KernelConstraint, _Mapping]]] = ...) -> None: ...

class KernelConstraint(_message.Message):
    __slots__ = ("attr", "allowed")
    ATTR_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_FIELD_NUMBER: _ClassVar[int]
    attr: str
    allowed: _containers.RepeatedScalarFieldContainer[_types_pb2.DataType]
    def __init__(self, attr: _Optional[str] = ..., allowed: _Optional[_Iterable[_Union[_types_pb2.DataType, str]]] = ...) -> None: ...

class LocalChannelOffer(_message.Message):
    __slots__ = ("path", "token")
    PATH_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    path: str
    token: bytes
    def __init__(self, path: _Optional[str] = ..., token: _Optional[bytes] = ...) -> None: ...

class LocalFrame(_message.Message):
    __slots__ = ("call_id", "kind", "method", "timeout_s", "metadata", "code", "details", "handler_error", "oneway")
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        REQUEST: _ClassVar[LocalFrame.Kind]
        MESSAGE: _ClassVar[LocalFrame.Kind]
        END: _ClassVar[LocalFrame.Kind]
        CANCEL: _ClassVar[LocalFrame.Kind]
        HELLO: _ClassVar[LocalFrame.Kind]
    REQUEST: LocalFrame.Kind
    MESSAGE: LocalFrame.Kind
    END: LocalFrame.Kind
    CANCEL: LocalFrame.Kind
    HELLO: LocalFrame.Kind
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    HANDLER_ERROR_FIELD_NUMBER: _ClassVar[int]
    ONEWAY_FIELD_NUMBER: _ClassVar[int]
    call_id: int
    kind: LocalFrame.Kind
    method: str
    timeout_s: float
    metadata: _containers.ScalarMap[str, str]
    code: int
    details: str
    handler_error: bool
    oneway: bool
    def __init__(self, call_id: _Optional[int] = ..., kind: _Optional[_Union[LocalFrame.Kind, str]] = ..., method: _Optional[str] = ..., timeout_s: _Optional[float] = ..., metadata: _Optional[_Mapping[str, str]] = ..., code: _Optional[int] = ..., details: _Optional[str] = ..., handler_error: _Optional[bool] = ..., oneway: _Optional[bool] = ...) -> None: ...

class RegisterGraphRequest(_message.Message):
    __slots__ = ("session_handle", "graph_def", "config")
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    GRAPH_DEF_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    session_handle: str
    graph_def: _graph_pb2.GraphDef
    config: _config_pb2.ConfigProto
    def __init__(self, session_handle: _Optional[str] = ..., graph_def: _Optional[_Union[_graph_pb2.GraphDef, _Mapping]] = ..., config: _Optional[_Union[_config_pb2.ConfigProto, _Mapping]] = ...) -> None: ...

class RegisterGraphResponse(_message.Message):
    __slots__ = ("graph_handle",)
    GRAPH_HANDLE_FIELD_NUMBER: _ClassVar[int]
    graph_handle: str
    def __init__(self, graph_handle: _Optional[str] = ...) -> None: ...

class DeregisterGraphRequest(_message.Message):
    __slots__ = ("session_handle", "graph_handle")
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    GRAPH_HANDLE_FIELD_NUMBER: _ClassVar[int]
    session_handle: str
    graph_handle: str
    def __init__(self, session_handle: _Optional[str] = ..., graph_handle: _Optional[str] = ...) -> None: ...

class DeregisterGraphResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RunGraphRequest(_message.Message):
    __slots__ = ("session_handle", "graph_handle", "step_id", "send", "recv_key", "collect_stats", "timeout_in_ms")
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    GRAPH_HANDLE_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    SEND_FIELD_NUMBER: _ClassVar[int]
    RECV_KEY_FIELD_NUMBER: _ClassVar[int]
    COLLECT_STATS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_IN_MS_FIELD_NUMBER: _ClassVar[int]
    session_handle: str
    graph_handle: str
    step_id: int
    send: _containers.RepeatedCompositeFieldContainer[NamedTensor]
    recv_key: _containers.RepeatedScalarFieldContainer[str]
    collect_stats: bool
    timeout_in_ms: int
    def __init__(self, session_handle: _Optional[str] = ..., graph_handle: _Optional[str] = ..., step_id: _Optional[int] = ..., send: _Optional[_Iterable[_Union[NamedTensor, _Mapping]]] = ..., recv_key: _Optional[_Iterable[str]] = ..., collect_stats: _Optional[bool] = ..., timeout_in_ms: _Optional[int] = ...) -> None: ...

class RunGraphResponse(_message.Message):
    __slots__ = ("recv", "step_stats", "status_code", "status_error_message", "cost_graph", "not_inline")
    RECV_FIELD_NUMBER: _ClassVar[int]
    STEP_STATS_FIELD_NUMBER: _ClassVar[int]
    STATUS_CODE_FIELD_NUMBER: _ClassVar[int]
    STATUS_ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    COST_GRAPH_FIELD_NUMBER: _ClassVar[int]
    NOT_INLINE_FIELD_NUMBER: _ClassVar[int]
    recv: _containers.RepeatedCompositeFieldContainer[NamedTensor]
    step_stats: _step_stats_pb2.StepStats
    status_code: int
    status_error_message: str
    cost_graph: _cost_graph_pb2.CostGraphDef
    not_inline: bool
    def __init__(self, recv: _Optional[_Iterable[_Union[NamedTensor, _Mapping]]] = ..., step_stats: _Optional[_Union[_step_stats_pb2.StepStats, _Mapping]] = ..., status_code: _Optional[int] = ..., status_error_message: _Optional[str] = ..., cost_graph: _Optional[_Union[_cost_graph_pb2.CostGraphDef, _Mapping]] = ..., not_inline: _Optional[bool] = ...) -> None: ...

class RecvTensorRequest(_message.Message):
    __slots__ = ("step_id", "rendezvous_key", "transport", "transport_request", "more_rendezvous_keys")
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    RENDEZVOUS_KEY_FIELD_NUMBER: _ClassVar[int]
    TRANSPORT_FIELD_NUMBER: _ClassVar[int]
    TRANSPORT_REQUEST_FIELD_NUMBER: _ClassVar[int]
    MORE_RENDEZVOUS_KEYS_FIELD_NUMBER: _ClassVar[int]
    step_id: int
    rendezvous_key: str
    transport: str
    transport_request: bytes
    more_rendezvous_keys: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, step_id: _Optional[int] = ..., rendezvous_key: _Optional[str] = ..., transport: _Optional[str] = ..., transport_request: _Optional[bytes] = ..., more_rendezvous_keys: _Optional[_Iterable[str]] = ...) -> None: ...

class RecvTensorResponse(_message.Message):
    __slots__ = ("dtype", "shape", "content", "is_dead", "total_bytes", "string_val", "transport_payload", "key_number")
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    IS_DEAD_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    STRING_VAL_FIELD_NUMBER: _ClassVar[int]
    TRANSPORT_PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    KEY_NUMBER_FIELD_NUMBER: _ClassVar[int]
    dtype: _types_pb2.DataType
    shape: _tensor_shape_pb2.TensorShapeProto
    content: bytes
    is_dead: bool
    total_bytes: int
    string_val: _containers.RepeatedScalarFieldContainer[bytes]
    transport_payload: bytes
    key_number: int
    def __init__(self, dtype: _Optional[_Union[_types_pb2.DataType, str]] = ..., shape: _Optional[_Union[_tensor_shape_pb2.TensorShapeProto, _Mapping]] = ..., content: _Optional[bytes] = ..., is_dead: _Optional[bool] = ..., total_bytes: _Optional[int] = ..., string_val: _Optional[_Iterable[bytes]] = ..., transport_payload: _Optional[bytes] = ..., key_number: _Optional[int] = ...) -> None: ...

class PushedTensor(_message.Message):
    __slots__ = ("rendezvous_key", "value", "pull")
    RENDEZVOUS_KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    PULL_FIELD_NUMBER: _ClassVar[int]
    rendezvous_key: str
    value: bytes
    pull: bool
    def __init__(self, rendezvous_key: _Optional[str] = ..., value: _Optional[bytes] = ..., pull: _Optional[bool] = ...) -> None: ...

class PushTensorsRequest(_message.Message):
    __slots__ = ("step_id", "tensors", "abort_code", "abort_message")
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    TENSORS_FIELD_NUMBER: _ClassVar[int]
    ABORT_CODE_FIELD_NUMBER: _ClassVar[int]
    ABORT_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    step_id: int
    tensors: _containers.RepeatedCompositeFieldContainer[PushedTensor]
    abort_code: int
    abort_message: str
    def __init__(self, step_id: _Optional[int] = ..., tensors: _Optional[_Iterable[_Union[PushedTensor, _Mapping]]] = ..., abort_code: _Optional[int] = ..., abort_message: _Optional[str] = ...) -> None: ...

class PushTensorsResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ShmOffer(_message.Message):
    __slots__ = ("probe_answer", "uid")
    PROBE_ANSWER_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    probe_answer: str
    uid: int
    def __init__(self, probe_answer: _Optional[str] = ..., uid: _Optional[int] = ...) -> None: ...

class ShmRecvRequest(_message.Message):
    __slots__ = ("segment",)
    SEGMENT_FIELD_NUMBER: _ClassVar[int]
    segment: str
    def __init__(self, segment: _Optional[str] = ...) -> None: ...

class ShmTensor(_message.Message):
    __slots__ = ("dtype", "shape", "segment", "size")
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    SEGMENT_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    dtype: _types_pb2.DataType
    shape: _tensor_shape_pb2.TensorShapeProto
    segment: str
    size: int
    def __init__(self, dtype: _Optional[_Union[_types_pb2.DataType, str]] = ..., shape: _Optional[_Union[_tensor_shape_pb2.TensorShapeProto, _Mapping]] = ..., segment: _Optional[str] = ..., size: _Optional[int] = ...) -> None: ...

class ShmProgress(_message.Message):
    __slots__ = ("written",)
    WRITTEN_FIELD_NUMBER: _ClassVar[int]
    written: int
    def __init__(self, written: _Optional[int] = ...) -> None: ...

class CleanupGraphRequest(_message.Message):
    __slots__ = ("step_id",)
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    step_id: int
    def __init__(self, step_id: _Optional[int] = ...) -> None: ...

class CleanupGraphResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AbortStepRequest(_message.Message):
    __slots__ = ("step_id", "code", "message")
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    step_id: int
    code: int
    message: str
    def __init__(self, step_id: _Optional[int] = ..., code: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class AbortStepResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CleanupAllRequest(_message.Message):
    __slots__ = ("container",)
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    container: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, container: _Optional[_Iterable[str]] = ...) -> None: ...

class CleanupAllResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
