"""A toy pipeline schedule from outside the package: one function and its registration.

"toy_serial": every device runs each microbatch's forward and then its backward before the
next microbatch starts (F0 B0 F1 B1 ...), so only one microbatch is ever in the pipeline.
With equal op times t and free communication a step takes m x 2p x t: the bubble is
(p - 1)/p of the step. Importing this module is all it takes for scenarios to name it
(``parallelism.schedule=toy_serial``); a third-party package would do the same from an
entry point of the group ``libra_des.schedules``.
"""

from __future__ import annotations

from libra_des.sim.training.schedules import Op, PipelineSchedule, Schedule, register


def serial(p: int, m: int, _v: int) -> Schedule:
    order = tuple(op for i in range(m) for op in (Op("F", i), Op("B", i)))
    return Schedule("toy_serial", p, m, 1, tuple(order for _ in range(p)))


SCHEDULE = register(PipelineSchedule("toy_serial", serial))
