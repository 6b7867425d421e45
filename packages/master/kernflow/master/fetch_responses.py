"""The master's answers that carry fetched values: RunStep's response, built from the tasks' RunGraph
responses without copying the values.

A task's RunGraph response arrives split (`tensor_requests.split`: each large value's bytes stay in
the received buffer, or in the worker's array when the worker runs in this process). RunStep's
response takes each fetched NamedTensor from there (`tensor_requests.gather`), so a large value is
copied once on the master, when the response is serialized, instead of into a new message, out of
it and into the serialized bytes. A fetch the worker returned under another name (it names values
by the `recv_key`s the master sends, the fetches' names, so this does not happen today) is renamed
without touching its bytes.
"""

from __future__ import annotations

from kernflow.core.framework import errors

from kernflow.client.protobuf import master_pb2
from kernflow.client.tensor_requests import gather

__all__ = ["run_step_response"]


def run_step_response(fetch, fetches_by_task: dict, results: dict):
    """RunStep's response holding the fetched values, in the order of `fetch`.

    Args:
        fetch: the fetched tensor names (``RunStepRequest.fetch``).
        fetches_by_task: task -> the indices into `fetch` of the values its RunGraph returns, in
            the order of its response's ``recv`` (`task_routes.Routes.fetches`).
        results: task -> its RunGraphResponse (a protobuf message or a `SplitMessage`).

    Returns:
        A `RunStepResponse`, or a `SplitMessage` of one sharing the tasks' buffers when a value is
        large (read it with `tensor_requests.decode(resp, "tensor")`).

    Raises:
        InternalError: a task returned another number of values than it was asked for, or no
            task returned a fetch.
    """
    picks = [None] * len(fetch)
    for task, indices in fetches_by_task.items():
        response = results[task]
        n = len(response.recv)
        if n != len(indices):
            raise errors.InternalError(None, None, f"Task {task} returned {n} tensors for "
                                       f"{len(indices)} fetches")
        for j, i in enumerate(indices):
            picks[i] = (response, "recv", j, fetch[i])
    for name, pick in zip(fetch, picks):
        if pick is None:
            raise errors.InternalError(None, None, f"No task of the step returned fetch {name}")
    return gather(master_pb2.RunStepResponse(), "tensor", picks)
