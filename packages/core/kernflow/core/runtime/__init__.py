"""The runtime: devices, resource containers, rendezvous, graph passes and the executor."""
