"""GPU benchmark: kernflow on the GPU side by side with hand-written cupy and PyTorch eager, in one run.

Workloads (every contender timed in interleaved rounds; medians of per-step times and of per-round
ratios to the hand-written cupy floor):
  mlp_small  MLP 64-128-128-10 (ReLU, mean sparse softmax cross entropy, SGD lr 0.05), batch 512,
             digits data; goals: kernflow <= 1.3x cupy, and PyTorch eager >= 1.5x kernflow
  mlp_large  MLP 1024-4096-4096-1000, batch 4096, synthetic data; goal: kernflow <= 1.05x cupy
  chain      1,000 dependent adds ``y = y + 1.0`` on a [1] float32 tensor: kernflow runs the chain
             as one graph (elementwise fusion on, and off), PyTorch and cupy as a Python loop;
             goal: kernflow's time per op <= PyTorch's / 10

All MLP contenders start from identical weights and see identical batches, already on the GPU; each
step fetches the scalar loss to the host, so every contender synchronizes once per step. The final
losses are compared (a check of the benchmark itself): one line per contender on stderr, and
``loss_check`` in the JSON printed on stdout.

Usage: python tools/bench_gpu.py [--workloads mlp_small mlp_large chain] [--steps N] [--rounds 5]
       python tools/bench_gpu.py --device-check
Exits with status 2 and a message when cupy or a CUDA GPU is missing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

LR = 0.05
WORKLOADS = {
    "mlp_small": {"sizes": (64, 128, 128, 10), "batch": 512, "data": "digits", "n_batches": 16,
                  "steps": 200, "warmup": 20},
    "mlp_large": {"sizes": (1024, 4096, 4096, 1000), "batch": 4096, "data": "synthetic",
                  "n_batches": 4, "steps": 20, "warmup": 5},
    "chain": {"length": 1000, "steps": 20, "warmup": 3},
}
# --cpu-smoke: the same code paths on numpy and /device:CPU:0, sized to finish in seconds.
SMOKE = {
    "mlp_small": {"batch": 64, "steps": 3, "warmup": 2},
    "mlp_large": {"sizes": (64, 256, 256, 100), "batch": 128, "steps": 2, "warmup": 1},
    "chain": {"steps": 2, "warmup": 1},
}
GOALS = {"mlp_small.kernflow_over_cupy_max": 1.3, "mlp_small.pytorch_over_kernflow_min": 1.5,
         "mlp_large.kernflow_over_cupy_max": 1.05, "chain.pytorch_over_kernflow_min": 10.0}
LOSS_RTOL = 1e-3
GPU_PLUGIN_HINT = ('install the GPU plugin: pip install "packages/kernels-gpu[cuda13]" '
                   '(or "[cuda12]")')


class Unavailable(Exception):
    """A contender cannot run here; the message says why (it goes into the JSON as a note)."""


# ---------------------------------------------------------------------------- shared numpy helpers
def init_params(sizes, seed=0):
    """He-initialised float32 weights [a, b] and zero biases [b] for consecutive layer sizes.

    Args:
        sizes: layer widths, input first.
        seed: RandomState seed (every contender of a run uses the same one).

    Returns:
        (list of weight arrays, list of bias arrays).
    """
    rng = np.random.RandomState(seed)
    ws = [(rng.randn(a, b) * np.sqrt(2.0 / a)).astype(np.float32) for a, b in zip(sizes[:-1], sizes[1:])]
    bs = [np.zeros(b, np.float32) for b in sizes[1:]]
    return ws, bs


def digits_batches(batch, n_batches=16, seed=0):
    """`n_batches` batches of scikit-learn's digits (x scaled to [0, 1] float32, y int64)."""
    from sklearn.datasets import load_digits
    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int64)
    rng = np.random.RandomState(seed)
    out = []
    for _ in range(n_batches):
        idx = rng.randint(0, len(x), size=batch)
        out.append((x[idx], y[idx]))
    return out


