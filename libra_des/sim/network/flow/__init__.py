"""The flow model's engine: flows on the topology's routes, max-min fair, solved by compiled
kernels; all-to-all replays; link numbering and paths (behind ``sim/network``'s seam)."""
