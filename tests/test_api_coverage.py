"""tools/api_coverage.py: the TF1 API coverage must not fall below the committed baseline."""

from __future__ import annotations

import importlib.util
import json
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join(ROOT, "tools", "api_coverage.py")
BASELINE = os.path.join(ROOT, "tools", "api_coverage_baseline.json")


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location("api_coverage", TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_coverage_has_not_regressed(tool, capsys):
    status = tool.main(["--check", BASELINE])
    err = capsys.readouterr().err
    assert status == 0, f"TF1 API coverage fell below {BASELINE}:\n{err}"


def test_check_fails_when_a_namespace_lost_names(tool, tmp_path, capsys):
    import kernflow.core as kf
    baseline = tool.summary(tool.coverage(kf, tool.load_names(tool.DEFAULT_NAMES)))
    baseline["nn"]["covered"] += 1
    raised = tmp_path / "baseline.json"
    raised.write_text(json.dumps(baseline))
    assert tool.main(["--check", str(raised)]) == 1
    assert "nn: covered" in capsys.readouterr().err


def test_placeholders_and_missing_namespaces_do_not_count(tool):
    class Stub:
        _kernflow_unsupported = True

    class Fake:
        real = staticmethod(len)
        stub = Stub()

    cov = tool.coverage(Fake, {"tf": ["real", "stub", "absent", "compat"], "nosuch": ["x"]})
    assert cov["tf"]["covered"] == 1 and cov["tf"]["missing"] == ["stub", "absent", "compat"]
    assert cov["tf"]["excluded"] == 1
    assert cov["nosuch"] == {"total": 1, "covered": 0, "excluded": 0, "covered_non_excluded": 0,
                             "missing": ["x"]}