def synthetic_batches(n_in, n_classes, batch, n_batches=4, seed=0):
    """`n_batches` batches of standard normal float32 x [batch, n_in] and int64 labels in [0, n_classes)."""
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((batch, n_in), dtype=np.float32),
             rng.integers(0, n_classes, size=batch, dtype=np.int64)) for _ in range(n_batches)]


def workload_batches(cfg):
    """The host batches of an MLP workload config (digits or synthetic)."""
    if cfg["data"] == "digits":
        return digits_batches(cfg["batch"], cfg["n_batches"])
    sizes = cfg["sizes"]
    return synthetic_batches(sizes[0], sizes[-1], cfg["batch"], cfg["n_batches"])


# ---------------------------------------------------------------------------- hand-written steps
class _NumpyOps:
    """The fused pieces of the hand-written step, in numpy (the --cpu-smoke floor)."""

    xp = np

    @staticmethod
    def bias_relu(b, z):
        z += b
        np.maximum(z, 0, out=z)

    @staticmethod
    def bias(b, z):
        z += b

    @staticmethod
    def relu_grad(h, g):
        np.multiply(g, h > 0, out=g)

    @staticmethod
    def sgd(grad, lr, w):
        w -= lr * grad

    @staticmethod
    def xent(logits, y):
        """Returns (mean loss as a device scalar, gradient of the mean loss w.r.t. the logits)."""
        n, c = logits.shape
        m = logits.max(axis=1, keepdims=True)
        e = np.exp(logits - m)
        s = e.sum(axis=1, keepdims=True)
        loss = np.mean(np.log(s[:, 0]) + m[:, 0] - logits[np.arange(n), y])
        g = e / s
        g[np.arange(n), y] -= 1
        g *= np.float32(1.0 / n)
        return loss, g


class _CupyOps:
    """The same pieces as generated cupy kernels: each is one launch, updates in place."""

    def __init__(self):
        import cupy as cp
        self.xp = cp
        self.bias_relu = cp.ElementwiseKernel(
            "T b", "T z", "T v = z + b; z = v > (T)0 ? v : (T)0", "kfbench_bias_relu")
        self.bias = cp.ElementwiseKernel("T b", "T z", "z += b", "kfbench_bias")
        # The mask comes from the ReLU's output h: h > 0 exactly where its input was > 0.
        self.relu_grad = cp.ElementwiseKernel(
            "T h", "T g", "if (!(h > (T)0)) g = (T)0", "kfbench_relu_grad")
        self.sgd = cp.ElementwiseKernel("T grad, T lr", "T w", "w -= lr * grad", "kfbench_sgd")
        # Few classes: one thread per row does max, sum of exp, the row's loss and its gradient.
        self._xent_rows = cp.ElementwiseKernel(
            "raw T z, raw L y, int32 c, T inv_n", "T r, raw T g",
            """
            const ptrdiff_t row = (ptrdiff_t)i * c;
            T m = z[row];
            for (int k = 1; k < c; ++k) { T v = z[row + k]; if (v > m) m = v; }
            T s = 0;
            for (int k = 0; k < c; ++k) s += exp(z[row + k] - m);
            const int t = (int)y[i];
            r = (log(s) + m - z[row + t]) * inv_n;
            const T inv_s = (T)1 / s;
            for (int k = 0; k < c; ++k)
                g[row + k] = (exp(z[row + k] - m) * inv_s - (k == t ? (T)1 : (T)0)) * inv_n;
            """, "kfbench_xent_rows")
        # Many classes: whole-array kernels (a thread per row would leave the GPU mostly idle).
        self._exp_sub = cp.ElementwiseKernel("T z, T m", "T e", "e = exp(z - m)", "kfbench_exp_sub")
        self._row_loss = cp.ElementwiseKernel(
            "T s, T m, raw T z, raw L y, int32 c, T inv_n", "T r",
            "r = (log(s) + m - z[i * c + y[i]]) * inv_n", "kfbench_row_loss")
        self._xent_grad = cp.ElementwiseKernel(
            "T e, T s, raw L y, int32 c, T inv_n", "T g",
            "g = (e / s - (T)((L)(i % c) == y[i / c])) * inv_n", "kfbench_xent_grad")

    def xent(self, logits, y, rows_max=128):
        """Returns (mean loss as a device scalar, gradient of the mean loss w.r.t. the logits)."""
        cp = self.xp
        n, c = logits.shape
        inv_n = np.float32(1.0 / n)
        if c <= rows_max:
            r = cp.empty(n, np.float32)
            g = cp.empty_like(logits)
            self._xent_rows(logits, y, np.int32(c), inv_n, r, g)
            return r.sum(), g
        m = logits.max(axis=1, keepdims=True)
        e = self._exp_sub(logits, m)
        s = e.sum(axis=1, keepdims=True)
        loss = self._row_loss(s, m, logits, y, np.int32(c), inv_n).sum()
        return loss, self._xent_grad(e, s, y, np.int32(c), inv_n)


