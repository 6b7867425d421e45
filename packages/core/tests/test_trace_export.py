"""`trace_export` and `kernflow trace`: span files (OTLP/JSON lines) to Chrome trace JSON and OTLP/JSON."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys

import pytest

from kernflow.core import trace_export

T1 = "0af7651916cd43dd8448eb211c80319c"
T2 = "1bf7651916cd43dd8448eb211c80319c"


def _attr(key, value):
    if isinstance(value, bool):
        v = {"boolValue": value}
    elif isinstance(value, int):
        v = {"intValue": str(value)}
    elif isinstance(value, float):
        v = {"doubleValue": value}
    else:
        v = {"stringValue": value}
    return {"key": key, "value": v}


def _span(name, span_id, start_ms, end_ms, parent=None, trace=T1, kind=1, remote=False, **attrs):
    span = {"traceId": trace, "spanId": span_id, "name": name, "kind": kind,
            "startTimeUnixNano": str(1_700_000_000_000_000_000 + int(start_ms * 1e6)),
            "endTimeUnixNano": str(1_700_000_000_000_000_000 + int(end_ms * 1e6)),
            "attributes": [_attr(k.replace("_", "."), v) for k, v in attrs.items()],
            "flags": 0x100 | (0x200 if remote else 0), "status": {}}
    if parent:
        span["parentSpanId"] = parent
    return span


def _request(service, pid, spans, **resource):
    attrs = [_attr("service.name", service), _attr("process.pid", pid)]
    attrs += [_attr(k, v) for k, v in resource.items()]
    return {"resourceSpans": [{"resource": {"attributes": attrs},
                               "scopeSpans": [{"scope": {"name": "kernflow.test"}, "spans": spans}]}]}


def _cluster_step() -> list[dict]:
    """One step: client -> master (two concurrent RunGraph) -> two workers, as three processes' lines."""
    client = _request("client", 100, [_span("Session.run", "a" * 16, 0, 10)])
    master = _request("kernflow-master", 200, [
        _span("Master.RunStep", "b" * 16, 1, 9, parent="a" * 16, kind=2, remote=True),
        _span("RunGraph", "c" * 16, 2, 8, parent="b" * 16, kind=3, kernflow_task="/job:worker/task:0"),
        _span("RunGraph", "d" * 16, 2.5, 7, parent="b" * 16, kind=3, kernflow_task="/job:worker/task:1"),
    ])
    w0 = _request("kernflow-worker", 300, [_span("Worker.RunGraph", "e" * 16, 3, 7, parent="c" * 16,
                                                 kind=2, remote=True, kernflow_step_id=7)],
                  **{"kernflow.task": "/job:worker/replica:0/task:0"})
    w1 = _request("kernflow-worker", 301, [_span("Worker.RunGraph", "f" * 16, 3, 6, parent="d" * 16,
                                                 kind=2, remote=True)],
                  **{"kernflow.task": "/job:worker/replica:0/task:1"})
    return [client, master, w0, w1]


def _write_lines(path, requests):
    path.write_text("".join(json.dumps(r) + "\n" for r in requests))
    return path


def _x_events(doc):
    return [e for e in doc["traceEvents"] if e["ph"] == "X"]


# ---------------------------------------------------------------------------- reading
def test_span_records_flatten_resources_scopes_and_attributes():
    recs = trace_export.span_records(_cluster_step())
    assert [r["name"] for r in recs] == ["Session.run", "Master.RunStep", "RunGraph", "RunGraph",
                                         "Worker.RunGraph", "Worker.RunGraph"]
    step = recs[1]
    assert step["service"] == "kernflow-master" and step["pid"] == 200 and step["kind"] == "SERVER"
    assert step["parent_span_id"] == "a" * 16 and step["parent_is_remote"] is True
    assert recs[0]["parent_span_id"] is None and recs[0]["parent_is_remote"] is False
    assert recs[4]["attributes"] == {"kernflow.step.id": 7}
    assert recs[4]["resource"]["kernflow.task"] == "/job:worker/replica:0/task:0"
    assert step["end_ns"] - step["start_ns"] == 8_000_000


