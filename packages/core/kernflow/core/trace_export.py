"""Span files to trace viewers: OTLP/JSON lines in, Chrome trace JSON or one OTLP/JSON request out.

``KERNFLOW_TRACE=file:PATH`` (`kernflow.core.tracing_sdk`) writes one OTLP/JSON
``ExportTraceServiceRequest`` per line: the OpenTelemetry Collector's file-exporter format, which its
``otlpjsonfile`` receiver reads back. Every process of a cluster writes its own lines, so a step is
spread over several files (or interleaved lines of one). This module reads them back and converts:

* `to_otlp_json`: one ``ExportTraceServiceRequest`` (spans grouped by resource and scope), which
  ``curl --data @out.json -H 'Content-Type: application/json' http://COLLECTOR:4318/v1/traces``
  sends to any OTLP/HTTP receiver (Jaeger, Tempo, the Collector).
* `to_chrome`: the Chrome trace-event format (Perfetto, ``chrome://tracing``): one process row per
  service process, spans as complete ("X") events laid out on lanes so that a child always nests in
  its parent, attributes in ``args``, span events as instants, and a flow arrow from a parent to its
  child in another process (an RPC crossing processes).

OTLP/JSON is the protobuf JSON mapping with the deviations of the OTLP specification ("JSON Protobuf
Encoding"): trace and span ids are hex strings (not base64), enum values are integers (``"kind": 2``
for SPAN_KIND_SERVER), 64-bit integers are decimal strings, keys are lowerCamelCase. The reader also
accepts base64 ids and enum names (the plain protobuf mapping some tools write); the writer always
produces the OTLP form. No OpenTelemetry package is needed here: this is plain JSON.
"""

from __future__ import annotations

import base64
import binascii
import json

__all__ = ["TraceFileError", "read_requests", "read_spans", "span_records", "normalize_request",
           "select_traces", "to_otlp_json", "to_chrome", "summarize_traces"]

SPAN_KINDS = ("UNSPECIFIED", "INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER")
STATUS_CODES = ("UNSET", "OK", "ERROR")
# Span.flags bits (opentelemetry-proto trace.proto, SpanFlags): whether the parent was remote.
_FLAG_HAS_IS_REMOTE = 0x100
_FLAG_IS_REMOTE = 0x200


class TraceFileError(ValueError):
    """A span file cannot be read: not JSON, or not an OTLP/JSON ``ExportTraceServiceRequest``."""


# ---------------------------------------------------------------------------- reading
def read_requests(paths) -> list[dict]:
    """Reads span files: one OTLP/JSON ``ExportTraceServiceRequest`` per non-empty line.

    A file that holds a single (possibly pretty-printed) request, as `to_otlp_json` writes it, is
    read too. Ids and enums are normalized (`normalize_request`).

    Args:
        paths: the files to read.

    Returns:
        The requests, in file and line order.

    Raises:
        TraceFileError: naming the file and line that is not an OTLP/JSON trace request.
        OSError: a file cannot be opened.
    """
    out = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        out.extend(_parse_file(str(path), text))
    return out


def _parse_file(path: str, text: str) -> list[dict]:
    stripped = text.strip()
    if stripped.startswith("{") and "\n" in stripped:
        try:   # one pretty-printed document (what `trace export --format otlp-json` writes)
            return [_checked(json.loads(stripped), path, 1)]
        except json.JSONDecodeError:
            pass
    docs = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as e:
            raise TraceFileError(f"{path}:{number}: not JSON ({e.msg})") from None
        docs.append(_checked(doc, path, number))
    return docs


def _checked(doc, path: str, number: int) -> dict:
    if not isinstance(doc, dict) or not isinstance(doc.get("resourceSpans", []), list) or \
            "resourceSpans" not in doc:
        raise TraceFileError(f"{path}:{number}: not an OTLP/JSON trace request (expected an object "
                             f"with \"resourceSpans\"; write span files with KERNFLOW_TRACE=file:PATH)")
    try:
        return normalize_request(doc)
    except (TypeError, ValueError, AttributeError) as e:
        raise TraceFileError(f"{path}:{number}: malformed OTLP/JSON span: {e}") from None


def normalize_request(doc: dict) -> dict:
    """Rewrites a request in place to the OTLP/JSON form: hex ids, integer enums; returns it.

    Raises:
        ValueError: an id is neither hex nor base64 of the right length, or an enum name is unknown.
    """
    for rs in doc.get("resourceSpans") or []:
        for ss in rs.get("scopeSpans") or []:
            for span in ss.get("spans") or []:
                _normalize_span(span)
    return doc


def _normalize_span(span: dict) -> None:
    _fix_ids(span)
    for link in span.get("links") or []:
        _fix_ids(link)
    if "kind" in span:
        span["kind"] = _enum(span["kind"], "SPAN_KIND_", SPAN_KINDS)
    status = span.get("status")
    if status and "code" in status:
        status["code"] = _enum(status["code"], "STATUS_CODE_", STATUS_CODES)


