"""tools/sim_sync_replicas.py: simulated synchronous replicas with backup workers (the real
SyncReplicasOptimizer graph in one embedded session, workers as threads)."""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

TOOL = Path(__file__).resolve().parents[1] / "tools" / "sim_sync_replicas.py"

# Stragglers (15% of worker steps take >= 3x longer) that 4 backups for 8 workers mostly hide: the
# expected step time drops by about half, so the mean step times compare with a wide margin. 25 ms
# of compute keeps that margin above what 12 threads' Python costs on a loaded 2-core machine (with
# 10 ms, tests running beside it in another xdist worker once made the backups' steps slower).
ARGS = ["--workers", "8", "--backups", "0", "4", "--steps", "20", "--warmup", "3", "--base-ms", "25",
        "--jitter", "0.1", "--straggler-prob", "0.15", "--straggler-scale", "3", "--straggler-alpha", "3"]


@pytest.fixture(scope="module")
def sim():
    spec = importlib.util.spec_from_file_location("sim_sync_replicas", TOOL)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module          # dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


@pytest.fixture(scope="module")
def result(sim):
    """main()'s return value and its stdout, parsed."""
    import contextlib
    import io
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        ret = sim.main(ARGS)
    return ret, json.loads(out.getvalue())


def test_json_output_and_the_points(result):
    ret, printed = result
    assert printed == ret
    assert printed["compute_times"] == {"base_ms": 25.0, "jitter": 0.1, "straggler_prob": 0.15,
                                        "straggler_scale": 3.0, "straggler_alpha": 3.0}
    assert printed["steps"] == 20 and printed["warmup"] == 3
    p0, p4 = printed["points"]
    assert (p0["n"], p0["b"], p4["n"], p4["b"]) == (8, 0, 8, 4)
    for p in (p0, p4):
        assert p["steps_measured"] == 20 and p["warmup_steps"] >= 3 and not p["timed_out"]
        assert set(p["step_ms"]) == {"mean", "median", "p90"} and set(p["ideal_ms"]) == {"mean", "median"}
        assert 0 < p["step_ms"]["median"] <= p["step_ms"]["p90"]
        assert "threads_cancelled_at_close" not in p           # every thread was released
    # Without backups every step waits for all 8 gradients and none is stale.
    assert p0["dropped"] == 0 and p0["speedup"] == p0["normalized_speedup"] == 1.0
    assert p0["ideal_normalized_speedup"] == 1.0
    # With 4 backups the late gradients are dropped by the real accumulator, about 4 a step.
    assert p4["dropped"] > 0 and p4["worker_steps_per_step"] > 8
    assert p4["normalized_speedup"] == pytest.approx(p4["speedup"] * 8 / 12, abs=2e-3)
    assert not [t for t in threading.enumerate() if t.name.startswith("sim-")]


def test_backups_shorten_the_step_under_a_heavy_tail(result):
    p0, p4 = result[0]["points"]
    assert p4["ideal_ms"]["mean"] < 0.6 * p0["ideal_ms"]["mean"]     # Monte Carlo, seeded
    assert p4["step_ms"]["mean"] < p0["step_ms"]["mean"]


def test_compute_times_and_the_ideal(sim):
    times = sim.ComputeTimes(base_ms=20, jitter=0.2, straggler_prob=0.1, straggler_scale=2,
                             straggler_alpha=3)
    draws = times.draw(np.random.default_rng(0), 200_000)
    assert draws.min() > 0
    assert np.mean(draws) == pytest.approx(times.mean_s(), rel=0.02)
    fixed = sim.ComputeTimes(base_ms=20, jitter=0.0, straggler_prob=0.0)
    assert sim.ideal_step_ms(fixed, 5, 3, trials=100) == pytest.approx((20.0, 20.0))
    # The N-th smallest of N + b draws falls as b grows.
    ideal = [sim.ideal_step_ms(times, 10, b, trials=4000)[0] for b in (0, 2, 6)]
    assert ideal[0] > ideal[1] > ideal[2]


def test_backup_grid_and_speedups(sim):
    assert sim.backups_for(50) == [0, 1, 2, 3, 4, 5, 6, 8, 10, 12, 15]
    assert sim.backups_for(200)[-1] == 60
    points = [{"n": 10, "b": b, "step_ms": {"median": t}, "ideal_ms": {"median": t}}
              for b, t in ((0, 100.0), (2, 50.0))] + [{"n": 7, "b": 1, "step_ms": {"median": 1.0},
                                                       "ideal_ms": {"median": 1.0}}]
    sim.add_speedups(points)
    assert points[1]["speedup"] == 2.0 and points[1]["normalized_speedup"] == pytest.approx(2 * 10 / 12, 1e-3)
    assert points[2]["normalized_speedup"] is None                    # no b = 0 point for N = 7


def test_png_needs_matplotlib(sim, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)             # import matplotlib fails
    with pytest.raises(SystemExit, match="pip install matplotlib"):
        sim.main(["--png", "x.png", "--workers", "2"])


def test_plot(sim, result, tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "sim.png"
    sim.plot(result[0]["points"], str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
