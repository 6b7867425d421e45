"""Repository-wide pytest hooks: tests marked `gpu` skip, saying why, where no CUDA GPU is usable."""

import functools

import pytest


@functools.lru_cache(maxsize=None)
def _no_gpu_reason():
    try:
        import cupy
    except ImportError:
        return "no GPU: cupy is not installed (pip install 'packages/kernels-gpu[cuda13]')"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001 - no driver, no device
        return f"no GPU: CUDA reports {type(e).__name__}: {e}"
    return None if n else "no GPU: CUDA sees no device"


def pytest_collection_modifyitems(config, items):
    gpu_items = [it for it in items if it.get_closest_marker("gpu") is not None]
    if not gpu_items:
        return
    reason = _no_gpu_reason()
    if reason is None:
        return
    for it in gpu_items:
        it.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(autouse=True)
def _restore_logging():
    """Tests that call the CLI's `main()` in process configure logging (levels, a stderr handler);
    later tests' `caplog` must see the default set-up again, so every test gets it back."""
    import logging
    root, kf = logging.getLogger(), logging.getLogger("kernflow")
    saved = (root.level, list(root.handlers), kf.level)
    yield
    root.setLevel(saved[0])
    root.handlers[:] = saved[1]
    kf.setLevel(saved[2])
