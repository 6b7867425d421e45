"""Bytes on the wire for a sharded embedding: they grow with the rows looked up, not the vocabulary.

A 1 worker + 2 ps cluster of `kf.train.Server`s in this process trains a partitioned embedding
(looked up by unique ids, plain SGD: sparse updates on the ps that owns each shard). Every task
counts the values pushed to it and what its RecvTensor served (GetStatus: `pushed_bytes_received`,
`recv_tensor_bytes_served`), which is every tensor that crossed between tasks: the looked-up rows
(ps -> worker) and their gradients (worker -> ps).
"""

from __future__ import annotations

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.testing.processes import free_ports, have_distributed

if not have_distributed():
    pytest.skip("kernflow-client, -master and -worker are not installed", allow_module_level=True)

from kernflow.client.worker_client import GrpcWorkerClient  # noqa: E402

DIM = 64


@pytest.fixture(scope="module")
def cluster():
    ports = free_ports(3)
    spec = kf.train.ClusterSpec({"worker": [f"localhost:{ports[0]}"],
                                 "ps": [f"localhost:{p}" for p in ports[1:]]})
    servers = [kf.train.Server(spec, job_name="worker", task_index=0)]
    servers += [kf.train.Server(spec, job_name="ps", task_index=i) for i in range(2)]
    clients = [GrpcWorkerClient(f"localhost:{p}") for p in ports]
    yield spec, servers[0], clients
    for s in servers:
        s.stop()


def _served(clients) -> int:
    return sum(st.recv_tensor_bytes_served + st.pushed_bytes_received
               for st in (c.get_status() for c in clients))


def _bytes_per_step(cluster, vocab, k, scope, steps=4):
    spec, server, clients = cluster
    g = kf.Graph()
    with g.as_default(), kf.device(kf.train.replica_device_setter(cluster=spec)):
        with kf.variable_scope(scope):
            emb = kf.get_variable("emb", [vocab, DIM], initializer=kf.zeros_initializer(),
                                  partitioner=kf.fixed_size_partitioner(2))
        ids = kf.placeholder(kf.int64, [None])
        unique, idx = kf.unique(ids)
        rows = kf.gather(kf.nn.embedding_lookup(emb, unique, partition_strategy="div"), idx)
        loss = kf.reduce_sum(kf.square(rows - 1.0))
        train = kf.train.GradientDescentOptimizer(0.1).minimize(loss)
        init = kf.global_variables_initializer()
    rng = np.random.RandomState(0)
    with kf.Session(server.target, graph=g) as sess:
        sess.run(init)
        batches = [rng.choice(vocab, k, replace=False) for _ in range(steps + 1)]
        sess.run(train, {ids: batches[0]})                # warm-up: registers the partitions
        before = _served(clients)
        for b in batches[1:]:
            sess.run(train, {ids: b})
        per_step = (_served(clients) - before) / steps
        got = sess.run(emb.as_tensor())
    touched = np.unique(np.concatenate(batches))
    changed = np.flatnonzero(np.any(got != 0.0, axis=1))
    np.testing.assert_array_equal(changed, touched)      # only the touched rows were updated
    return per_step


def test_bytes_per_step_grow_with_the_rows_looked_up_not_the_vocabulary(cluster):
    small = _bytes_per_step(cluster, vocab=1_000, k=32, scope="small")
    large = _bytes_per_step(cluster, vocab=200_000, k=32, scope="large")
    more = _bytes_per_step(cluster, vocab=200_000, k=256, scope="more")
    rows_32 = 32 * DIM * 4 * 2                             # rows down, gradients up
    # The payload itself, plus ids, shapes and headers: well under 2x; the vocabulary (51 MB in
    # the large case) does not show.
    assert rows_32 <= small < 2 * rows_32, small
    assert rows_32 <= large < 2 * rows_32, large
    assert abs(large - small) < 0.25 * rows_32, (small, large)
    assert 6 * large < more < 10 * large, (large, more)   # 8x the rows
    print(f"bytes per step: 32 of 1,000 rows {small:.0f}, 32 of 200,000 {large:.0f}, 256 of 200,000 "
          f"{more:.0f} (payload of 32 rows and their gradients: {rows_32})")
