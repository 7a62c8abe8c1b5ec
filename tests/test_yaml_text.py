"""The package's own YAML is read through libyaml with the rules a user's file gets: every
shipped data file parses to the same values on both strict loaders, and the C loader refuses
and reads the same edge cases as the Python one."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from libra_des.config.yaml_text import StrictCLoader, StrictLoader, package_yaml, parse_yaml
from libra_des.errors import InputError
from libra_des.hardware.collectives.nccl_tuner import TUNING_FILE
from libra_des.hardware.gpu_records import GPU_DIR
from libra_des.kinds.preflight import DATA

needs_libyaml = pytest.mark.skipif(StrictCLoader is None, reason="PyYAML built without libyaml")
OURS = [TUNING_FILE, DATA, *sorted(GPU_DIR.glob("*.yaml"))]


@needs_libyaml
@pytest.mark.parametrize("path", OURS, ids=lambda p: Path(p).name)
def test_package_data_reads_the_same_on_both_parsers(path: Path) -> None:
    text = path.read_text()
    assert package_yaml(path) == yaml.load(text, Loader=StrictLoader)
    assert package_yaml(path) == parse_yaml(text, "f", "w")


EDGES = {
    "a: 1e12\nb: 1e-3\nc: 1.5\n": {"a": 1e12, "b": 1e-3, "c": 1.5},
    "a: yes\nb: off\nc: true\nd: False\n": {"a": "yes", "b": "off", "c": True, "d": False},
    "a: [1, {b: x}]\n": {"a": [1, {"b": "x"}]},
}
REFUSED = {
    "a: 1\na: 2\n": "each key once (duplicate 'a', line 2)",
    "a: !!binary aGk=\n": "no !!binary, line 1",
    "a: 2024-01-01\n": "no !!timestamp, line 1",
    "a: .inf\n": "a finite number",
    "a: [1, 2\n": "well-formed YAML",
}


@needs_libyaml
@pytest.mark.parametrize("ours", [False, True])
def test_both_loaders_read_and_refuse_alike(ours: bool) -> None:
    for text, value in EDGES.items():
        assert parse_yaml(text, "f", "w", ours=ours) == value
    for text, why in REFUSED.items():
        with pytest.raises(InputError, match=why.replace("(", r"\(").replace(")", r"\)")):
            parse_yaml(text, "f", "w", ours=ours)
