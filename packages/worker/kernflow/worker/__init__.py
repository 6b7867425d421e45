"""kernflow-worker: the worker service of the distributed runtime."""
