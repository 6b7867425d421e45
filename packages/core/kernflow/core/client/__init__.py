"""Sessions: the user-facing `kf.Session` and its target-scheme dispatch."""
