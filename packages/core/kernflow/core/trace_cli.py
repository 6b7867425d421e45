"""`kernflow trace export|list`: span files (``--trace file:PATH``) for trace viewers.

::

    kernflow trace list spans/*.jsonl
    kernflow trace export --format chrome -o step.json [--trace-id 4bf92f35] spans/*.jsonl
    kernflow trace export --format otlp-json -o step.otlp.json spans/*.jsonl

``chrome`` opens in Perfetto (ui.perfetto.dev) or ``chrome://tracing``; ``otlp-json`` is one
OTLP/HTTP JSON request: ``curl -H 'Content-Type: application/json' --data @step.otlp.json
http://localhost:4318/v1/traces`` loads it into Jaeger (or any OTLP receiver). See
`kernflow.core.trace_export`.
"""

from __future__ import annotations

import json
import sys
import time

__all__ = ["configure", "run"]

FORMATS = ("chrome", "otlp-json")


def configure(parser) -> None:
    """Adds the `kernflow trace` actions to an argparse parser."""
    sub = parser.add_subparsers(dest="trace_action", metavar="ACTION")
    export = sub.add_parser("export", help="convert span files to Chrome trace JSON or OTLP/JSON",
                            description="Convert span files (OTLP/JSON lines written with --trace "
                                        "file:PATH, from any number of processes) into one document.")
    export.add_argument("--format", choices=FORMATS, required=True,
                        help="chrome: Chrome trace-event JSON (Perfetto, chrome://tracing); otlp-json: "
                             "one OTLP/JSON ExportTraceServiceRequest (POST to /v1/traces)")
    export.add_argument("-o", "--output", default="-", metavar="OUT", help="output file (default: stdout)")
    export.add_argument("--trace-id", action="append", default=[], metavar="ID",
                        help="keep only this trace (a unique prefix of its id is enough); repeatable")
    export.add_argument("files", nargs="+", metavar="FILE", help="span files")
    lst = sub.add_parser("list", help="list the traces in span files",
                         description="One line per trace: id, start, duration, spans, root span, services.")
    lst.add_argument("files", nargs="+", metavar="FILE", help="span files")


def run(args) -> int:
    """Runs `kernflow trace ACTION`; returns the exit status."""
    action = getattr(args, "trace_action", None)
    if action not in ("export", "list"):
        print("usage: kernflow trace {export,list} ... (see kernflow trace -h)", file=sys.stderr)
        return 2
    from kernflow.core import trace_export
    try:
        requests = trace_export.read_requests(args.files)
        if action == "export" and args.trace_id:
            requests = trace_export.select_traces(requests, args.trace_id)
    except (OSError, ValueError) as e:   # TraceFileError is a ValueError
        print(f"kernflow trace {action}: {_describe(e)}", file=sys.stderr)
        return 1
    records = trace_export.span_records(requests)
    if not records:
        print(f"kernflow trace {action}: no spans in {', '.join(args.files)}", file=sys.stderr)
        return 1
    if action == "list":
        return _list(trace_export.summarize_traces(records))
    doc = trace_export.to_chrome(records) if args.format == "chrome" else trace_export.to_otlp_json(requests)
    return _write(doc, args.output, len(records))


def _describe(e: Exception) -> str:
    if isinstance(e, OSError) and e.filename:
        return f"cannot read {e.filename}: {e.strerror}"
    return str(e)


def _list(traces) -> int:
    for t in traces:
        start = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t["start_ns"] / 1e9))
        print(f"{t['trace_id']}  {start}  {t['duration_ns'] / 1e6:10.3f} ms  {t['spans']:5d} spans  "
              f"{t['root'] or '?'}  [{', '.join(t['services'])}]")
    return 0


def _write(doc: dict, output: str, num_spans: int) -> int:
    text = json.dumps(doc, indent=1 if output != "-" else None, separators=(",", ":"))
    if output == "-":
        sys.stdout.write(text + "\n")
        return 0
    try:
        with open(output, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    except OSError as e:
        print(f"kernflow trace export: cannot write {output}: {e.strerror}", file=sys.stderr)
        return 1
    print(f"wrote {num_spans} spans to {output}", file=sys.stderr)
    return 0
