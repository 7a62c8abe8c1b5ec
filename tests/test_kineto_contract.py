"""A malformed or implausible Kineto trace is one line naming the event and field, exit 2.

The hostile cases mutate the hand-made GPU trace of ``test_kineto.py``; a property-based
test mutates it at random (wrong types, negative and huge numbers, missing keys) and asserts
that the import either succeeds or raises the one-line :class:`InputError`, nothing else.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from libra_des.cli import main
from libra_des.errors import InputError
from libra_des.hardware.profiles.kineto import import_kineto
from tests.test_kineto import gpu_trace


def edited(path: list[Any], value: Any) -> dict[str, Any]:
    """The GPU trace with the key at ``path`` set to ``value`` (``...`` deletes it)."""
    data = copy.deepcopy(gpu_trace())
    node: Any = data
    for key in path[:-1]:
        node = node[key]
    if value is ...:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return data


BAD = [
    (["traceEvents", 0, "args"], [1, 2], "traceEvents[0].args"),
    (["traceEvents", 0, "args"], "x", "traceEvents[0].args"),
    (["traceEvents", 0, "ts"], "100", "traceEvents[0].ts"),
    (["traceEvents", 0, "ts"], -5.0, "traceEvents[0].ts"),
    (["traceEvents", 0, "dur"], None, "traceEvents[0].dur"),
    (["traceEvents", 0, "dur"], -50.0, "traceEvents[0].dur"),
    (["traceEvents", 0, "dur"], 1e300, "traceEvents[0].dur"),
    (["traceEvents", 0, "dur"], True, "traceEvents[0].dur"),
    (["traceEvents", 0, "name"], ..., "traceEvents[0].name"),
    (["traceEvents", 1, "args", "External id"], "11", "traceEvents[1].args.External id"),
    (["traceEvents", 1, "args", "External id"], [11], "traceEvents[1].args.External id"),
    (["traceEvents", 0, "args", "Input Dims"], [[4096, -1], [2048, 1024]],
     "traceEvents[0].args.Input Dims"),
    (["traceEvents", 0, "args", "Input Dims"], [[1 << 62, 2048], [2048, 1024]],
     "traceEvents[0].args.Input Dims"),
    (["traceEvents", 4, "args", "Group size"], "8", "traceEvents[4].args.Group size"),
    (["traceEvents", 4, "args", "Group size"], 10**9, "traceEvents[4].args.Group size"),
    (["traceEvents", 4, "args", "Out msg nelems"], 10**18, "traceEvents[4].args.Out msg"),
    (["traceEvents", 4, "dur"], -80.0, "traceEvents[4].dur"),
    (["traceEvents", 2, "ph"], "Q", "traceEvents[2].ph"),
    (["traceEvents", 2, "cat"], "made_up", "traceEvents[2].cat"),
    (["traceEvents", 3], 7, "traceEvents[3]"),
    (["deviceProperties"], {"name": "H100"}, "deviceProperties"),
    (["deviceProperties"], [{"name": 5}], "deviceProperties[0].name"),
    (["deviceProperties"], ["H100"], "deviceProperties[0]"),
    (["distributedInfo"], {"world_size": "2"}, "distributedInfo.world_size"),
    (["distributedInfo"], {"world_size": 0}, "distributedInfo.world_size"),
    (["distributedInfo"], [2], "distributedInfo"),
]


def write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(("where", "value", "field"), BAD)
def test_bad_field_is_one_line_naming_event_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: list[Any], value: Any, field: str
) -> None:
    path = write(tmp_path, edited(where, value))
    argv = ["profile", "import", "--format", "kineto", str(path), "--out",
            str(tmp_path / "p.json"), "--base", "h200-sxm"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {path}: {field}"), err
    assert "internal error" not in err
    assert not (tmp_path / "p.json").exists()


def test_a_kernel_faster_than_the_gpus_peak_is_refused(tmp_path: Path) -> None:
    # 2 * 4096 * 1024 * 2048 FLOP (17.2 GFLOP) in 2 x 0.5 us is 17 PFLOP/s: no H200 does that.
    data = gpu_trace()
    for k in data["traceEvents"][2:4]:  # type: ignore[index]
        k["dur"] = 0.5
    with pytest.raises(InputError, match=r"traceEvents\[0\]\.dur.*peak") as err:
        import_kineto(write(tmp_path, data))
    assert err.value.line().count("\n") == 0


def test_a_kernel_at_a_plausible_rate_is_kept(tmp_path: Path) -> None:
    # The same GEMM at 60 us is 286 TFLOP/s, below the H200's 989 TFLOP/s dense BF16.
    samples, _, _ = import_kineto(write(tmp_path, gpu_trace()))
    assert {s.op for s in samples} == {"gemm", "all_gather"}


def test_metadata_and_instant_events_are_skipped_by_rule(tmp_path: Path) -> None:
    data = gpu_trace()
    data["traceEvents"] += [{"ph": "M", "name": "process_name", "args": {"name": 3}},  # type: ignore[operator]
                            {"ph": "i", "s": "t", "name": "x", "ts": "whenever"}]
    samples, _, _ = import_kineto(write(tmp_path, data))
    assert len(samples) == 2


# ------------------------------------------------------------------------ property-based

SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**20), 10**20),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6),
)
#: Any JSON value: scalars, and lists and objects of them (nested a little).
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=2)),
    max_leaves=6)


def paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path of a JSON tree (mutation sites)."""
    out = [prefix] if prefix else []
    items = node.items() if isinstance(node, dict) else enumerate(node) \
        if isinstance(node, list) else ()
    for key, child in items:
        out += paths(child, (*prefix, key))
    return out


SITES = paths(gpu_trace())


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    data = copy.deepcopy(gpu_trace())
    for _ in range(draw(st.integers(1, 3))):
        site = draw(st.sampled_from(SITES))
        node: Any = data
        try:
            for key in site[:-1]:
                node = node[key]
            if draw(st.booleans()) and isinstance(node, dict):
                node.pop(site[-1], None)
            else:
                node[site[-1]] = draw(VALUES)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed the site
    return data


@settings(max_examples=400, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=mutated())
def test_random_mutations_import_or_raise_one_line(tmp_path: Path, data: dict[str, Any]) -> None:
    path = write(tmp_path, data)
    try:
        import_kineto(path)
    except InputError as exc:
        assert "\n" not in exc.line() and exc.line().startswith("error: ")
