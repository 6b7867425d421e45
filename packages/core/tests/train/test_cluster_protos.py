"""`kf.train.ClusterDef`, `JobDef` and `ServerDef`: ClusterSpec round trips and ServerDef-driven Servers."""

from __future__ import annotations

import socket

import pytest

import kernflow.core as kf
from kernflow.core.testing.processes import have_distributed

needs_dist = pytest.mark.skipif(not have_distributed(), reason="kernflow-client/master/worker not installed")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------------- ClusterDef
def test_as_cluster_def_is_a_proto_with_sorted_jobs():
    spec = kf.train.ClusterSpec({"worker": ["w0:1", "w1:1"], "ps": {2: "p2:1"}})
    cd = spec.as_cluster_def()
    assert isinstance(cd, kf.train.ClusterDef)
    assert [j.name for j in cd.job] == ["ps", "worker"]
    assert dict(cd.job[0].tasks) == {2: "p2:1"}
    assert dict(cd.job[1].tasks) == {0: "w0:1", 1: "w1:1"}


def test_cluster_def_round_trips_through_bytes_and_cluster_spec():
    spec = kf.train.ClusterSpec({"worker": ["w0:1", "w1:1"], "ps": {1: "p1:1", 4: "p4:1"}})
    wire = spec.as_cluster_def().SerializeToString()
    back = kf.train.ClusterSpec(kf.train.ClusterDef.FromString(wire))
    assert back == spec
    assert back.as_dict() == {"worker": ["w0:1", "w1:1"], "ps": {1: "p1:1", 4: "p4:1"}}
    assert back.as_cluster_def() == spec.as_cluster_def()
    assert spec == spec.as_cluster_def()   # (equality converts a ClusterDef too)


def test_cluster_spec_from_a_hand_built_cluster_def():
    cd = kf.train.ClusterDef(job=[kf.train.JobDef(name="worker", tasks={0: "a:1", 3: "b:1"})])
    spec = kf.train.ClusterSpec(cd)
    assert spec.task_indices("worker") == [0, 3]
    assert spec.task_address("worker", 3) == "b:1"
    assert kf.train.ClusterSpec(kf.train.ClusterDef()).jobs == []


def test_cluster_def_errors():
    dup = kf.train.ClusterDef(job=[kf.train.JobDef(name="w", tasks={0: "a:1"}),
                                   kf.train.JobDef(name="w", tasks={1: "b:1"})])
    with pytest.raises(ValueError, match="Duplicate job name 'w'"):
        kf.train.ClusterSpec(dup)
    with pytest.raises(ValueError, match="job name"):
        kf.train.ClusterSpec(kf.train.ClusterDef(job=[kf.train.JobDef(name="bad name", tasks={0: "a:1"})]))
    with pytest.raises(ValueError, match="address"):
        kf.train.ClusterSpec(kf.train.ClusterDef(job=[kf.train.JobDef(name="w", tasks={0: ""})]))
    with pytest.raises(ValueError, match="task index -1"):
        kf.train.ClusterSpec(kf.train.ClusterDef(job=[kf.train.JobDef(name="w", tasks={-1: "a:1"})]))
    with pytest.raises(TypeError, match="ClusterDef; got ServerDef"):
        kf.train.ClusterSpec(kf.train.ServerDef())
    # A job named "job" is a job, not the old dict form of a cluster def.
    assert kf.train.ClusterSpec({"job": ["a:1"]}).task_address("job", 0) == "a:1"


def test_server_def_fields_round_trip():
    config = kf.ConfigProto(inter_op_parallelism_threads=2)
    sd = kf.train.ServerDef(cluster=kf.train.ClusterSpec({"w": ["h:1"]}).as_cluster_def(), job_name="w",
                            task_index=0, protocol="grpc", port=7, default_session_config=config)
    back = kf.train.ServerDef.FromString(sd.SerializeToString())
    assert back == sd
    assert back.default_session_config.inter_op_parallelism_threads == 2
    assert kf.train.ClusterSpec(back.cluster).as_dict() == {"w": ["h:1"]}


