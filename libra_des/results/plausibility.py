"""Built-in plausibility checks on every result before it is written or printed.

A physically impossible result is a bug in the simulator (or an input the validation layer
should have refused), never an answer. Each scenario kind's ``simulate``
(:mod:`libra_des.kinds`) applies :func:`check_numbers` and its roofline check, which raise
:class:`~libra_des.errors.CheckError` (one line, exit status 3) when a result breaks one of:

* every number is finite (NaN or infinity anywhere, at any depth);
* every ``*_fraction`` and the MFU lie in [0, 1] (rounding noise within :data:`TOLERANCE`
  is clamped to the bound in the result, never printed outside it);
* times, rates and counts are not negative; imbalance ratios (max / mean) are >= 1;
* the run took at least the compute roofline of its work: training's model FLOPs over
  ``gpus x peak`` (the same statement as MFU <= 1), and for MoE prefill each layer's routed
  expert FLOPs of all tokens over ``ep x peak``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any

from libra_des.errors import CheckError

#: Relative slack for rounding in sums of many float terms (our choice).
TOLERANCE = 1e-6

#: Keys whose values are signed by definition (none today; kept explicit for readers).
SIGNED: frozenset[str] = frozenset()
#: Sections whose numbers are signed: the attribution's parts (sim/training/attribution.py)
#: may lower a step (a kernel more efficient than the reference, noise factors below 1, flows
#: faster than their analytic price), and are left unclamped so that they add up exactly.
SIGNED_SECTIONS = frozenset({"attribution"})
#: Shares that do not end in ``fraction`` but must lie in [0, 1] all the same.
SHARES = frozenset({"mfu", "predictor_accuracy"})


def leaves(node: Any, where: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted path, value) of every scalar in a nested result."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            yield from leaves(value, f"{where}.{key}" if where else str(key))
    elif isinstance(node, list | tuple):
        for i, value in enumerate(node):
            yield from leaves(value, f"{where}[{i}]")
    else:
        yield where, node


def check_numbers(result: MutableMapping[str, Any]) -> None:
    """Finite everywhere; fractions in [0, 1]; no negative times, rates or counts.

    A value outside its range by no more than the rounding slack (:data:`TOLERANCE`, e.g. a
    bubble fraction of -3e-17 from a difference of two equal sums) is set to the bound in
    ``result`` itself, so no result is ever written or printed outside its range; a value
    beyond the slack is a genuine violation (:class:`~libra_des.errors.CheckError`)."""
    for key, value in result.items():
        if key != "scenario":
            result[key] = settled(value, key)


def settled(node: Any, path: str) -> Any:
    """``node`` with every number checked and its rounding noise clamped (see above)."""
    if isinstance(node, MutableMapping):  # in place: callers may hold the nested objects
        for key, value in node.items():
            node[key] = settled(value, f"{path}.{key}")
        return node
    if isinstance(node, Mapping):
        return {k: settled(v, f"{path}.{k}") for k, v in node.items()}
    if isinstance(node, list):
        node[:] = [settled(v, f"{path}[{i}]") for i, v in enumerate(node)]
        return node
    if isinstance(node, tuple):
        return tuple(settled(v, f"{path}[{i}]") for i, v in enumerate(node))
    if not isinstance(node, int | float) or isinstance(node, bool):
        return node
    return bounded(node, path)


def bounded(value: float, path: str) -> float:
    """One number of a result, checked against its range and clamped within the slack."""
    if not math.isfinite(value):
        raise CheckError("finite outputs", f"{path} = {value}")
    name = path.split(".")[-1].split("[")[0]
    top = path.split(".")[0]
    if name.endswith("fraction") or name in SHARES:
        if not -TOLERANCE <= value <= 1 + TOLERANCE:
            raise CheckError("fractions in [0, 1]", f"{path} = {value:.6g}")
        value = min(max(value, type(value)(0)), type(value)(1))
    if name not in SIGNED and top not in SIGNED_SECTIONS and value < 0:
        if value < -TOLERANCE * 1e-3:
            raise CheckError("no negative times, rates or counts", f"{path} = {value:.6g}")
        value = type(value)(0)
    if top == "imbalance_ratio" and value < 1:
        if value < 1 - TOLERANCE:
            raise CheckError("imbalance ratio (max / mean) >= 1", f"{path} = {value:.6g}")
        value = type(value)(1)
    return value


def check_training(result: Mapping[str, Any], flops_per_step: float, peak: float) -> None:
    """Step time at least the compute roofline: model FLOPs / (gpus x peak)."""
    bound = flops_per_step / (result["gpus"] * peak)
    step = result["step_time_s"]["mean"]
    if step <= 0 or step < bound * (1 - TOLERANCE):
        raise CheckError("step time >= compute roofline",
                         f"{step:.6g} s < {bound:.6g} s for {flops_per_step:.4g} FLOPs")


def check_moe(result: Mapping[str, Any], scenario: Any, peak: float) -> None:
    """Prefill time at least the routed-expert FLOPs of every token over the EP group's peak."""
    m = scenario.model
    ffn = m.expert_ffn or m.hidden
    moe_layers = m.layers - m.dense_layers
    # gate, up and down projections: 3 GEMMs of 2 FLOPs per multiply-add, top_k experts.
    flops = 2.0 * 3 * m.hidden * ffn * m.top_k * moe_layers * float(result.get("tokens", 0))
    bound = flops / (scenario.parallelism.ep * peak)
    took = float(result.get("prefill_s", 0.0))
    if took < bound * (1 - TOLERANCE):
        raise CheckError("prefill time >= compute roofline",
                         f"{took:.6g} s < {bound:.6g} s for {flops:.4g} expert FLOPs")