def handwritten_step_fn(ops, sizes, batch):
    """One SGD step written directly against an array module (cupy on the GPU, numpy for the smoke).

    Parameters and their gradients are views into two flat buffers, so the SGD update of all of them
    is one in-place kernel; matmul outputs go to preallocated buffers; bias+ReLU and the ReLU
    gradient are single in-place kernels; the loss stays on the device until the step's end.

    Args:
        ops: `_CupyOps()` or `_NumpyOps`.
        sizes: layer widths.
        batch: the batch size of every step (buffers are sized for it).

    Returns:
        step(x, y) -> float loss.
    """
    xp = ops.xp
    ws0, bs0 = init_params(sizes)
    shapes = [a.shape for pair in zip(ws0, bs0) for a in pair]
    flat = xp.asarray(np.concatenate([a.ravel() for pair in zip(ws0, bs0) for a in pair]))
    grad = xp.empty_like(flat)

    def views(buf):
        out, at = [], 0
        for shape in shapes:
            size = int(np.prod(shape))
            out.append(buf[at:at + size].reshape(shape))
            at += size
        return out[0::2], out[1::2]
    ws, bs = views(flat)
    dws, dbs = views(grad)
    zs = [xp.empty((batch, b), np.float32) for b in sizes[1:]]
    gs = [xp.empty((batch, b), np.float32) for b in sizes[1:-1]]
    lr = np.float32(LR)
    last = len(ws) - 1

    def step(x, y):
        acts = [x]
        for i in range(len(ws)):
            xp.matmul(acts[i], ws[i], out=zs[i])
            (ops.bias_relu if i < last else ops.bias)(bs[i], zs[i])
            acts.append(zs[i])
        loss, g = ops.xent(zs[last], y)
        for i in range(last, -1, -1):
            xp.matmul(acts[i].T, g, out=dws[i])
            g.sum(axis=0, out=dbs[i])
            if i:
                g = xp.matmul(g, ws[i].T, out=gs[i - 1])
                ops.relu_grad(acts[i], g)
        ops.sgd(grad, lr, flat)
        return float(loss)
    return step


