"""``libra-des calibrate``: measure this node with torch, fit, cross-validate, draw.

:mod:`libra_des.calibrate` does the work; torch is imported only inside these functions, so
``--help`` and the no-torch message never load it.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["calibrate_node", "calibration_ops", "torch_missing"]


def calibration_ops() -> tuple[str, ...]:
    """The ops the harness can measure (kernels, then collectives)."""
    from libra_des.calibrate.sizes import ALL_OPS

    return ALL_OPS


def torch_missing() -> str | None:
    """The one-line message when torch (the calibrate extra) is missing, else None."""
    from libra_des.calibrate.run import torch_missing as missing

    return missing()


def calibrate_node(device: str, ops: str, world: int | None, size_set: str, base: str,
                   seed: int, profile: Path, page: Path | None, name: str = "profile",
                   preflight: bool = True) -> int:
    """Check every choice against this machine (``preflight``: also the gloo ranks against
    its CPU cores), then measure, fit and cross-validate into ``profile`` (and the
    validation page ``page``); the exit status."""
    from libra_des.calibrate.run import calibrate, options

    opt = options(device, ops, world, size_set, base, seed, name, preflight)
    return calibrate(opt, profile, page, cv=True)
