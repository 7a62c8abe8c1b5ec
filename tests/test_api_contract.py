"""The Python API keeps the one-line contract: bad arguments raise InputError with the CLI's
line, numpy scalars pass where Python numbers do (results stay JSON), and scenarios load from
several threads at once."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import libra_des.api as api
from libra_des.errors import InputError

SCENARIO = "scenarios/quickstart.yaml"


def out_dir(tmp_path: Path) -> str:
    return str(tmp_path / "sweep")


def a_file(tmp_path: Path) -> Path:
    path = tmp_path / "plain.txt"
    path.write_text("not a folder")
    return path


BAD_CALLS: list[tuple[str, Callable[[Path], Any], str]] = [
    ("noise seed text", lambda t: api.noise_factors(4, 2, "x"), "seed"),  # type: ignore[arg-type]
    ("noise seed < 0", lambda t: api.noise_factors(4, 2, -1), "seed"),
    ("noise seed float", lambda t: api.noise_factors(4, 2, 1.5), "seed"),  # type: ignore[arg-type]
    ("noise too many", lambda t: api.noise_factors(1 << 20, 1 << 20), "gpus * steps"),
    ("sweep axes None", lambda t: api.run_sweep(SCENARIO, None, out_dir(t)), "axes"),  # type: ignore[arg-type]
    ("sweep axes text", lambda t: api.run_sweep(SCENARIO, "seed", out_dir(t)), "axes"),
    ("sweep values int", lambda t: api.run_sweep(SCENARIO, [{"seed": 3}], out_dir(t)),  # type: ignore[dict-item]
     "axes.seed"),
    ("sweep key int", lambda t: api.run_sweep(SCENARIO, [{3: [1]}], out_dir(t)), "axes"),  # type: ignore[dict-item]
    ("sweep empty values", lambda t: api.run_sweep(SCENARIO, [{"seed": []}], out_dir(t)),
     "axes"),
    ("sweep out int", lambda t: api.run_sweep(SCENARIO, [{"seed": [1]}], 5), "out"),  # type: ignore[arg-type]
    ("sweep scenario int", lambda t: api.run_sweep(5, [{"seed": [1]}], out_dir(t)),  # type: ignore[arg-type]
     "scenario"),
    ("shipped_path int", lambda t: api.shipped_path(5), "relative"),  # type: ignore[arg-type]
    ("load seed < 0", lambda t: api.load_scenario(SCENARIO, seed=-1), "seed"),
    ("load seed text", lambda t: api.load_scenario(SCENARIO, seed="1"), "seed"),  # type: ignore[arg-type]
    ("simulate ranks text", lambda t: api.simulate(SCENARIO, trace_ranks="0"), "trace_ranks"),  # type: ignore[arg-type]
    ("write under a file", lambda t: api.write_output(a_file(t) / "x.txt", "a"), "path"),
    ("write data int", lambda t: api.write_output(t / "x.txt", 5), "path"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("name", "call", "field"), BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_bad_arguments_raise_one_line_input_error(
    tmp_path: Path, name: str, call: Callable[[Path], Any], field: str
) -> None:
    with pytest.raises(InputError) as err:
        call(tmp_path)
    line = err.value.line()
    assert "\n" not in line and line.startswith(f"error: {field}: "), line
    assert not (tmp_path / "sweep").exists()


def test_numpy_scalars_are_python_numbers() -> None:
    sc = api.load_scenario(SCENARIO, {"parallelism.dp": np.int64(16)}, seed=np.int64(3))
    assert sc.seed == 3 and type(sc.seed) is int
    assert sc.parallelism.dp == 16  # type: ignore[union-attr]
    json.dumps(sc.model_dump(mode="json"))
    a = api.noise_factors(np.int64(4), np.int64(2), np.int64(5))
    assert np.array_equal(a, api.noise_factors(4, 2, 5))
    assert api.cost("all_reduce", nbytes=np.int64(8 << 20), group=np.int64(8)) == \
        api.cost("all_reduce", nbytes=8 << 20, group=8)
    assert api.cost("attention", doc_lengths=np.array([1024, 2048]), heads=np.int64(8)) == \
        api.cost("attention", doc_lengths=[1024, 2048], heads=8)
    assert api.step_plan(SCENARIO, step=np.int64(1)).policy == api.step_plan(SCENARIO).policy


#: Eight threads load one scenario at once in a fresh process: the first look-up of the
#: plug-in registries (scenario kinds, balancers) happens under contention.
THREADS = """
import sys
from concurrent.futures import ThreadPoolExecutor
import libra_des.api as api
with ThreadPoolExecutor(8) as pool:
    loaded = list(pool.map(lambda _: api.load_scenario(sys.argv[1]), range(8)))
assert all(s == loaded[0] for s in loaded)
print(len(loaded))
"""


@pytest.mark.parametrize("scenario", [SCENARIO, "scenarios/moe-glm45.yaml"])
def test_scenarios_load_from_eight_threads_at_once(scenario: str) -> None:
    done = subprocess.run([sys.executable, "-c", THREADS, scenario], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "8"
