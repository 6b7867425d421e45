"""`LocalMasterClient`: a `Master` called in process with `GrpcMasterClient`'s interface.

`kernflow.client.local_master` hands it to sessions of the same process that target the master's
own server. Requests and responses are the same protobuf messages as over gRPC, errors the same TF
error classes (an exception that is not an `OpError` becomes the class its gRPC status would have
been: `rpc_errors.status_for_exception`'s rules), and the caller's trace context is already
current, so a step's spans nest exactly as over the wire.
"""

from __future__ import annotations

from kernflow.core.framework import errors
from kernflow.client import rpc_errors

__all__ = ["LocalMasterClient"]


def _as_op_error(e: Exception, what: str) -> errors.OpError:
    if isinstance(e, errors.OpError):
        return e
    status, details = rpc_errors.status_for_exception(e)
    cls = errors.exception_type_from_error_code(status.value[0])
    return cls(None, None, f"{what}: {details}")


class LocalMasterClient:
    """Calls `master` (a `kernflow.master.master.Master`) directly.

    Args:
        master: the master.
        address: its server's "host:port" (for error messages).
    """

    in_process = True

    def __init__(self, master, address: str):
        self._master = master
        self.address = address

    def __repr__(self):
        return f"LocalMasterClient({self.address!r})"

    def _call(self, what: str, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - re-raised as the TF error gRPC would have given
            err = _as_op_error(e, f"{what} on master at {self.address} (in process)")
            if err is e:
                raise
            raise err from e

    def create_session(self, request, timeout=None):
        return self._call("CreateSession", self._master.create_session, request, deadline_s=timeout,
                          cancelled=lambda: False)

    def extend_session(self, request, timeout=None):
        return self._call("ExtendSession", self._master.extend_session, request)

    def run_step(self, request, timeout=None):
        # The step's own deadline (request.options.timeout_in_ms) is enforced by the master.
        return self._call("RunStep", self._master.run_step, request)

    def close_session(self, request, timeout=None):
        return self._call("CloseSession", self._master.close_session, request)

    def list_devices(self, request=None, timeout=None):
        from kernflow.client.protobuf import master_pb2
        return self._call("ListDevices", self._master.list_devices,
                          request or master_pb2.ListDevicesRequest())

    def reset(self, request=None, timeout=None):
        from kernflow.client.protobuf import master_pb2
        return self._call("Reset", self._master.reset, request or master_pb2.ResetRequest())

    def close(self) -> None:
        pass