def test_reader_accepts_base64_ids_and_enum_names_and_writes_hex_and_integers():
    span = _span("x", "ab" * 8, 0, 1, parent="cd" * 8, kind="SPAN_KIND_CLIENT")
    span["traceId"] = base64.b64encode(bytes.fromhex(T1)).decode()
    span["spanId"] = base64.b64encode(bytes.fromhex("ab" * 8)).decode()
    span["status"] = {"code": "STATUS_CODE_ERROR", "message": "boom"}
    req = trace_export.normalize_request(_request("svc", 1, [span]))
    out = req["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert (out["traceId"], out["spanId"], out["kind"], out["status"]["code"]) == (T1, "ab" * 8, 3, 2)
    (rec,) = trace_export.span_records([req])
    assert rec["kind"] == "CLIENT" and rec["status"] == "ERROR" and rec["status_message"] == "boom"


def test_bad_lines_name_the_file_and_line(tmp_path):
    path = tmp_path / "spans.jsonl"
    path.write_text(json.dumps(_cluster_step()[0]) + "\n\nnot json\n")
    with pytest.raises(trace_export.TraceFileError, match=r"spans.jsonl:3: not JSON"):
        trace_export.read_requests([path])
    path.write_text('{"name": "Session.run", "trace_id": "00"}\n')
    with pytest.raises(trace_export.TraceFileError, match=r"spans.jsonl:1: not an OTLP/JSON trace"):
        trace_export.read_requests([path])
    bad = _request("svc", 1, [_span("x", "zz", 0, 1)])
    path.write_text(json.dumps(bad) + "\n")
    with pytest.raises(trace_export.TraceFileError, match=r"spans.jsonl:1: malformed .*'zz'"):
        trace_export.read_requests([path])


def test_select_traces_by_unique_prefix():
    reqs = _cluster_step() + [_request("client", 100, [_span("Session.run", "9" * 16, 20, 30, trace=T2)])]
    (only,) = trace_export.select_traces(reqs, ["1b"])
    assert [r["name"] for r in trace_export.span_records([only])] == ["Session.run"]
    assert len(trace_export.span_records(trace_export.select_traces(reqs, [T1[:6]]))) == 6
    with pytest.raises(ValueError, match="matches 2 traces"):
        trace_export.select_traces(reqs, [""])
    with pytest.raises(ValueError, match="matches no trace"):
        trace_export.select_traces(reqs, ["ff"])


# ---------------------------------------------------------------------------- Chrome
def test_chrome_has_one_process_per_service_process_with_complete_events():
    doc = trace_export.to_chrome(trace_export.span_records(_cluster_step()))
    json.dumps(doc)   # serializable
    names = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    assert sorted(names.values()) == ["client (pid 100)", "kernflow-master (pid 200)",
                                      "kernflow-worker /job:worker/replica:0/task:0 (pid 300)",
                                      "kernflow-worker /job:worker/replica:0/task:1 (pid 301)"]
    xs = _x_events(doc)
    assert len(xs) == 6 and all({"pid", "tid", "ts", "dur", "name", "args"} <= e.keys() for e in xs)
    root = next(e for e in xs if e["name"] == "Session.run")
    assert root["ts"] == 0 and root["dur"] == 10_000.0 and names[root["pid"]].startswith("client")
    w0 = next(e for e in xs if e["args"]["span_id"] == "e" * 16)
    assert w0["args"]["kernflow.step.id"] == 7 and w0["args"]["parent_span_id"] == "c" * 16
    assert w0["args"]["kind"] == "SERVER" and w0["ts"] == 3000.0 and w0["dur"] == 4000.0
    threads = [e for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"]
    assert {(e["pid"], e["tid"]) for e in threads} == {(e["pid"], e["tid"]) for e in xs}


def test_chrome_lanes_nest_children_and_separate_concurrent_spans():
    doc = trace_export.to_chrome(trace_export.span_records(_cluster_step()))
    master = {e["args"]["span_id"]: e for e in _x_events(doc) if e["args"]["span_id"] in ("b" * 16, "c" * 16,
                                                                                          "d" * 16)}
    step, rg0, rg1 = master["b" * 16], master["c" * 16], master["d" * 16]
    assert rg0["tid"] == step["tid"] != rg1["tid"]   # the overlapping RunGraph gets a lane of its own
    by_lane: dict = {}
    for e in _x_events(doc):
        by_lane.setdefault((e["pid"], e["tid"]), []).append(e)
    for events in by_lane.values():   # on every lane, two events nest or are disjoint
        for a in events:
            for b in events:
                a0, a1, b0, b1 = a["ts"], a["ts"] + a["dur"], b["ts"], b["ts"] + b["dur"]
                assert a1 <= b0 or b1 <= a0 or (a0 <= b0 and b1 <= a1) or (b0 <= a0 and a1 <= b1)


def test_chrome_flows_join_parents_and_children_across_processes():
    doc = trace_export.to_chrome(trace_export.span_records(_cluster_step()))
    xs = {e["args"]["span_id"]: e for e in _x_events(doc)}
    starts = {e["id"]: e for e in doc["traceEvents"] if e["ph"] == "s"}
    ends = {e["id"]: e for e in doc["traceEvents"] if e["ph"] == "f"}
    assert starts.keys() == ends.keys() and len(starts) == 3   # client->master, master->w0, master->w1
    pairs = set()
    for fid, s in starts.items():
        f = ends[fid]
        assert f["bp"] == "e" and s["cat"] == f["cat"] and s["name"] == f["name"]
        parent = next(x for x in xs.values() if (x["pid"], x["tid"]) == (s["pid"], s["tid"])
                      and x["ts"] <= s["ts"] <= x["ts"] + x["dur"]
                      and x["name"] == s["name"].split(" -> ")[0])
        child = next(x for x in xs.values() if (x["pid"], x["tid"], x["ts"]) == (f["pid"], f["tid"], f["ts"]))
        assert parent["pid"] != child["pid"]
        pairs.add((parent["args"]["span_id"][0], child["args"]["span_id"][0]))
    assert pairs == {("a", "b"), ("c", "e"), ("d", "f")}


def test_span_events_become_instants():
    span = _span("Worker.RunGraph", "e" * 16, 0, 5)
    span["events"] = [{"name": "exception", "timeUnixNano": str(1_700_000_000_000_000_000 + 2_000_000),
                       "attributes": [_attr("exception.message", "boom")]}]
    doc = trace_export.to_chrome(trace_export.span_records([_request("w", 1, [span])]))
    (inst,) = [e for e in doc["traceEvents"] if e["ph"] == "i"]
    assert inst["name"] == "exception" and inst["ts"] == 2000.0
    assert inst["args"] == {"exception.message": "boom"}


# ---------------------------------------------------------------------------- OTLP/JSON
def test_otlp_json_merges_lines_of_one_process():
    reqs = _cluster_step()
    again = _request("kernflow-master", 200, [_span("RunGraph", "1" * 16, 9, 9.5, parent="b" * 16)])
    doc = trace_export.to_otlp_json(reqs + [again])
    services = [trace_export.attributes(rs["resource"]["attributes"])["service.name"]
                for rs in doc["resourceSpans"]]
    assert services == ["client", "kernflow-master", "kernflow-worker", "kernflow-worker"]
    (scope,) = doc["resourceSpans"][1]["scopeSpans"]
    assert [s["spanId"] for s in scope["spans"]] == ["b" * 16, "c" * 16, "d" * 16, "1" * 16]


def _parse_otlp(doc: dict):
    """`doc` as an ExportTraceServiceRequest message (hex ids to base64 first: the protobuf JSON mapping)."""
    json_format = pytest.importorskip("google.protobuf.json_format")
    trace_service_pb2 = pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2")
    doc = json.loads(json.dumps(doc))
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if span.get(key):
                        span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    return json_format.Parse(json.dumps(doc), trace_service_pb2.ExportTraceServiceRequest())


def test_otlp_json_of_synthetic_spans_parses_as_export_request():
    msg = _parse_otlp(trace_export.to_otlp_json(_cluster_step()))
    spans = [s for rs in msg.resource_spans for ss in rs.scope_spans for s in ss.spans]
    assert len(spans) == 6 and spans[0].trace_id.hex() == T1
    step = next(s for s in spans if s.name == "Master.RunStep")
    assert step.parent_span_id.hex() == "a" * 16 and step.kind == 2 and step.flags == 0x300


# ---------------------------------------------------------------------------- the SDK exporter
@pytest.fixture
def sdk_spans(tmp_path):
    """Spans of a real SDK provider (not installed globally) written by the file exporter."""
    sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
    pytest.importorskip("opentelemetry.exporter.otlp.proto.common.trace_encoder")
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from kernflow.core.tracing_sdk import OtlpJsonFileSpanExporter
    exporter = OtlpJsonFileSpanExporter(str(tmp_path / "out") + "/", "worker-1")
    provider = sdk_trace.TracerProvider(resource=Resource.create(
        {"service.name": "kernflow-worker", "kernflow.task": "/job:worker/replica:0/task:1"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("kernflow.test")
    remote = trace.set_span_in_context(trace.NonRecordingSpan(trace.SpanContext(
        int(T1, 16), 0x1234, is_remote=True, trace_flags=trace.TraceFlags(1))))
    with tracer.start_as_current_span("Worker.RunGraph", context=remote, kind=trace.SpanKind.SERVER) as s:
        s.set_attributes({"kernflow.step_id": 7, "kernflow.ratio": 0.5, "kernflow.ok": True,
                          "kernflow.tasks": ["a", "b"]})
        try:
            with tracer.start_as_current_span("RecvTensor", kind=trace.SpanKind.CLIENT):
                raise RuntimeError("boom")
        except RuntimeError:
            pass
    provider.shutdown()
    return exporter.path


def test_file_exporter_writes_otlp_json_lines_per_process(sdk_spans):
    assert os.path.basename(sdk_spans) == f"worker-1-{os.getpid()}.otlp.jsonl"
    lines = open(sdk_spans, encoding="utf-8").read().splitlines()
    assert len(lines) == 2 and all(json.loads(line)["resourceSpans"] for line in lines)
    recv, run = sorted(trace_export.read_spans([sdk_spans]), key=lambda r: r["name"])
    assert run["name"] == "Worker.RunGraph" and run["trace_id"] == T1 and run["kind"] == "SERVER"
    assert run["parent_span_id"] == f"{0x1234:016x}" and run["parent_is_remote"] is True
    assert run["attributes"] == {"kernflow.step_id": 7, "kernflow.ratio": 0.5, "kernflow.ok": True,
                                 "kernflow.tasks": ["a", "b"]}
    assert run["service"] == "kernflow-worker" and run["resource"]["kernflow.task"].endswith("task:1")
    assert recv["parent_span_id"] == run["span_id"] and recv["parent_is_remote"] is False
    assert recv["status"] == "ERROR" and "boom" in recv["status_message"]
    assert [e["name"] for e in recv["events"]] == ["exception"]
    raw = json.loads(lines[0])["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert raw["kind"] == 3 and isinstance(raw["startTimeUnixNano"], str) and len(raw["traceId"]) == 32


def test_file_exporter_lines_parse_as_export_requests(sdk_spans):
    doc = trace_export.to_otlp_json(trace_export.read_requests([sdk_spans]))
    msg = _parse_otlp(doc)
    (rs,) = msg.resource_spans   # both lines came from one process: one resource
    (ss,) = rs.scope_spans
    assert ss.scope.name == "kernflow.test" and sorted(s.name for s in ss.spans) == ["RecvTensor",
                                                                                     "Worker.RunGraph"]
    assert all(s.trace_id.hex() == T1 for s in ss.spans)
    chrome = trace_export.to_chrome(trace_export.span_records(trace_export.read_requests([sdk_spans])))
    recv, run = sorted(_x_events(chrome), key=lambda e: e["name"])
    assert recv["tid"] == run["tid"] and recv["args"]["status"].startswith("ERROR")


# ---------------------------------------------------------------------------- the command
def _kernflow(*args, cwd=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNFLOW_")}
    return subprocess.run([sys.executable, "-m", "kernflow.core.cli", *args], capture_output=True,
                          text=True, timeout=120, env=env, cwd=cwd)


def test_trace_export_and_list_commands(tmp_path):
    reqs = _cluster_step()
    a = _write_lines(tmp_path / "a.jsonl", reqs[:2])
    b = _write_lines(tmp_path / "b.jsonl", reqs[2:] + [
        _request("client", 100, [_span("Session.run", "9" * 16, 20, 30, trace=T2)])])
    out = _kernflow("trace", "export", "--format", "chrome", "-o", str(tmp_path / "c.json"),
                    "--trace-id", T1[:8], str(a), str(b))
    assert out.returncode == 0, out.stderr
    assert "wrote 6 spans" in out.stderr
    assert len(_x_events(json.loads((tmp_path / "c.json").read_text()))) == 6
    out = _kernflow("trace", "export", "--format", "otlp-json", str(a), str(b))
    assert out.returncode == 0, out.stderr
    assert len(json.loads(out.stdout)["resourceSpans"]) == 4
    (tmp_path / "o.json").write_text(out.stdout)   # an export reads back as a span file
    assert len(trace_export.read_spans([tmp_path / "o.json"])) == 7
    out = _kernflow("trace", "list", str(a), str(b))
    assert out.returncode == 0, out.stderr
    first, second = out.stdout.splitlines()
    assert first.startswith(T1) and "6 spans" in first and "Session.run" in first
    assert "[client, kernflow-master, kernflow-worker]" in first and second.startswith(T2)


def test_trace_export_errors(tmp_path):
    out = _kernflow("trace", "export", "--format", "chrome", str(tmp_path / "missing.jsonl"))
    assert out.returncode == 1 and "cannot read" in out.stderr and "missing.jsonl" in out.stderr
    (tmp_path / "empty.jsonl").write_text("\n")
    out = _kernflow("trace", "export", "--format", "chrome", str(tmp_path / "empty.jsonl"))
    assert out.returncode == 1 and "no spans in" in out.stderr
    out = _kernflow("trace", "export", "--format", "svg", str(tmp_path / "empty.jsonl"))
    assert out.returncode == 2 and "invalid choice: 'svg'" in out.stderr