# ---------------------------------------------------------------------------- framework contenders
def torch_step_fn(sizes):
    """PyTorch eager on cuda: nn.Sequential of Linear/ReLU, F.cross_entropy, torch.optim.SGD."""
    try:
        import torch
    except ImportError as e:
        raise Unavailable(f"torch not installed ({e})")
    if not torch.cuda.is_available():
        raise Unavailable("torch sees no CUDA device")
    ws, bs = init_params(sizes)
    layers = []
    for i, (w, b) in enumerate(zip(ws, bs)):
        lin = torch.nn.Linear(w.shape[0], w.shape[1])
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(np.ascontiguousarray(w.T)))
            lin.bias.copy_(torch.from_numpy(b))
        layers.append(lin)
        if i < len(ws) - 1:
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    xent = torch.nn.functional.cross_entropy

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = xent(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()
    return step


def _kf():
    try:
        import kernflow.core as kf
    except ImportError as e:
        raise Unavailable(f"kernflow not importable ({e})")
    return kf


def require_kernflow_device(kf, device):
    """Raises Unavailable unless a kernflow session lists a device of `device`'s type."""
    dtype = device.rsplit(":", 2)[-2].upper()
    with kf.Session(graph=kf.Graph()) as probe:
        types = {d.device_type for d in probe.list_devices()}
    if dtype not in types:
        raise Unavailable(f"kernflow lists no {dtype} device (has {sorted(types)}); {GPU_PLUGIN_HINT}")


def fusion_config(kf, on):
    """Returns (ConfigProto, description): DEFAULT jit level (fuses on GPUs) or OFF.

    Falls back to the default config (and says so) where the proto has no ``global_jit_level``.
    """
    from kernflow.core.protobuf import config_pb2
    cfg = config_pb2.ConfigProto()
    if on:
        return cfg, "global_jit_level DEFAULT"
    opts = cfg.graph_options.optimizer_options
    off = getattr(config_pb2.OptimizerOptions, "OFF", None)
    if off is None or "global_jit_level" not in config_pb2.OptimizerOptions.DESCRIPTOR.fields_by_name:
        return cfg, "global_jit_level missing from OptimizerOptions: ran with the default config"
    opts.global_jit_level = off
    return cfg, "global_jit_level OFF"


def kernflow_step_fn(sizes, device, step_graphs=True):
    """kernflow: the MLP graph under `device`, GradientDescentOptimizer, one make_callable.

    Args:
        step_graphs: False builds the step with ``KERNFLOW_STEP_GRAPHS=0`` (launched kernel by
            kernel, never replayed as a CUDA graph).

    Returns:
        (step(x, y) -> float loss, session).
    """
    kf = _kf()
    require_kernflow_device(kf, device)
    ws, bs = init_params(sizes)
    g = kf.Graph()
    with g.as_default(), kf.device(device):
        x = kf.placeholder(kf.float32, [None, sizes[0]])
        y = kf.placeholder(kf.int64, [None])
        h = x
        for i, (w0, b0) in enumerate(zip(ws, bs)):
            h = kf.matmul(h, kf.Variable(w0)) + kf.Variable(b0)
            if i < len(ws) - 1:
                h = kf.nn.relu(h)
        loss = kf.reduce_mean(kf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=h))
        train = kf.train.GradientDescentOptimizer(LR).minimize(loss)
        init = kf.global_variables_initializer()
    sess = kf.Session(graph=g)
    sess.run(init)
    fn = sess.make_callable([train, loss], feed_list=[x, y])
    if step_graphs:
        return (lambda xb, yb: float(fn(xb, yb)[1])), sess
    built = []

    def step(xb, yb):
        if built:
            return float(fn(xb, yb)[1])
        old = os.environ.get("KERNFLOW_STEP_GRAPHS")
        os.environ["KERNFLOW_STEP_GRAPHS"] = "0"   # read when the first call builds the step
        try:
            return float(fn(xb, yb)[1])
        finally:
            built.append(True)
            if old is None:
                del os.environ["KERNFLOW_STEP_GRAPHS"]
            else:
                os.environ["KERNFLOW_STEP_GRAPHS"] = old
    return step, sess


def step_graph_status(sess):
    """How the session's steps run, counted over steps and feed signatures: "captured" (replayed as
    a CUDA graph), "eager", "warming up", or "no step graph" (not eligible, or turned off)."""
    counts = {}
    for st in getattr(sess._impl, "_steps", {}).values():
        for v in (st.replay.status.values() if getattr(st, "replay", None) else ["no step graph"]):
            counts[v] = counts.get(v, 0) + 1
    return counts


# ---------------------------------------------------------------------------- timing
class _Tracked:
    """Wraps a step function: counts steps and keeps the last loss."""

    def __init__(self, step):
        self.step, self.count, self.last = step, 0, None

    def run(self, batches, steps):
        t = time.perf_counter()
        for i in range(steps):
            xb, yb = batches[i % len(batches)]
            self.last = self.step(xb, yb)
        self.count += steps
        return (time.perf_counter() - t) / steps


