"""The "shm" transport (kernflow/client/shm_transport.py) between a consumer and a fake producer in this
process: what goes through a segment and what in-band, that every segment is removed whatever
happens (taken, step ended, never taken, producer failing mid-transfer, no room in /dev/shm), the
negotiation's probe file, and malformed requests and answers. Transfers between real workers are in
packages/worker/tests/test_transports.py and tests/test_transports.py."""

from __future__ import annotations

import concurrent.futures
import errno
import logging
import os
import threading
import time

import numpy as np
import pytest

from kernflow.client import codec
from kernflow.client import shm_transport
from kernflow.client import transports
from kernflow.client.protobuf import worker_pb2
from kernflow.core.framework import errors
from kernflow.core.runtime import transport as core_transport
from kernflow.core.runtime.cancellation import CancellationManager

pytestmark = pytest.mark.skipif(not shm_transport._available(), reason="no writable /dev/shm")

KEY = "/job:worker/replica:0/task:1/device:CPU:0;1;/job:worker/replica:0/task:0/device:CPU:0;t:0;0:0"
MIB = 1 << 20


class Producer:
    """Stands in for the producer's worker: serves RecvTensor of one value as `Worker` does.

    Attributes:
        step: the step's CancellationManager (cancel it to end the step).
        segments: the segment names consumers asked for.
        fail_after: raise this error after sending this many of the transport's messages (the
            producer dies mid-transfer).
    """

    task_name = "/job:worker/replica:0/task:1"

    def __init__(self, value, is_dead=False):
        self.value, self.is_dead = value, is_dead
        self.step = CancellationManager()
        self.segments: list[str] = []
        self.fail_after = None

    def recv_tensor_raw(self, req, timeout=None):
        if req.transport == "shm":
            self.segments.append(worker_pb2.ShmRecvRequest.FromString(req.transport_request).segment)
        answer = transports.serve(req, self.value, self.is_dead, self.step)
        if answer is None:
            yield from codec.encode_recv_chunks(self.value, self.is_dead)
            return
        for i, msg in enumerate(answer):
            if self.fail_after is not None and i == self.fail_after[0]:
                answer.close()
                raise self.fail_after[1]
            yield msg


def _kernflow_files() -> set[str]:
    return {f for f in os.listdir(shm_transport.SHM_DIR)
            if f.startswith((shm_transport.SEGMENT_PREFIX, shm_transport.PROBE_PREFIX))}


@pytest.fixture(autouse=True)
def no_leaks():
    """Fails a test that leaves a segment or probe file behind (other processes' transient files
    get a few seconds to go)."""
    before = _kernflow_files()
    yield
    deadline = time.monotonic() + 5
    while _kernflow_files() - before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _kernflow_files() - before == set()


@pytest.fixture
def shm(monkeypatch):
    """This process's shm transport, KERNFLOW_TRANSPORT unset."""
    monkeypatch.delenv(core_transport.TRANSPORT_ENV, raising=False)
    return core_transport.get("shm")


def _exists(name: str) -> bool:
    return os.path.exists(os.path.join(shm_transport.SHM_DIR, name))


def _through(shm, producer, timeout=10.0, cancellation=None):
    return shm.recv(producer, 7, KEY, timeout, cancellation)


@pytest.mark.parametrize("value", [
    np.arange(MIB, dtype=np.float32).reshape(1024, 1024),
    np.arange(3 * MIB, dtype=np.int8) % 127,
    (np.arange(MIB) % 3 == 0),
    np.full((512, 512), 1 + 2j, np.complex128),
    np.arange(2 * MIB, dtype=np.float64).reshape(1024, -1).T,          # not C-contiguous
    np.arange(MIB, dtype=">i4"),                                          # big-endian
], ids=["float32", "int8", "bool", "complex128", "transposed", "big-endian"])
def test_large_dense_tensors_go_through_a_segment_that_is_then_gone(shm, value):
    producer = Producer(value)
    got, is_dead = _through(shm, producer)
    assert not is_dead and got.dtype == value.dtype.newbyteorder("=") and got.shape == value.shape
    np.testing.assert_array_equal(got, value)
    assert got.flags.writeable and got.flags.c_contiguous
    (name,) = producer.segments
    assert not _exists(name)                                  # the consumer took (unlinked) it
    assert name not in shm_transport.held_segments()          # and the producer saw that


