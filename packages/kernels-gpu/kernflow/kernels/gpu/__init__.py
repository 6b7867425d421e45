"""kernflow's GPU device and cupy kernels, registered through the `kernflow` entry point `gpu`."""
