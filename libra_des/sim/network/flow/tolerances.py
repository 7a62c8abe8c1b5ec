"""The flow engine's two tolerances, below both the state arrays (:mod:`.fluid`) and the
kernels that read them (numba freezes them into compiled code)."""

from __future__ import annotations

#: A flow is done when fewer bytes than this share of its size are left (float round-off).
DONE_TOLERANCE = 1e-9

#: Relative headroom a link shared with replays must keep (:mod:`.replay`; our assumption:
#: far above float round-off in the loads, 1e-15, and far below any load that matters).
MARGIN = 1e-6
