"""The preflight through the kind registry: a scenario's estimate and the checks a command
runs before any work (memory and wall time, ``--trace-ranks``), each the scenario kind's own
(:mod:`libra_des.kinds.preflight` computes them; this module sits above both it and the
registry, so a kind's module imports the preflight without the registry that names it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libra_des.kinds as kinds
from libra_des.errors import InputError
from libra_des.kinds import preflight
from libra_des.kinds.estimate import Estimate

if TYPE_CHECKING:
    from libra_des.config import Scenario


def estimate(sc: Scenario) -> Estimate:
    """The scenario kind's estimate (:mod:`libra_des.kinds`)."""
    return kinds.kind_of(sc).estimate(sc)


def check_feasible(sc: Scenario, flag: str = "--no-preflight") -> Estimate:
    """Refuse a scenario whose estimate exceeds this machine's memory or a day of wall time."""
    est = estimate(sc)
    have = preflight.available_bytes()  # looked up here: a test replaces it
    if est.bytes > 0.8 * have:
        raise InputError("scenario", f"needs {est.text()}",
                         f"a run within 80% of the {have / 1e9:.3g} GB available here "
                         f"(make it smaller, or pass {flag} to try anyway)")
    if est.seconds > preflight.MAX_SECONDS:
        raise InputError("scenario", f"needs {est.text()}",
                         f"a run under {preflight.MAX_SECONDS / 3600:.0f} h (make it smaller, "
                         f"or pass {flag} to try anyway)")
    return est


def trace_ranks(
    sc: Scenario, want_trace: bool, text: str | None, parsed: list[int] | None
) -> list[int] | None:
    """Validate ``--trace``/``--trace-ranks`` against the scenario; deduplicated, ordered.

    ``text`` is what the user typed (for messages); ``parsed`` its integers, already checked
    to be >= 0 by the command that read them.
    """
    if text is not None and not want_trace:
        raise InputError("--trace-ranks", text, "only together with --trace")
    return kinds.kind_of(sc).trace_ranks(sc, want_trace, text, parsed)
