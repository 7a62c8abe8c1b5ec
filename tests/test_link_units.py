"""Topology units through pint: every bandwidth and latency string parses to exactly the
number a hand multiplication gives (number x prefix x 1/8 for bits), so results cannot move;
a unit of the wrong kind, pint's gilbert (``Gb`` is a gigabit here) and a milli-rate are
refused."""

from __future__ import annotations

import numpy as np
import pytest

from libra_des.hardware.fabric.links import parse_bandwidth, parse_latency

#: The decimal prefixes, written out (the reference arithmetic, not the code's table).
RATE = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
TIME = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def numbers(count: int) -> list[float]:
    rng = np.random.default_rng(7)
    return [float(x) for x in (*rng.uniform(0, 1000, count), *10 ** rng.uniform(-3, 6, count),
                               *np.round(rng.uniform(0, 1000, count), 1))]


@pytest.mark.parametrize("prefix", RATE)
@pytest.mark.parametrize("bits", [False, True])
def test_bandwidth_is_the_hand_product(prefix: str, bits: bool) -> None:
    unit = f"{prefix}{'b' if bits else 'B'}/s"
    for x in numbers(300):
        want = x * RATE[prefix] * (1 / 8 if bits else 1.0)
        for text in (f"{x}{unit}", f"{x} {unit}", f"{x:g}{unit}", f"{x:.4e} {unit}"):
            assert parse_bandwidth(text) == float(text.removesuffix(unit)) * RATE[prefix] * (
                1 / 8 if bits else 1.0), text
        assert parse_bandwidth(f"{x!r}{unit}") == want


@pytest.mark.parametrize("unit", TIME)
def test_latency_is_the_hand_product(unit: str) -> None:
    for x in numbers(300):
        for text in (f"{x}{unit}", f"{x} {unit}", f"{x:g}{unit}"):
            assert parse_latency(text) == float(text.removesuffix(unit)) * TIME[unit], text


def test_shipped_strings() -> None:
    assert parse_bandwidth("400Gb/s") == 5e10 and parse_bandwidth("450 GB/s") == 4.5e11
    assert parse_latency("1.5us") == 1.5e-6 and parse_latency("0.5µs") == 0.5e-6
    assert parse_bandwidth(3e9) == 3e9 and parse_latency(0) == 0  # numbers pass through


@pytest.mark.parametrize("text", ["400 gbps", "x GB/s", "1.5 GB", "2 s/B", "5mB/s", "1 K", "3",
                                  "nanGB/s"])
def test_bad_bandwidths_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="bytes/s as a number"):
        parse_bandwidth(text)


@pytest.mark.parametrize("text", ["2 GB/s", "1.5", "2 parsecs", "1e-6s/B"])
def test_bad_latencies_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="seconds as a number"):
        parse_latency(text)


def test_the_common_units_are_pints_factors() -> None:
    """The table of common units (parsed without importing pint) holds exactly the factors
    pint's registry gives, so the fast path and pint agree to the bit."""
    from libra_des.hardware.fabric.links import COMMON_UNITS, units

    registry = units()
    base = {"[information] / [time]": "B/s", "[time]": "s"}
    for dimension, table in COMMON_UNITS.items():
        for unit, factor in table.items():
            q = registry.Quantity(1.0, registry.Unit(unit))
            assert str(q.dimensionality) == dimension
            assert q.to(base[dimension]).magnitude == factor, unit


def test_a_shipped_topology_loads_without_importing_pint() -> None:
    import subprocess
    import sys

    code = ("import sys\nfrom libra_des.hardware.fabric.topology import load_topology\n"
            "load_topology('h200-roce-railopt')\nprint('pint' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
