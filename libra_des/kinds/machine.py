"""A scenario's knobs against the machine it names (its topology and the GPU record there).

One function, :func:`check_machine`, run by every kind's ``elaborate``: so ``run``, ``sweep``,
``scenario show`` and the Python API refuse the same knobs with the same line, before any
work. What it checks (each is a knob the run could not honour or would silently ignore):

- ``comm.algorithm`` / ``comm.protocol`` against the fabric (NVLS needs NVLink SHARP on an
  NVSwitch node, CollNet an in-network-reduction level, no LL128 over PCIe:
  :func:`~libra_des.hardware.collectives.nccl_tuner.check_override`, the check the cost model
  makes when it is built);
- ``comm.channels`` and ``comm.sm_per_channel`` against the GPU's SMs: a channel runs at least
  one CTA and a CTA holds one SM (``hardware/compute/interference.py``), and the model leaves
  at least one SM to the kernel beside it, so ``channels x sm_per_channel <= SMs - 1``;
- an MoE model's ``model.dtype: fp8`` only on a GPU whose record has an FP8 tensor path
  (``fp8_flops``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from libra_des.errors import InputError

if TYPE_CHECKING:
    from libra_des.hardware.fabric.topology import Topology


def check_machine(scenario: Any) -> Topology:
    """Refuse a knob the scenario's machine cannot honour (module docstring); one line. The
    scenario's topology (as named, not yet sized to the run) for further checks."""
    from libra_des.hardware.collectives.nccl_tuner import check_override
    from libra_des.hardware.fabric.topology import load_topology
    from libra_des.hardware.gpu_records import gpu_record

    topo = load_topology(scenario.topology, scenario.topology_params)
    comm = scenario.comm
    check_override(topo.fabric(), comm.algorithm, comm.protocol)
    record = gpu_record(topo.spec.gpu)
    check_channels(comm.channels, comm.sm_per_channel, record.sm_count.value, record.name)
    dtype = getattr(scenario.model, "dtype", None)
    if dtype == "fp8" and record.fp8_flops is None:
        raise InputError("model.dtype", dtype, f"bf16 ({record.name} has no FP8 tensor path "
                         "in its GPU record)")
    return topo


def check_channels(channels: int | None, sm_per_channel: int | None, sms: int,
                   gpu: str) -> None:
    """``comm.channels`` and ``comm.sm_per_channel`` within the GPU's ``sms`` SMs (one left
    to the kernel beside the transfer)."""
    most = sms - 1
    why = f"{gpu} has {sms} SMs; a transfer leaves one to the kernel beside it"
    if sm_per_channel is not None and sm_per_channel > most:
        raise InputError("comm.sm_per_channel", sm_per_channel, f"0..{most} ({why})")
    if channels is not None and channels * max(sm_per_channel or 1, 1) > most:
        per = max(sm_per_channel or 1, 1)
        raise InputError("comm.channels", channels,
                         f"1..{most // per} at {per} SM(s) per channel ({why})")