def _fix_ids(obj: dict) -> None:
    for key, size in (("traceId", 16), ("spanId", 8), ("parentSpanId", 8)):
        if obj.get(key):
            obj[key] = _hex_id(obj[key], size)


def _hex_id(value: str, size: int) -> str:
    if len(value) == 2 * size:
        try:
            bytes.fromhex(value)
            return value.lower()
        except ValueError:
            pass
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != size:
        raise ValueError(f"id {value!r} is neither {2 * size} hex digits nor base64 of {size} bytes")
    return raw.hex()


def _enum(value, prefix: str, names: tuple) -> int:
    if isinstance(value, int):
        return value
    name = str(value).removeprefix(prefix)
    if name not in names:
        raise ValueError(f"unknown enum value {value!r} (expected {prefix}{'|'.join(names)} or a number)")
    return names.index(name)


def any_value(v: dict):
    """The Python value of an OTLP ``AnyValue`` (bytes stay base64 text)."""
    for key, conv in (("stringValue", str), ("boolValue", bool), ("intValue", int),
                      ("doubleValue", float), ("bytesValue", str)):
        if key in v:
            return conv(v[key])
    if "arrayValue" in v:
        return [any_value(x) for x in (v["arrayValue"] or {}).get("values") or []]
    if "kvlistValue" in v:
        return attributes((v["kvlistValue"] or {}).get("values"))
    return None


def attributes(kvs) -> dict:
    """``[{"key": k, "value": AnyValue}, ...]`` as a dict."""
    return {kv["key"]: any_value(kv.get("value") or {}) for kv in kvs or []}


# ---------------------------------------------------------------------------- span records
def span_records(requests) -> list[dict]:
    """Flattens requests into one record per span, sorted by start time.

    A record has ``name, trace_id, span_id, parent_span_id`` (None for a root), ``parent_is_remote``
    (None when unknown), ``kind`` and ``status`` (names: "SERVER", "ERROR", ...), ``status_message``,
    ``start_ns, end_ns, attributes, events`` (``[{"name", "time_ns", "attributes"}]``), ``scope``,
    ``resource`` (the resource attributes), ``service`` (``service.name``) and ``pid``
    (``process.pid``).
    """
    out = []
    for req in requests:
        for rs in req.get("resourceSpans") or []:
            resource = attributes((rs.get("resource") or {}).get("attributes"))
            for ss in rs.get("scopeSpans") or []:
                scope = (ss.get("scope") or {}).get("name", "")
                out.extend(_record(span, resource, scope) for span in ss.get("spans") or [])
    out.sort(key=lambda r: (r["start_ns"], -r["end_ns"]))
    return out


def _record(span: dict, resource: dict, scope: str) -> dict:
    flags = int(span.get("flags") or 0)
    status = span.get("status") or {}
    kind, code = int(span.get("kind") or 0), int(status.get("code") or 0)
    return {
        "name": span.get("name", ""),
        "trace_id": span.get("traceId", ""),
        "span_id": span.get("spanId", ""),
        "parent_span_id": span.get("parentSpanId") or None,
        "parent_is_remote": bool(flags & _FLAG_IS_REMOTE) if flags & _FLAG_HAS_IS_REMOTE else None,
        "kind": SPAN_KINDS[kind] if kind < len(SPAN_KINDS) else str(kind),
        "status": STATUS_CODES[code] if code < len(STATUS_CODES) else str(code),
        "status_message": status.get("message", ""),
        "start_ns": int(span.get("startTimeUnixNano") or 0),
        "end_ns": int(span.get("endTimeUnixNano") or 0),
        "attributes": attributes(span.get("attributes")),
        "events": [{"name": e.get("name", ""), "time_ns": int(e.get("timeUnixNano") or 0),
                    "attributes": attributes(e.get("attributes"))} for e in span.get("events") or []],
        "scope": scope,
        "resource": resource,
        "service": resource.get("service.name"),
        "pid": resource.get("process.pid"),
    }


def read_spans(paths) -> list[dict]:
    """`span_records` of the span files at `paths` (see `read_requests`)."""
    return span_records(read_requests(paths))


