"""`kf.train`: optimizers, savers and cluster helpers (filled in by the training work)."""
