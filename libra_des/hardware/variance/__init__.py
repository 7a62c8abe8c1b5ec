"""Runtime variance: per-GPU per-op noise, slow GPUs and fail-slow episodes, fleet structure,
per-transfer link and host-side jitter."""