def _warm_up(contenders, warm, skipped):
    """Runs `warm(name, contender)` for each; one that raises is dropped and noted in `skipped`."""
    for name in list(contenders):
        try:
            warm(name, contenders[name])
        except Exception as e:  # a contender's failure is a result to report, not a crash
            skipped[name] = f"failed during warm-up: {type(e).__name__}: {str(e).splitlines()[0][:300]}"
            del contenders[name]


def _interleaved(contenders, batches, steps, warmup, rounds, skipped):
    """Times each contender for `steps` steps per round, all back to back in every round.

    Returns:
        {name: [seconds per step, one per round]}.
    """
    _warm_up(contenders, lambda name, c: c.run(batches[name], warmup), skipped)
    times = {k: [] for k in contenders}
    for _ in range(rounds):
        for name, c in contenders.items():
            times[name].append(c.run(batches[name], steps))
    return times


def _summarise(times, floor, scale=1e6, unit="us"):
    row = {f"{k}_{unit}": round(statistics.median(v) * scale, 3) for k, v in times.items()}
    if floor in times:
        for k in times:
            if k != floor:
                row[f"{k}_over_{floor}"] = round(statistics.median(
                    a / b for a, b in zip(times[k], times[floor])), 4)
    return row


def _loss_check(workload, tracked, reference):
    losses = {k: c.last for k, c in tracked.items()}
    ref = losses[reference]
    diffs = {k: abs(v - ref) / max(abs(ref), 1e-12) for k, v in losses.items()}
    for k, c in tracked.items():
        tail = "(reference)" if k == reference else f"rel diff {diffs[k]:.2e} vs {reference}"
        print(f"{workload}: {k:9s} final loss {c.last:.6f} after {c.count} steps {tail}",
              file=sys.stderr, flush=True)
    worst = max(diffs.values())
    return {"steps": {k: c.count for k, c in tracked.items()}, "final_loss": losses,
            "reference": reference, "max_rel_diff": worst, "agree": bool(worst <= LOSS_RTOL)}


def bench_mlp(name, cfg, rounds, smoke):
    """Runs one MLP workload; returns its JSON section."""
    host = workload_batches(cfg)
    sizes, batch = cfg["sizes"], cfg["batch"]
    out = {"model": "-".join(map(str, sizes)), "batch": batch, "data": cfg["data"],
           "steps_per_round": cfg["steps"], "rounds": rounds, "skipped": {}}
    steps, batches, closers = {}, {}, []
    floor = "numpy" if smoke else "cupy"
    if smoke:
        steps["numpy"] = handwritten_step_fn(_NumpyOps, sizes, batch)
        batches["numpy"] = host
    else:
        import cupy as cp
        steps["cupy"] = handwritten_step_fn(_CupyOps(), sizes, batch)
        batches["cupy"] = [(cp.asarray(x), cp.asarray(y)) for x, y in host]
    sessions = {}
    for who, graphs in (("kernflow", True), ("kernflow_no_step_graphs", False)):
        try:
            fn, sess = kernflow_step_fn(sizes, "/device:CPU:0" if smoke else "/device:GPU:0", graphs)
            steps[who], batches[who] = fn, batches[floor]
            closers.append(sess.close)
            sessions[who] = sess
        except Unavailable as e:
            out["skipped"][who] = str(e)
        except Exception as e:  # e.g. an op without a GPU kernel: reported, the others still run
            out["skipped"][who] = f"failed to build: {type(e).__name__}: {str(e).splitlines()[0][:300]}"
    if not smoke:
        try:
            import torch
            steps["pytorch"] = torch_step_fn(sizes)
            batches["pytorch"] = [(torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()) for x, y in host]
        except (Unavailable, ImportError) as e:
            out["skipped"]["pytorch"] = str(e)
    tracked = {k: _Tracked(v) for k, v in steps.items()}
    try:
        times = _interleaved(tracked, batches, cfg["steps"], cfg["warmup"], rounds, out["skipped"])
        out["kernflow_steps"] = {k: step_graph_status(v) for k, v in sessions.items()}
    finally:
        for close in closers:
            close()
    out.update(_summarise(times, floor))
    if "pytorch" in times and "kernflow" in times:
        out["pytorch_over_kernflow"] = round(statistics.median(
            a / b for a, b in zip(times["pytorch"], times["kernflow"])), 4)
    if tracked:
        out["loss_check"] = _loss_check(name, tracked, floor if floor in tracked else next(iter(tracked)))
    return out


