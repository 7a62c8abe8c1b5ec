"""Reproducible identities: two clones in different folders agree; a code edit re-runs points."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from libra_des.api import simulate
from libra_des.base.identity import ROOT, content_key, portable_path
from libra_des.config import load_scenario, scenario_dict
from libra_des.runs.sweep import point_id

TINY = ["parallelism.dp=2", "parallelism.pp=1", "parallelism.gbs=4", "balancer.pool_size=2",
        "model.layers=2"]
PARTS = ("libra_des", "scenarios", "topologies", "workloads", "calibration/profiles",
         "calibration/public")


def clone(dest: Path) -> Path:
    """A copy of the files the simulator reads, in a folder of its own.

    numba's on-disk kernels travel with it (they are keyed by the source file's stamp, which
    the copy keeps), after one in-process run has compiled them here: otherwise every copy
    compiles them again, about ten seconds each on a 2-core machine.
    """
    simulate(ROOT / "scenarios" / "quickstart.yaml", overrides=TINY)
    for part in PARTS:
        shutil.copytree(ROOT / part, dest / part,
                        ignore=shutil.ignore_patterns("*.pyc"))
    return dest


def cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``libra-des ARGS`` run from ``root`` with that copy's package first on the path."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    code = "import sys; from libra_des.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], cwd=root, env=env,
                          capture_output=True, text=True, check=False)


def sets() -> list[str]:
    return [a for s in TINY for a in ("--set", s)]


def without_wall(path: Path) -> dict[str, object]:
    data = json.loads(path.read_text())
    assert "wall_s" not in data  # the wall clock lives in run.json
    return dict(data)


def test_two_clones_write_identical_results(tmp_path: Path) -> None:
    roots = [clone(tmp_path / "a" / "checkout"), clone(tmp_path / "elsewhere" / "b")]
    texts = []
    for root in roots:
        done = cli(root, "run", "scenarios/quickstart.yaml", *sets(), "--out", "r", "--json")
        assert done.returncode == 0, done.stderr
        texts.append(without_wall(root / "r" / "result.json"))
        raw = (root / "r" / "result.json").read_text()
        assert str(root) not in raw and str(tmp_path) not in raw
    assert texts[0] == texts[1]
    assert texts[0]["scenario"]["topology"] == "topologies/h200-roce-railopt.yaml"  # type: ignore[index]


def test_sweep_ids_agree_across_clones_and_change_with_the_code(tmp_path: Path) -> None:
    roots = [clone(tmp_path / "one"), clone(tmp_path / "two")]
    argv = ["sweep", "scenarios/quickstart.yaml", *sets(), "--grid",
            "balancer.policy=ulysses,libra", "--out", "s", "--workers", "1", "--json"]
    ids = []
    for root in roots:
        done = cli(root, *argv)
        assert done.returncode == 0, done.stderr
        ids.append([p["id"] for p in json.loads(done.stdout)["points"]])
    assert ids[0] == ids[1]
    again = cli(roots[0], *argv)
    assert "2 reused" in again.stderr
    # A source edit (even a comment) changes the code fingerprint: nothing is reused.
    with (roots[0] / "libra_des" / "results" / "metrics.py").open("a") as fh:
        fh.write("# edited\n")
    edited = cli(roots[0], *argv)
    assert edited.returncode == 0 and "2 run, 0 reused" in edited.stderr, edited.stderr
    assert [p["id"] for p in json.loads(edited.stdout)["points"]] != ids[0]


def test_point_id_hashes_file_contents_not_paths(tmp_path: Path) -> None:
    topo = tmp_path / "my-topology.yaml"
    shutil.copy(ROOT / "topologies" / "h200-roce-railopt.yaml", topo)
    base = ROOT / "scenarios" / "quickstart.yaml"
    shipped = load_scenario(base, TINY)
    copied = load_scenario(base, [*TINY, f"topology={topo}"])
    assert shipped.topology != copied.topology
    assert point_id(shipped) == point_id(copied)  # same bytes, other place
    topo.write_text(topo.read_text() + "\n# an edit\n")
    assert point_id(load_scenario(base, [*TINY, f"topology={topo}"])) != point_id(shipped)


def test_portable_paths() -> None:
    assert portable_path(str(ROOT / "topologies" / "x.yaml")) == "topologies/x.yaml"
    assert portable_path("relative/x.yaml") == "relative/x.yaml"
    outside = portable_path("/elsewhere/x.yaml")
    assert not os.path.isabs(outside) and outside.endswith("elsewhere/x.yaml")
    dumped = scenario_dict(load_scenario(ROOT / "scenarios" / "quickstart.yaml", TINY))
    assert "sha256" in json.dumps(content_key(dumped))  # the topology entered by content
