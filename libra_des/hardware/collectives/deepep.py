"""DeepEP-class MoE dispatch and combine across nodes, over the project's all-to-all model.

Two kernel families, as DeepEP (V1, github.com/deepseek-ai/DeepEP docs/legacy.md) runs them:

* **normal** (training, prefill): hierarchical forwarding. A token goes once over RDMA to
  every other node that holds one of its experts, to the GPU of the same local index there
  (same rail), which forwards it over NVLink to the GPUs of its node that need it; GPUs of the
  source node get it over NVLink directly. Each GPU receives a token once however many of its
  experts it picks (deduplicated per GPU and per node). RDMA and NVLink stages are pipelined
  in chunks, so a call lasts as long as the slower of the two stages: the RDMA stage, whose
  IBGDA puts go to all RDMA peers at once (one stream of the busiest NIC's volume,
  :meth:`~libra_des.hardware.collectives.communication.Communication.p2p`), and the NVLink
  stage, an intra-node
  :meth:`~libra_des.hardware.collectives.communication.Communication.all_to_allv`.
  The kernels run on ``sms`` SMs (DeepEP's README example sets 24): each SM moves at most its
  share of HBM bandwidth (:func:`sm_copy_bw`, our assumption), which caps a GPU's rate, and a
  grouped GEMM overlapped with them gets the remaining SMs (:func:`compute_share`).
* **low latency** (decode): one message per (token, expert) pair, no deduplication and no
  NVLink forwarding: peers on other nodes through the NIC, peers on the same node written
  directly over NVLink (DeepEP's default ``allow_nvlink_for_low_latency_mode``);
  GPU-initiated on one queue pair per local expert so that all messages are in flight at
  once (each path priced as one point-to-point stream of its busiest GPU's volume,
  :meth:`~libra_des.hardware.collectives.communication.Communication.p2p`); hook-based
  receiving occupies no SM while in flight (``sms = 0``).

Combine mirrors dispatch (the transposed traffic, in the combine's element size).
Assumptions: routing is given per token; chunk pipelining is perfect (the slower stage sets
the time, the faster one is hidden); no congestion beyond the all-to-all model's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from libra_des.errors import InputError
from libra_des.hardware.compute.kernels import sm_count
from libra_des.hardware.costs import CostModel


@dataclass(frozen=True)
class EpKernel:
    """One DeepEP kernel family and its SM budget."""

    name: str
    hierarchical: bool  # NVLink forwarding behind one RDMA copy per node (normal kernels)
    sms: int  # SMs the kernel holds while it runs (0: hook-based, none in flight)


#: DeepEP V1's normal kernels with the SM count its legacy tests run them on (24:
#: ``tests/legacy/test_intranode.py``, ``test_internode.py``; the README's example sets 24).
NORMAL = EpKernel("deepep_normal", hierarchical=True, sms=24)
#: DeepEP V1's low-latency kernels: pure RDMA, receive hooks that hold no SM.
LOW_LATENCY = EpKernel("deepep_low_latency", hierarchical=False, sms=0)


#: The kernel families by name (``balancer.dispatch_kernel``; ``nccl`` is the all-to-all).
KERNELS = {k.name: k for k in (NORMAL, LOW_LATENCY)}
#: NVLink peers a DeepEP V1 buffer addresses (``NUM_MAX_NVL_PEERS``, ``csrc/kernels/legacy``).
MAX_NVL_PEERS = 8


def send_matrix(kernel: EpKernel, dest: np.ndarray, origin: np.ndarray, ep: int, gpn: int,
                token_bytes: float) -> np.ndarray:
    """``[G, G]`` bytes ``kernel`` moves between GPUs for a dispatch (what goes over the
    wire: RDMA entries between nodes, NVLink entries within one; combine is its transpose)."""
    if kernel.hierarchical:
        rdma, nvlink = normal_paths(dest, origin, ep, gpn, token_bytes)
        result: np.ndarray = rdma + nvlink
        return result
    return low_latency_paths(dest, origin, ep, token_bytes)


def matrix_seconds(cost: CostModel, kernel: EpKernel, send: np.ndarray, gpn: int) -> float:
    """:func:`seconds` of a :func:`send_matrix` (split by node into RDMA and NVLink)."""
    node = np.arange(send.shape[0]) // max(gpn, 1)
    local = node[:, None] == node[None, :]
    return seconds(cost, kernel, np.where(local, 0.0, send), np.where(local, send, 0.0), gpn)


def check_fabric(kernel: EpKernel, intra_kind: str, gpn: int) -> None:
    """Bad input where DeepEP V1 does not run: without NVLink (NVSwitch) inside a node, or
    with more GPUs a node than its buffers address."""
    field = "balancer.dispatch_kernel"
    if intra_kind != "nvswitch":
        raise InputError(field, kernel.name, f"nccl on a node without NVSwitch ({intra_kind})")
    if gpn > MAX_NVL_PEERS:
        raise InputError(field, kernel.name,
                         f"nccl with {gpn} GPUs a node (DeepEP V1 addresses {MAX_NVL_PEERS})")


def check_width(ep: int, experts: int) -> None:
    """Bad input when the EP group is wider than the routed experts."""
    if ep > experts:
        raise InputError("parallelism.ep", ep, f"<= model.experts={experts} (an expert a GPU)")


def expert_gpu(experts: int, ep: int) -> np.ndarray:
    """``[E]`` GPU of every expert (contiguous blocks, as DeepEP's layout)."""
    check_width(ep, experts)
    return np.arange(experts) // (experts // ep)


def normal_traffic(routed: np.ndarray, origin: np.ndarray, experts: int, ep: int, gpn: int,
                   token_bytes: float) -> tuple[np.ndarray, np.ndarray]:
    """``(rdma[G, G], nvlink[G, G])`` dispatch bytes of the normal kernels, every expert on
    its home GPU (:func:`expert_gpu`)."""
    return normal_paths(expert_gpu(experts, ep)[routed], origin, ep, gpn, token_bytes)


def normal_paths(dest: np.ndarray, origin: np.ndarray, ep: int, gpn: int,
                 token_bytes: float) -> tuple[np.ndarray, np.ndarray]:
    """``(rdma[G, G], nvlink[G, G])`` dispatch bytes of the normal kernels for ``dest[T, k]``,
    the GPU of every (token, expert) pair (a balancer's placement, replicas included)."""
    t = dest.shape[0]
    needed = np.zeros((t, ep), dtype=bool)
    needed[np.repeat(np.arange(t), dest.shape[1]), dest.ravel()] = True
    needed[np.arange(t), origin] = False  # its own GPU: no transfer
    node = np.arange(ep) // gpn
    nodes = int(node.max()) + 1
    src_node = origin // gpn
    node_needed = np.zeros((t, nodes), dtype=bool)
    rows, cols = np.nonzero(needed)
    node_needed[rows, node[cols]] = True
    rdma = np.zeros((ep, ep))
    nvlink = np.zeros((ep, ep))
    for n in range(nodes):
        remote = node_needed[:, n] & (src_node != n)
        relay = n * gpn + origin % gpn  # same local index on node n
        np.add.at(rdma, (origin[remote], relay[remote]), token_bytes)
        for d in range(n * gpn, (n + 1) * gpn):
            want = needed[:, d]
            direct = want & (src_node == n)
            np.add.at(nvlink, (origin[direct], np.full(int(direct.sum()), d)), token_bytes)
            fwd = want & remote & (relay != d)
            np.add.at(nvlink, (relay[fwd], np.full(int(fwd.sum()), d)), token_bytes)
    return rdma, nvlink


def low_latency_traffic(routed: np.ndarray, origin: np.ndarray, experts: int, ep: int,
                        token_bytes: float) -> np.ndarray:
    """``[G, G]`` dispatch bytes of the low-latency kernels: one message per remote pair."""
    return low_latency_paths(expert_gpu(experts, ep)[routed], origin, ep, token_bytes)


def low_latency_paths(dest: np.ndarray, origin: np.ndarray, ep: int,
                      token_bytes: float) -> np.ndarray:
    """``[G, G]`` low-latency dispatch bytes for ``dest[T, k]``, the GPU of every pair."""
    src = np.repeat(origin, dest.shape[1])
    out = np.zeros((ep, ep))
    np.add.at(out, (src, np.asarray(dest).ravel()), token_bytes)
    out[np.arange(ep), np.arange(ep)] = 0.0
    return out


def sm_copy_bw(cost: CostModel) -> float:
    """Bytes/s one SM can move (our assumption: its even share of HBM bandwidth)."""
    return cost.profile.hbm_bw / sm_count(cost.profile.device)


def compute_share(cost: CostModel, kernel: EpKernel) -> float:
    """Share of the SMs left to a kernel overlapped with ``kernel``."""
    sms = sm_count(cost.profile.device)
    return (sms - min(kernel.sms, sms - 1)) / sms


def seconds(cost: CostModel, kernel: EpKernel, rdma: np.ndarray, nvlink: np.ndarray,
            gpn: int) -> float:
    """One dispatch (or combine, with the transposed matrices) of ``kernel``."""
    ep = rdma.shape[0]
    if kernel.hierarchical:
        # The RDMA stage is GPU-initiated too (IBGDA puts from every channel's warps to all
        # RDMA peers at once: ``internode.cu``), so it streams like the low-latency kernels
        # below; the NVLink stage is priced as an intra-node all-to-all.
        t = max(_busiest_p2p(cost, rdma, same_node=False),
                cost.all_to_allv(nvlink, gpn) if nvlink.any() else 0.0)
        moved = np.maximum((rdma + nvlink).sum(axis=1), (rdma + nvlink).sum(axis=0)).max()
        return max(t, float(moved) / (kernel.sms * sm_copy_bw(cost)))
    # GPU-initiated messages on many queue pairs (one per local expert): all of a rank's
    # messages are in flight at once, so its NIC streams its whole volume after one message
    # latency, as one point-to-point transfer of that volume (not NCCL's one-peer-after-another
    # rounds of ``all_to_allv``). Peers on the same node are written over NVLink instead
    # (NVSHMEM's p2p pointer, ``allow_nvlink_for_low_latency_mode`` on by default in DeepEP's
    # legacy buffer), in parallel with the NIC.
    if ep <= 1:
        return 0.0
    every = rdma + nvlink
    node = np.arange(ep) // max(gpn, 1)
    local = node[:, None] == node[None, :]
    return max(_busiest_p2p(cost, np.where(local, 0.0, every), same_node=False),
               _busiest_p2p(cost, np.where(local, every, 0.0), same_node=True))


def _busiest_p2p(cost: CostModel, m: np.ndarray, same_node: bool) -> float:
    """One stream of the busiest sender's or receiver's volume of ``m``."""
    busiest = float(max(m.sum(axis=1).max(), m.sum(axis=0).max()))
    return cost.p2p(busiest, same_node=same_node) if busiest > 0 else 0.0