# ---------------------------------------------------------------------------- chain of adds
def _loop_chain(add, y0, length, sync):
    def run():
        y = y0
        t = time.perf_counter()
        for _ in range(length):
            y = add(y)
        sync()
        dt = time.perf_counter() - t
        return dt, float(y.reshape(-1)[0])
    return run


def _kernflow_chain(device, length, on, feed):
    kf = _kf()
    require_kernflow_device(kf, device)
    cfg, how = fusion_config(kf, on)
    g = kf.Graph()
    with g.as_default(), kf.device(device):
        x = kf.placeholder(kf.float32, [1])
        y = x
        for _ in range(length):
            y = y + 1.0
    sess = kf.Session(graph=g, config=cfg)
    fn = sess.make_callable(y, feed_list=[x])

    def run():
        t = time.perf_counter()
        v = fn(feed)
        v = float(v.reshape(-1)[0])  # the host copy: the step's end
        return time.perf_counter() - t, v
    return run, sess, how


def bench_chain(cfg, rounds, smoke):
    """The dependent-adds chain; returns its JSON section (times in microseconds per add)."""
    n = cfg["length"]
    out = {"length": n, "runs_per_round": cfg["steps"], "rounds": rounds, "skipped": {}, "config": {}}
    runs, sessions = {}, []
    if smoke:
        floor = "numpy"
        feed = np.zeros(1, np.float32)
        runs["numpy"] = _loop_chain(lambda y: y + np.float32(1.0), feed, n, lambda: None)
    else:
        import cupy as cp
        floor = "cupy"
        feed = cp.zeros(1, cp.float32)
        runs["cupy"] = _loop_chain(lambda y: y + 1.0, feed, n, cp.cuda.get_current_stream().synchronize)
    device = "/device:CPU:0" if smoke else "/device:GPU:0"
    for name, on in (("kernflow_fused", True), ("kernflow_unfused", False)):
        try:
            run, sess, how = _kernflow_chain(device, n, on, feed)
            runs[name] = run
            sessions.append(sess)
            out["config"][name] = how
        except Unavailable as e:
            out["skipped"][name] = str(e)
        except Exception as e:
            out["skipped"][name] = f"failed to build: {type(e).__name__}: {str(e).splitlines()[0][:300]}"
    if not smoke:
        try:
            import torch
            if not torch.cuda.is_available():
                raise Unavailable("torch sees no CUDA device")
            runs["pytorch"] = _loop_chain(lambda y: y + 1.0, torch.zeros(1, device="cuda"), n,
                                          torch.cuda.synchronize)
        except (Unavailable, ImportError) as e:
            out["skipped"]["pytorch"] = str(e)
    def warm(unused_name, run):
        for _ in range(cfg["warmup"]):
            run()
    try:
        _warm_up(runs, warm, out["skipped"])
        times = {k: [] for k in runs}
        values = {}
        for _ in range(rounds):
            for k, run in runs.items():
                total = 0.0
                for _ in range(cfg["steps"]):
                    dt, values[k] = run()
                    total += dt
                times[k].append(total / cfg["steps"] / n)
    finally:
        for s in sessions:
            s.close()
    out.update(_summarise(times, floor, unit="us_per_op"))
    if "pytorch" in times and "kernflow_fused" in times:
        out["pytorch_over_kernflow_fused"] = round(statistics.median(
            a / b for a, b in zip(times["pytorch"], times["kernflow_fused"])), 3)
    out["results_correct"] = {k: v == float(n) for k, v in values.items()}
    return out


