"""kernflow-master: the master service of the distributed runtime."""
