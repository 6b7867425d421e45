"""Test support shipped with core: the kernel contract kit every kernel package's tests use."""
