"""Who a `kernflow` process is: its service name, resource attributes and log label.

The ``kernflow`` command installs tracing, metrics and logging before a command runs, and all three
name the process the same way. A command that knows more about itself than its name (the task a
``kernflow worker`` serves, the cluster of a ``kernflow master``) registers an ``identity(args)``
function with its command (`CommandRegistry.register`), called once the arguments are parsed:

    ==================  ===================  =========================================================
    process             service.name         resource attributes (besides service.instance.id)
    ==================  ===================  =========================================================
    kernflow worker     kernflow-worker      kernflow.job, kernflow.task ("/job:worker/replica:0/
    (job ps)            (kernflow-ps)        task:1"), kernflow.task_index, [kernflow.cluster]
    kernflow master     kernflow-master      [kernflow.cluster]
    other commands      kernflow-<command>
    ==================  ===================  =========================================================

``service.instance.id`` is a random UUID per process (as the OpenTelemetry semantic conventions
recommend), so a task restarted under the same name is a new instance.
"""

from __future__ import annotations

import dataclasses
import uuid

__all__ = ["ProcessIdentity", "command_identity", "task_identity", "master_identity"]

_INSTANCE_ID = str(uuid.uuid4())


@dataclasses.dataclass(frozen=True)
class ProcessIdentity:
    """How a process names itself to tracing, metrics and logging.

    Attributes:
        service_name: the ``service.name`` resource attribute.
        attributes: further resource attributes (``kernflow.task``, ``service.instance.id``, ...).
        label: what log lines show in brackets after the service name ("/job:worker/task:1").
        short_name: a file-name friendly name ("worker-1", "master"): ``{task}`` in a
            ``file:PATH`` trace destination.
        default_log_level: the log level when neither ``--log-level`` nor ``KERNFLOW_LOG_LEVEL``
            is given: INFO for long-running servers (as TF's servers log), WARNING otherwise.
    """

    service_name: str
    attributes: dict = dataclasses.field(default_factory=dict)
    label: str = ""
    short_name: str = "kernflow"
    default_log_level: str = "WARNING"

    @property
    def resource_attributes(self) -> dict:
        """``service.name`` and `attributes` together, as a resource wants them."""
        return {"service.name": self.service_name, **self.attributes}

    @property
    def log_name(self) -> str:
        """``service[label]`` (or the service alone), as log lines show the process."""
        return f"{self.service_name}[{self.label}]" if self.label else self.service_name


def command_identity(command: str) -> ProcessIdentity:
    """The identity of a command that registered none: service ``kernflow-<command>``."""
    return ProcessIdentity(f"kernflow-{command}", {"service.instance.id": _INSTANCE_ID},
                           short_name=command or "kernflow")


def task_identity(job: str, task: int, cluster: str | None = None) -> ProcessIdentity:
    """The identity of the process serving ``/job:<job>/task:<task>`` (``kernflow worker``).

    Args:
        job: the job name; "ps" tasks report service ``kernflow-ps``, every other job
            ``kernflow-worker`` (the job is in ``kernflow.job``).
        task: the task index.
        cluster: the cluster name in etcd, when the task registers there.
    """
    attrs = {"service.instance.id": _INSTANCE_ID, "kernflow.job": job,
             "kernflow.task": f"/job:{job}/replica:0/task:{task}", "kernflow.task_index": int(task)}
    if cluster:
        attrs["kernflow.cluster"] = cluster
    return ProcessIdentity("kernflow-ps" if job == "ps" else "kernflow-worker", attrs,
                           label=f"/job:{job}/task:{task}", short_name=f"{job}-{task}",
                           default_log_level="INFO")


def master_identity(cluster: str | None = None) -> ProcessIdentity:
    """The identity of a ``kernflow master`` (of `cluster` in etcd, when it uses etcd)."""
    attrs = {"service.instance.id": _INSTANCE_ID}
    if cluster:
        attrs["kernflow.cluster"] = cluster
    return ProcessIdentity("kernflow-master", attrs, label=cluster or "", short_name="master",
                           default_log_level="INFO")
