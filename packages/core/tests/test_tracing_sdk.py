"""`tracing_sdk`: the SDK set-up of the command-line entry points (each case in a fresh process,
since a tracer provider can be installed only once per process)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from kernflow.core import trace_export, tracing_sdk


def _python(code: str, env_extra: dict, *args) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop(tracing_sdk.TRACE_ENV, None)
    env.update(env_extra)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], env=env,
                          capture_output=True, text=True, timeout=120)


def test_file_mode_writes_one_otlp_json_request_per_line(tmp_path):
    path = tmp_path / "spans-{pid}.jsonl"
    out = _python("""
        import os
        from kernflow.core import tracing_sdk
        assert tracing_sdk.configure_from_env(service_name="svc") == os.environ["KERNFLOW_TRACE"]
        import kernflow.core as kf
        g = kf.Graph()
        with g.as_default():
            x = kf.placeholder(kf.float32, [])
            y = x + 1.0
        with kf.Session(graph=g) as s:
            s.run(y, {x: 1.0})
            s.run(y, {x: 2.0})
        print(os.getpid())
    """, {"KERNFLOW_TRACE": f"file:{path}"})
    assert out.returncode == 0, out.stderr
    pid = int(out.stdout.split()[-1])
    lines = (tmp_path / f"spans-{pid}.jsonl").read_text().splitlines()
    assert len(lines) == 2 and all("resourceSpans" in json.loads(line) for line in lines)   # OTLP/JSON
    spans = trace_export.read_spans([tmp_path / f"spans-{pid}.jsonl"])
    assert [s["name"] for s in spans] == ["Session.run", "Session.run"]
    assert spans[0]["trace_id"] != spans[1]["trace_id"] and spans[0]["parent_span_id"] is None
    assert spans[0]["service"] == "svc" and spans[0]["attributes"]["kernflow.fetch_count"] == 1
    assert len(spans[0]["trace_id"]) == 32 and len(spans[0]["span_id"]) == 16
    assert spans[0]["end_ns"] >= spans[0]["start_ns"] and spans[0]["pid"] == pid


def test_none_and_unset_install_nothing():
    out = _python("""
        from opentelemetry import trace
        from kernflow.core import tracing_sdk
        assert tracing_sdk.configure_from_env() is None
        assert tracing_sdk.configure_from_env(mode="none") is None
        assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    """, {})
    assert out.returncode == 0, out.stderr


def test_console_mode_writes_to_stderr_not_stdout():
    out = _python("""
        from opentelemetry import trace
        from kernflow.core import tracing_sdk
        tracing_sdk.configure_from_env()
        with trace.get_tracer("t").start_as_current_span("hello-span") as s:
            s.set_attributes({"kernflow.step_id": 3, "note": "a\\nb"})
        print("only this on stdout")
    """, {"KERNFLOW_TRACE": "console"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "only this on stdout"
    (line,) = out.stderr.splitlines()   # one line per span, not a JSON dump
    assert re.fullmatch(r"span hello-span \d+\.\d{3} ms kernflow trace=[0-9a-f]{32} "
                        r"span=[0-9a-f]{16} kernflow\.step_id=3 note=a b", line), line


def test_unknown_mode_and_missing_otlp_exporter_are_clear_errors():
    with pytest.raises(tracing_sdk.TracingConfigError, match="unknown KERNFLOW_TRACE value 'jaeger'"):
        tracing_sdk.configure_from_env(env={"KERNFLOW_TRACE": "jaeger"})
    out = _python("""
        from kernflow.core import tracing_sdk
        try:
            tracing_sdk.configure_from_env()
        except tracing_sdk.TracingConfigError as e:
            print("ERR", e)
        else:
            print("CONFIGURED")
    """, {"KERNFLOW_TRACE": "otlp"})
    assert out.returncode == 0, out.stderr
    try:
        import opentelemetry.exporter.otlp  # noqa: F401
    except ImportError:
        assert "ERR" in out.stdout and "pip install opentelemetry-exporter-otlp" in out.stdout
    else:
        assert "CONFIGURED" in out.stdout


def test_cli_trace_flag_and_errors():
    env = {"KERNFLOW_TRACE": "jaeger"}
    out = _python("import sys; from kernflow.core.cli import main; sys.exit(main(sys.argv[1:]))", env,
                  "demo", "--help")
    assert out.returncode == 0   # --help exits before tracing is configured
    out = _python("import sys; from kernflow.core.cli import main; sys.exit(main(sys.argv[1:]))", env,
                  "--trace", "bogus", "demo")
    assert out.returncode == 2 and "invalid mode 'bogus'" in out.stderr
    out = _python("""
        import sys
        from kernflow.core import cli
        from kernflow.core.plugins import registries
        registries().commands.register("tracecheck", "test", lambda p: None,
            lambda a: print(type(__import__("opentelemetry").trace.get_tracer_provider()).__name__))
        sys.exit(cli.main(sys.argv[1:]))
    """, env, "--trace", "console", "tracecheck")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "TracerProvider"   # the flag wins over the environment
    out = _python("""
        import sys
        from kernflow.core import cli
        from kernflow.core.plugins import registries
        registries().commands.register("tracecheck", "test", lambda p: None, lambda a: 0)
        sys.exit(cli.main(sys.argv[1:]))
    """, env, "tracecheck")
    assert out.returncode == 2 and "unknown KERNFLOW_TRACE value 'jaeger'" in out.stderr