# ---------------------------------------------------------------------------- machine, goals, main
def check_gpu():
    """Returns the cupy module when cupy and a CUDA GPU are usable; raises Unavailable otherwise."""
    try:
        import cupy as cp
    except ImportError as e:
        raise Unavailable(f"cupy is not installed ({e}); this benchmark needs cupy and a CUDA GPU")
    try:
        n = cp.cuda.runtime.getDeviceCount()
    except Exception as e:  # cupy raises CUDARuntimeError without a driver
        raise Unavailable(f"no usable CUDA device: {e}")
    if n < 1:
        raise Unavailable("cupy sees no CUDA device")
    return cp


def machine(smoke):
    """The machine description for the JSON: GPU name and library versions."""
    info = {"python": platform.python_version(), "numpy": np.__version__, "cpu": platform.processor()
            or platform.machine()}
    try:
        import kernflow.core as kf
        info["kernflow"] = getattr(kf, "__version__", "?")
    except ImportError:
        info["kernflow"] = None
    if smoke:
        info["mode"] = "cpu-smoke (numpy floor, /device:CPU:0; timings meaningless)"
        return info
    import cupy as cp
    props = cp.cuda.runtime.getDeviceProperties(0)
    name = props["name"]
    info.update(gpu=name.decode() if isinstance(name, bytes) else str(name),
                compute_capability=f"{props['major']}.{props['minor']}",
                cupy=cp.__version__, cuda_runtime=cp.cuda.runtime.runtimeGetVersion(),
                cupy_tf32=os.environ.get("CUPY_TF32", "0"))
    try:
        import torch
        info.update(torch=torch.__version__, torch_cuda=torch.version.cuda,
                    torch_tf32_matmul=bool(torch.backends.cuda.matmul.allow_tf32))
    except ImportError:
        info["torch"] = None
    return info


def goals_met(results):
    """{goal: True/False, or None when a contender of that goal did not run}."""
    def get(w, k):
        return results.get(w, {}).get(k)
    small = get("mlp_small", "kernflow_over_cupy")
    small_pt = get("mlp_small", "pytorch_over_kernflow")
    large = get("mlp_large", "kernflow_over_cupy")
    chain = get("chain", "pytorch_over_kernflow_fused")

    def at_most(v, goal):
        return None if v is None else v <= GOALS[goal]

    def at_least(v, goal):
        return None if v is None else v >= GOALS[goal]
    return {"mlp_small.kernflow_over_cupy_max": at_most(small, "mlp_small.kernflow_over_cupy_max"),
            "mlp_small.pytorch_over_kernflow_min": at_least(small_pt,
                                                            "mlp_small.pytorch_over_kernflow_min"),
            "mlp_large.kernflow_over_cupy_max": at_most(large, "mlp_large.kernflow_over_cupy_max"),
            "chain.pytorch_over_kernflow_min": at_least(chain, "chain.pytorch_over_kernflow_min")}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workloads", nargs="+", choices=list(WORKLOADS), default=list(WORKLOADS))
    p.add_argument("--steps", type=int, default=None,
                   help="steps (chain: runs) per contender per round (default: per workload)")
    p.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 5)")
    p.add_argument("--device-check", action="store_true",
                   help="only check for cupy and a GPU, print the machine description and exit")
    p.add_argument("--cpu-smoke", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    smoke = args.cpu_smoke
    if not smoke:
        try:
            check_gpu()
        except Unavailable as e:
            print(f"bench_gpu: {e}", file=sys.stderr)
            return 2
    if args.device_check:
        print(json.dumps({"machine": machine(smoke)}, indent=2))
        return 0
    res = {"machine": machine(smoke), "results": {}}
    rounds = args.rounds or (2 if smoke else 5)
    for name in args.workloads:
        cfg = dict(WORKLOADS[name], **(SMOKE[name] if smoke else {}))
        if args.steps:
            cfg["steps"] = args.steps
        if name == "chain":
            res["results"][name] = bench_chain(cfg, rounds, smoke)
        else:
            res["results"][name] = bench_mlp(name, cfg, rounds, smoke)
    res["goals"] = GOALS
    res["met"] = goals_met(res["results"])
    print(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