def select_traces(requests, trace_ids) -> list[dict]:
    """The requests reduced to the spans of the traces whose id starts with one of `trace_ids`.

    Raises:
        ValueError: a prefix matches no trace, or more than one.
    """
    known = sorted({s.get("traceId") for r in requests for rs in r.get("resourceSpans") or []
                    for ss in rs.get("scopeSpans") or [] for s in ss.get("spans") or []})
    wanted = set()
    for prefix in trace_ids:
        hits = [t for t in known if t.startswith(prefix.lower())]
        if len(hits) != 1:
            what = "no trace" if not hits else f"{len(hits)} traces ({', '.join(hits[:4])})"
            raise ValueError(f"trace id {prefix!r} matches {what}")
        wanted.add(hits[0])
    out = []
    for req in requests:
        rss = []
        for rs in req.get("resourceSpans") or []:
            sss = [dict(ss, spans=[s for s in ss.get("spans") or [] if s.get("traceId") in wanted])
                   for ss in rs.get("scopeSpans") or []]
            sss = [ss for ss in sss if ss["spans"]]
            if sss:
                rss.append(dict(rs, scopeSpans=sss))
        if rss:
            out.append({"resourceSpans": rss})
    return out


# ---------------------------------------------------------------------------- OTLP/JSON
def to_otlp_json(requests) -> dict:
    """Merges requests into one ``ExportTraceServiceRequest`` (OTLP/JSON), one entry per resource.

    Spans of equal resources (the lines of one process) and equal scopes are grouped together;
    everything else is kept as read.
    """
    resources: dict[str, dict] = {}
    scopes: dict[tuple, dict] = {}
    for req in requests:
        for rs in req.get("resourceSpans") or []:
            rkey = json.dumps([rs.get("resource") or {}, rs.get("schemaUrl", "")], sort_keys=True)
            if rkey not in resources:
                resources[rkey] = {k: v for k, v in rs.items() if k != "scopeSpans"} | {"scopeSpans": []}
            for ss in rs.get("scopeSpans") or []:
                skey = (rkey, json.dumps([ss.get("scope") or {}, ss.get("schemaUrl", "")], sort_keys=True))
                if skey not in scopes:
                    scopes[skey] = {k: v for k, v in ss.items() if k != "spans"} | {"spans": []}
                    resources[rkey]["scopeSpans"].append(scopes[skey])
                scopes[skey]["spans"].extend(ss.get("spans") or [])
    return {"resourceSpans": list(resources.values())}


# ---------------------------------------------------------------------------- Chrome trace format
def to_chrome(records) -> dict:
    """The Chrome trace-event JSON of span records (see `span_records`).

    Each process (distinct resource) is one Chrome process named after its service and task; its
    spans are complete events on lanes (threads) where every span nests in the one below it, so
    concurrent spans (RunGraph on two tasks at once) get lanes of their own. Timestamps are
    microseconds since the first span (``otherData.start_unix_ns``).
    """
    by_id = {r["span_id"]: r for r in records}
    records = sorted(records, key=lambda r: (r["start_ns"], -r["end_ns"], _depth(r, by_id)))
    if not records:
        return {"traceEvents": [], "displayTimeUnit": "ms", "otherData": {}}
    t0 = records[0]["start_ns"]
    procs = _processes(records)
    lanes = _lanes(records, procs)
    events = _metadata(records, procs, lanes)
    for r in records:
        events.append(_complete_event(r, procs, lanes, t0))
        events.extend(_instants(r, procs, lanes, t0))
    events.extend(_flows(records, procs, lanes, t0))
    traces = sorted({r["trace_id"] for r in records})
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"source": "kernflow trace export", "start_unix_ns": str(t0),
                          "trace_ids": ", ".join(traces)}}


def _depth(record: dict, by_id: dict) -> int:
    depth, parent = 0, record["parent_span_id"]
    while parent in by_id and depth < 256:
        depth, parent = depth + 1, by_id[parent]["parent_span_id"]
    return depth


def _process_key(record: dict) -> str:
    return json.dumps(record["resource"], sort_keys=True, default=str)


def _processes(records) -> dict[str, dict]:
    """``{process key: {"pid", "name"}}``, numbered by first span (client, master, workers...)."""
    procs: dict[str, dict] = {}
    for r in records:
        key = _process_key(r)
        if key not in procs:
            res = r["resource"]
            name = " ".join(str(p) for p in (res.get("service.name") or "unknown_service",
                                             res.get("kernflow.task")) if p)
            if res.get("process.pid") is not None:
                name += f" (pid {res['process.pid']})"
            procs[key] = {"pid": len(procs) + 1, "name": name}
    return procs


def _lanes(records, procs) -> dict[str, int]:
    """``{span_id: tid}``: per process, each span on the lane of its parent when it nests there.

    A span only ever sits inside its own ancestors, so concurrent siblings (RunGraph on two tasks)
    take separate lanes even when one happens to lie within the other's time.
    """
    by_id = {r["span_id"]: r for r in records}
    stacks: dict[str, list[list[dict]]] = {key: [] for key in procs}
    lane_of: dict[str, tuple[str, int]] = {}
    for r in records:
        key = _process_key(r)
        lanes = stacks[key]
        parent_key, parent_lane = lane_of.get(r["parent_span_id"], (None, None))
        order = ([parent_lane] if parent_key == key else []) + list(range(len(lanes)))
        ancestors = _ancestors(r, by_id)
        lane = next((i for i in order if _fits(lanes[i], r, ancestors)), None)
        if lane is None:
            lanes.append([])
            lane = len(lanes) - 1
        lanes[lane].append(r)
        lane_of[r["span_id"]] = (key, lane)
    return {span_id: lane + 1 for span_id, (_, lane) in lane_of.items()}