# ---------------------------------------------------------------------------- Server from defs
def test_server_rejects_what_is_neither_a_server_def_nor_a_cluster():
    with pytest.raises(TypeError, match="ServerDef or a ClusterSpec: got int"):
        kf.train.Server(42, start=False)
    with pytest.raises(TypeError, match="ServerDef or a ClusterSpec: got list"):
        kf.train.Server(["localhost:1"], start=False)
    with pytest.raises(TypeError, match="ConfigProto, got str"):
        kf.train.Server({"w": ["localhost:1"]}, config="inter_op=2", start=False)
    with pytest.raises(TypeError, match="task_index must be an int"):
        kf.train.Server({"w": ["localhost:1"]}, task_index=1.5, start=False)


def test_server_def_naming_a_job_or_task_the_cluster_lacks():
    cd = kf.train.ClusterSpec({"w": ["localhost:1", "localhost:2"]}).as_cluster_def()
    with pytest.raises(ValueError, match="No such job in cluster: 'ps'"):
        kf.train.Server(kf.train.ServerDef(cluster=cd, job_name="ps"), start=False)
    with pytest.raises(ValueError, match="No task with index 5 in job 'w'"):
        kf.train.Server(kf.train.ServerDef(cluster=cd, job_name="w", task_index=5), start=False)
    with pytest.raises(ValueError, match="Unsupported protocol 'rdma'"):
        kf.train.Server(kf.train.ServerDef(cluster=cd, job_name="w", protocol="rdma"), start=False)
    # A ClusterDef with two tasks and no task_index: TF's "explicit task_index" error.
    with pytest.raises(ValueError, match="explicit task_index"):
        kf.train.Server(cd, start=False)


def _run_on(server) -> float:
    g = kf.Graph()
    with g.as_default():
        out = kf.constant(6.0) * kf.constant(7.0)
    with kf.Session(server.target, graph=g) as sess:
        return sess.run(out)


@needs_dist
def test_server_from_a_server_def_runs_a_graph():
    config = kf.ConfigProto(inter_op_parallelism_threads=2)
    sd = kf.train.ServerDef(cluster=kf.train.ClusterSpec({"local": ["127.0.0.1:0"]}).as_cluster_def(),
                            job_name="local", task_index=0, protocol="grpc",
                            default_session_config=config)
    with kf.train.Server(sd) as server:
        assert _run_on(server) == 42.0
        got = server.server_def
        assert isinstance(got, kf.train.ServerDef)
        assert (got.job_name, got.task_index, got.protocol) == ("local", 0, "grpc")
        assert got.default_session_config == config
        bound = kf.train.ClusterSpec(got.cluster).task_address("local", 0)
        assert bound == server.target[len("grpc://"):] and not bound.endswith(":0")


@needs_dist
def test_server_def_port_and_argument_overrides():
    port = _free_port()
    cd = kf.train.ClusterSpec({"ps": ["127.0.0.1:1"], "w": ["127.0.0.1:2"]}).as_cluster_def()
    sd = kf.train.ServerDef(cluster=cd, job_name="ps", task_index=0, port=port)
    # job_name passed to Server overrides the ServerDef's; `port` replaces the address's port.
    server = kf.train.Server(sd, job_name="w", start=False)
    try:
        assert server.target == f"grpc://127.0.0.1:{port}"
        assert server.server_def.job_name == "w" and server.server_def.port == port
        assert server.cluster_spec.task_address("ps", 0) == "127.0.0.1:1"
    finally:
        server.stop()


@needs_dist
def test_server_from_a_cluster_def():
    cd = kf.train.ClusterSpec({"solo": ["127.0.0.1:0"]}).as_cluster_def()
    with kf.train.Server(cd) as server:
        assert server.server_def.job_name == "solo"
        assert _run_on(server) == 42.0
