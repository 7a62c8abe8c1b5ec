"""benchmarks/packet_check.py: skips with one line where ns-3 is not installed (make test never
needs it); its cases and the libra-des side of its fabric are checked without ns-3."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("packet_check", ROOT / "benchmarks"
                                                  / "packet_check.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_skips_with_one_line_without_ns3(monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "ns" else real(name, *a))
    monkeypatch.setattr(sys, "argv", ["packet_check.py"])
    bench().main()
    out = capsys.readouterr()
    assert out.out.strip().startswith("skipped:") and len(out.out.strip().splitlines()) == 1
    assert out.err == ""


def test_cases_and_the_flow_side_of_the_fabric() -> None:
    b = bench()
    cases = b.cases((1 << 20, 2 << 20, 4 << 20))
    assert [c.pattern for c in cases[:3]] == ["incast", "all_to_all", "all_to_allv"]
    hot = cases[2]
    into0 = sum(n for _, d, n in hot.pairs if d == 0)
    into1 = sum(n for _, d, n in hot.pairs if d == 1)
    assert into0 == pytest.approx(4 * into1)
    done, topo = b.flow_model(b.topology_spec(10.0), cases[0])
    # Incast: 7 senders share host 0's 10 Gb/s link.
    assert max(done.values()) == pytest.approx(7 * (1 << 20) / 1.25e9, rel=0.01)
    assert b.spine_of(topo, 0, 1) is None and b.spine_of(topo, 0, 5) in (0, 1)