def _ancestors(r: dict, by_id: dict) -> set[str]:
    out, parent = set(), r["parent_span_id"]
    while parent in by_id and parent not in out:
        out.add(parent)
        parent = by_id[parent]["parent_span_id"]
    return out


def _fits(stack: list[dict], r: dict, ancestors: set[str]) -> bool:
    """Whether `r` can go on a lane: it is empty, or its innermost open span is an ancestor of `r`
    that encloses it. Pops the spans that ended before `r` starts (records come in start order)."""
    while stack and stack[-1]["end_ns"] <= r["start_ns"]:
        stack.pop()
    return not stack or (stack[-1]["span_id"] in ancestors and stack[-1]["end_ns"] >= r["end_ns"])


def _metadata(records, procs, lanes) -> list[dict]:
    events = []
    for p in procs.values():
        events.append({"ph": "M", "name": "process_name", "pid": p["pid"], "tid": 0,
                       "args": {"name": p["name"]}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": p["pid"], "tid": 0,
                       "args": {"sort_index": p["pid"]}})
    threads = sorted({(w["pid"], w["tid"]) for w in (_where(r, procs, lanes) for r in records)})
    events.extend({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                   "args": {"name": f"spans {tid}"}} for pid, tid in threads)
    return events


def _us(ns: int) -> float:
    return round(ns / 1000.0, 3)


def _where(r: dict, procs, lanes) -> dict:
    return {"pid": procs[_process_key(r)]["pid"], "tid": lanes[r["span_id"]]}


def _complete_event(r: dict, procs, lanes, t0: int) -> dict:
    args = {"trace_id": r["trace_id"], "span_id": r["span_id"], "kind": r["kind"]}
    if r["parent_span_id"]:
        args["parent_span_id"] = r["parent_span_id"]
    if r["status"] != "UNSET":
        args["status"] = r["status"] + (f": {r['status_message']}" if r["status_message"] else "")
    args.update(r["attributes"])
    return {"ph": "X", "name": r["name"], "cat": r["scope"] or "span", "ts": _us(r["start_ns"] - t0),
            "dur": _us(max(r["end_ns"] - r["start_ns"], 0)), **_where(r, procs, lanes), "args": args}


def _instants(r: dict, procs, lanes, t0: int) -> list[dict]:
    return [{"ph": "i", "s": "t", "name": e["name"], "cat": "event", "ts": _us(e["time_ns"] - t0),
             **_where(r, procs, lanes), "args": e["attributes"]} for e in r["events"]]


def _flows(records, procs, lanes, t0: int) -> list[dict]:
    """A flow arrow ("s" in the parent, "f" bound to the child) per parent/child pair across processes."""
    by_id = {r["span_id"]: r for r in records}
    events = []
    for r in records:
        parent = by_id.get(r["parent_span_id"])
        if parent is None or _process_key(parent) == _process_key(r):
            continue
        flow_id = len(events) // 2 + 1
        at = min(max(r["start_ns"], parent["start_ns"]), parent["end_ns"])
        common = {"name": f"{parent['name']} -> {r['name']}", "cat": "rpc", "id": flow_id}
        events.append({"ph": "s", "ts": _us(at - t0), **_where(parent, procs, lanes), **common})
        events.append({"ph": "f", "bp": "e", "ts": _us(r["start_ns"] - t0), **_where(r, procs, lanes),
                       **common})
    return events


# ---------------------------------------------------------------------------- summaries
def summarize_traces(records) -> list[dict]:
    """One summary per trace, in start order: ``trace_id, root, start_ns, duration_ns, spans, services``.

    ``root`` is the name of the earliest span whose parent is not in the records.
    """
    ids = {r["span_id"] for r in records}
    out: dict[str, dict] = {}
    for r in sorted(records, key=lambda r: r["start_ns"]):
        t = out.setdefault(r["trace_id"], {"trace_id": r["trace_id"], "root": None,
                                           "start_ns": r["start_ns"], "end_ns": r["end_ns"],
                                           "spans": 0, "services": []})
        t["spans"] += 1
        t["end_ns"] = max(t["end_ns"], r["end_ns"])
        if t["root"] is None and r["parent_span_id"] not in ids:
            t["root"] = r["name"]
        if r["service"] and r["service"] not in t["services"]:
            t["services"].append(r["service"])
    return [dict(t, duration_ns=t.pop("end_ns") - t["start_ns"]) for t in out.values()]
