"""A toy cost op from outside the package: one pricing function and its registration.

"toy_copy": a device-local copy of ``nbytes``, read once and written once at the profile's
HBM bandwidth (no kernel launch, no efficiency: our assumption for a toy). Importing this
module is all it takes for ``libra_des.cost("toy_copy", nbytes=...)`` and
``libra-des cost --op toy_copy --bytes ...``; a third-party package would do the same from
an entry point of the group ``libra_des.cost_ops``.
"""

from __future__ import annotations

from libra_des.errors import InputError
from libra_des.hardware.cost_ops import CostOp, CostQuery, CostReport, register
from libra_des.hardware.costs import CostModel


def copy(model: CostModel, q: CostQuery, op: str) -> CostReport:
    if q.nbytes is None or not 0 <= q.nbytes <= 2**40:
        raise InputError("nbytes", q.nbytes, f"a size in bytes, 0..2^40 (for {op})")
    seconds = 2.0 * q.nbytes / model.profile.hbm_bw
    return CostReport(seconds, {"seconds": seconds},
                      f"{op} of {q.nbytes:.0f} B: {seconds * 1e6:.2f} us")


OP = register(CostOp("toy_copy", copy, ("nbytes",)))
