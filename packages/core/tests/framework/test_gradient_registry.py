"""`kernflow.core.framework.gradient_registry`: the lazily loaded gradient families."""

import subprocess
import sys

# Threads that build gradients at once in a fresh process, where the gradient modules are not
# loaded yet: none may see a half-filled registry ("No gradient defined for operation 'Mean'").
_CONCURRENT = r"""
import threading
import kernflow.core as kf

barrier, errors = threading.Barrier(8), []

def build():
    g = kf.Graph()
    with g.as_default():
        w = kf.Variable([[1.0, 2.0]])
        loss = kf.reduce_mean(kf.square(kf.matmul(w, kf.transpose(w)) - 1.0))
        barrier.wait()
        try:
            kf.gradients(loss, [w])
        except Exception as e:
            errors.append(repr(e))

threads = [threading.Thread(target=build) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("errors", errors)
"""


def test_concurrent_first_lookups_see_every_gradient():
    out = subprocess.run([sys.executable, "-c", _CONCURRENT], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "errors []", out.stdout + out.stderr