def test_a_variable_snapshot_is_written_from_its_messages(shm):
    value = np.random.RandomState(0).rand(MIB // 2)
    got, _ = _through(shm, Producer(codec.snapshot(value)))
    np.testing.assert_array_equal(got, value)


@pytest.mark.parametrize("value,is_dead", [
    (np.arange(MIB // 4 - 1, dtype=np.float32), False),                  # one element under 1 MiB
    (np.array([b"x" * MIB, b"y"], dtype=object), False),                  # strings
    (np.zeros(MIB, np.float32), True),                                    # dead
    (np.float64(2.5), False),
], ids=["small", "strings", "dead", "scalar"])
def test_what_shm_does_not_carry_comes_in_band(shm, value, is_dead):
    producer = Producer(value, is_dead)
    got, dead = _through(shm, producer)
    assert dead == is_dead and (is_dead or got.tolist() == np.asarray(value).tolist())
    assert not any(_exists(n) or n in shm_transport.held_segments() for n in producer.segments)


def test_a_full_dev_shm_falls_back_to_in_band(shm, monkeypatch, caplog):
    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(shm_transport.os, "posix_fallocate", full)
    monkeypatch.setattr(shm_transport, "_warned", set())
    producer = Producer(np.ones(2 * MIB, np.uint8))
    with caplog.at_level(logging.WARNING, logger="kernflow.client.shm_transport"):
        got, _ = _through(shm, producer)
    assert got.sum() == 2 * MIB
    assert f"cannot place {2 * MIB} bytes in /dev/shm" in caplog.text and "in-band" in caplog.text
    (name,) = producer.segments
    assert not _exists(name) and name not in shm_transport.held_segments()


def test_a_segment_released_before_it_is_taken_fails_the_transfer(shm, monkeypatch):
    producer = Producer(np.ones(MIB, np.float32))
    real = shm_transport._take

    def step_ends_first(meta, *args):
        producer.step.cancel(errors.AbortedError(None, None, "step 7 was cleaned up"))
        return real(meta, *args)
    monkeypatch.setattr(shm_transport, "_take", step_ends_first)
    with pytest.raises(errors.UnavailableError, match=r"shm transfer of .* \(step 7\) from "
                                                      r"/job:worker/replica:0/task:1: .*is gone"):
        _through(shm, producer)
    assert not _exists(producer.segments[0])


@pytest.mark.parametrize("sent", [0, 1, 2])
def test_a_producer_failing_mid_transfer_leaves_no_segment(shm, sent):
    producer = Producer(np.ones(3 * MIB, np.float32))        # 12 MiB: the answer and 3 progress marks
    producer.fail_after = (sent, errors.UnavailableError(None, None, "worker died"))
    with pytest.raises(errors.UnavailableError, match="worker died"):
        _through(shm, producer)
    (name,) = producer.segments
    assert not _exists(name) and name not in shm_transport.held_segments()


def test_the_consumer_reads_as_the_producer_writes(shm, monkeypatch):
    monkeypatch.setattr(shm, "progress_bytes", MIB)
    value = np.arange(5 * MIB // 4, dtype=np.float32)         # 5 MiB: 5 progress marks
    producer = Producer(value)
    seen = []
    real = transports._responses

    def recording(answer, nbytes):
        for msg in real(answer, nbytes):
            payload = worker_pb2.RecvTensorResponse.FromString(msg).transport_payload
            seen.append(worker_pb2.ShmProgress.FromString(payload).written if seen else -1)
            yield msg
    monkeypatch.setattr(transports, "_responses", recording)
    got, _ = _through(shm, producer)
    np.testing.assert_array_equal(got, value)
    assert seen == [-1, MIB, 2 * MIB, 3 * MIB, 4 * MIB, 5 * MIB]


def test_a_segment_nobody_takes_is_removed_after_the_ack_timeout(shm, monkeypatch, caplog):
    monkeypatch.setattr(shm, "ack_timeout_s", 0.2)
    req = worker_pb2.RecvTensorRequest(step_id=7, rendezvous_key=KEY, transport="shm",
                                       transport_request=worker_pb2.ShmRecvRequest(
                                           segment="kernflow-shm-" + "ab" * 16).SerializeToString())
    step = CancellationManager()
    with caplog.at_level(logging.WARNING, logger="kernflow.client.shm_transport"):
        answer = transports.serve(req, np.ones(MIB, np.uint8), False, step)
        first = worker_pb2.RecvTensorResponse.FromString(next(answer))   # and nobody reads further
        meta = worker_pb2.ShmTensor.FromString(first.transport_payload)
        assert _exists(meta.segment) and meta.size == first.total_bytes == MIB
        deadline = time.monotonic() + 5
        while _exists(meta.segment):
            assert time.monotonic() < deadline, "the janitor did not remove the segment"
            time.sleep(0.02)
    assert meta.segment not in shm_transport.held_segments()
    assert "was not taken by its consumer within 0.2 s" in caplog.text


def test_a_step_cancelled_before_the_value_is_served_creates_nothing(shm):
    producer = Producer(np.ones(MIB, np.float32))
    producer.step.cancel(errors.AbortedError(None, None, "step 7 was aborted"))
    with pytest.raises(errors.AbortedError, match="step 7 was aborted"):
        _through(shm, producer)
    assert not _exists(producer.segments[0])


def test_a_cancelled_consumer_does_not_start(shm):
    mine = CancellationManager()
    mine.cancel(errors.CancelledError(None, None, "pull cancelled"))

    class Call:
        cancelled = False

        def __iter__(self):
            return iter(())

        def cancel(self):
            Call.cancelled = True

    class Peer:
        def recv_tensor_raw(self, req, timeout=None):
            return Call()
    with pytest.raises(errors.CancelledError, match="pull cancelled"):
        _through(shm, Peer(), cancellation=mine)
    assert Call.cancelled


@pytest.mark.parametrize("segment", ["../etc/passwd", "kernflow-shm-xyz", "other-" + "ab" * 16, ""])
def test_malformed_segment_names_are_refused(shm, segment):
    req = worker_pb2.RecvTensorRequest(step_id=7, rendezvous_key=KEY, transport="shm",
                                       transport_request=worker_pb2.ShmRecvRequest(segment=segment)
                                       .SerializeToString())
    with pytest.raises(errors.InvalidArgumentError, match="expected 'kernflow-shm-' and 32 hex digits"):
        transports.serve(req, np.ones(MIB, np.uint8), False, CancellationManager())


def test_malformed_answers_are_data_loss(shm):
    class Liar(Producer):
        def __init__(self, meta):
            super().__init__(None)
            self.meta = meta

        def recv_tensor_raw(self, req, timeout=None):
            yield worker_pb2.RecvTensorResponse(transport_payload=self.meta).SerializeToString()
    other = worker_pb2.ShmTensor(dtype=1, segment="kernflow-shm-" + "cd" * 16, size=4).SerializeToString()
    with pytest.raises(errors.DataLossError, match="names segment 'kernflow-shm-cdcd.*not the requested"):
        _through(shm, Liar(other))
    with pytest.raises(errors.DataLossError, match="malformed ShmTensor"):
        _through(shm, Liar(b"\xff\xff\xff"))


def test_a_stream_that_ends_before_the_segment_is_written_is_data_loss(shm):
    class Quitter(Producer):
        def recv_tensor_raw(self, req, timeout=None):
            self.segments.append(worker_pb2.ShmRecvRequest.FromString(req.transport_request).segment)
            answer = transports.serve(req, self.value, False, self.step)
            yield next(answer)
            answer.close()
    producer = Quitter(np.ones(MIB, np.float32))
    with pytest.raises(errors.DataLossError, match=r"stream ended after 0 of 4194304 bytes were written"):
        _through(shm, producer)
    assert not _exists(producer.segments[0]) and producer.segments[0] not in shm_transport.held_segments()


def test_many_concurrent_transfers(shm):
    values = [np.full(MIB // 4 + i, i, np.float32) for i in range(24)]
    producers = [Producer(v) for v in values]
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        got = list(ex.map(lambda p: _through(shm, p)[0], producers))
    for v, g in zip(values, got):
        np.testing.assert_array_equal(g, v)
    for p in producers:
        assert not any(_exists(n) or n in shm_transport.held_segments() for n in p.segments)


def test_the_probe_proves_a_shared_dev_shm_and_is_removed(shm):
    with transports.status_request() as (req, probes):
        name = req.transport_probes["shm"].decode()
        assert name.startswith(shm_transport.PROBE_PREFIX) and _exists(name)
        offer = shm.offer(req.transport_probes["shm"])
        assert probes["shm"].accepts(offer)
        foreign = worker_pb2.ShmOffer.FromString(offer)
        foreign.uid += 1
        assert not probes["shm"].accepts(foreign.SerializeToString())   # another user's segments
        assert not probes["shm"].accepts(shm.offer(b""))                # did not read the probe
        assert not probes["shm"].accepts(b"\xff")
    assert not _exists(name)
    assert worker_pb2.ShmOffer.FromString(shm.offer(b"../../etc/passwd")).probe_answer == ""


def test_status_lists_the_transports_and_the_host(shm, monkeypatch):
    monkeypatch.setenv(core_transport.HOST_ID_ENV, "host-x")
    resp = worker_pb2.GetStatusResponse()
    with transports.status_request() as (req, probes):
        transports.fill_status(resp, req)
        assert transports.choose(resp, probes) is shm
    assert resp.host_id == "host-x" and [o.name for o in resp.transports] == ["shm", "grpc"]
    monkeypatch.setenv(core_transport.TRANSPORT_ENV, "grpc")
    resp = worker_pb2.GetStatusResponse()
    transports.fill_status(resp, None)
    assert [o.name for o in resp.transports] == ["grpc"]


def test_peer_transports_negotiate_once_and_again_after_forget(shm, monkeypatch):
    class Peer:
        address, calls = "10.0.0.1:5", 0

        def get_status(self, req, timeout=None):
            Peer.calls += 1
            assert timeout <= transports.NEGOTIATION_TIMEOUT_S
            resp = worker_pb2.GetStatusResponse()
            transports.fill_status(resp, req)
            return resp
    peers, peer = transports.PeerTransports(), Peer()
    threads = [threading.Thread(target=lambda: peers.get("/job:w/task:1", peer)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert peers.get("/job:w/task:1", peer) is shm and Peer.calls == 1
    peers.forget("/job:w/task:1", peer)
    assert peers.get("/job:w/task:1", peer) is shm and Peer.calls == 2
    monkeypatch.setenv(core_transport.TRANSPORT_ENV, "grpc")     # no negotiation needed at all
    assert peers.get("/job:w/task:1", peer).name == "grpc" and Peer.calls == 2


def test_peer_transports_fall_back_to_grpc_when_the_peer_does_not_answer(shm, monkeypatch):
    class Down:
        address = "10.0.0.2:5"

        def get_status(self, req, timeout=None):
            raise errors.UnavailableError(None, None, "connection refused")
    peers = transports.PeerTransports()
    assert peers.get("/job:w/task:2", Down()).name == "grpc"
    assert peers.get("/job:w/task:2", object()).name == "grpc"   # in this process: never negotiated


def test_a_transport_failing_to_offer_does_not_break_get_status(shm, monkeypatch, caplog):
    def broken(challenge):
        raise RuntimeError("boom")
    monkeypatch.setattr(shm, "offer", broken)
    resp = worker_pb2.GetStatusResponse()
    transports.fill_status(resp, None)
    assert [o.name for o in resp.transports] == ["grpc"]
    assert "transport 'shm' failed to answer a probe" in caplog.text
