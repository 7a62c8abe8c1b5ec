"""Chakra trace folders: ``<prefix>.<rank>.et`` per rank and ``comm_group.json``."""

from __future__ import annotations

import fnmatch
import json
import re
from pathlib import Path
from typing import Any

from libra_des.base.ownership import Ledger, check_special
from libra_des.config.validation import check_output_dir, parse_json, read_bounded
from libra_des.errors import InputError
from libra_des.sim.chakra.nodes import EtNode, label, parse_node
from libra_des.sim.chakra.schema import read_trace

PREFIX = "libra"
GROUPS = "comm_group.json"
_RANK = re.compile(r"\.(\d+)\.et$")
#: Most ranks one replay takes (our bound: a 16,384-GPU job's traces).
MAX_RANKS = 16384
#: Most nodes of all ranks together (our bound: each is a SimPy process of about 1 kB; the
#: quickstart's 4,096-GPU step exports 289k).
MAX_TOTAL_NODES = 20_000_000


#: What an export writes into its folder (its ``.et`` files, by pattern: their count follows
#: the run), for the output-folder check before any work (:mod:`libra_des.base.ownership`).
OUTPUT_NAMES = (GROUPS,)
OUTPUT_PATTERNS = (f"{PREFIX}.*.et",)


def check_folder(out: Path, flag: str = "--chakra") -> None:
    """Refuse, before any work, a folder an export may not fill (foreign or edited files)."""
    check_output_dir(out, flag, OUTPUT_NAMES, OUTPUT_PATTERNS)


def write_folder(out: Path, files: dict[int, bytes], groups: dict[str, list[int]]) -> list[Path]:
    """Write every rank's trace and the comm groups (each file through a rename), recorded
    in the folder's manifest; an earlier export's rank files this one does not write are
    removed, so the folder never mixes two runs."""
    ledger = Ledger(out)
    written = [ledger.write(f"{PREFIX}.{rank}.et", data) for rank, data in files.items()]
    ordered = dict(sorted(groups.items(), key=lambda kv: (len(kv[0]), kv[0])))
    written.append(ledger.write(GROUPS, json.dumps(ordered, indent=1) + "\n"))
    names = {p.name for p in written}
    for name in sorted(ledger.files):
        if name not in names and fnmatch.fnmatchcase(name, OUTPUT_PATTERNS[0]):
            ledger.remove(name)
    ledger.save()
    return written


def et_files(paths: list[Path]) -> list[Path]:
    found: list[Path] = []
    for p in paths:
        check_special(p, "ET")
        if p.is_dir():
            found += sorted(p.glob("*.et"))
        elif p.is_file():
            found.append(p)
        else:
            raise InputError("ET", str(p), "an existing .et file or a folder of them")
    if not found:
        raise InputError("ET", " ".join(map(str, paths)), "at least one Chakra .et file")
    for p in found:
        check_special(p, "ET")  # a pipe named *.et in a folder: refused, never opened
    if len(found) > MAX_RANKS:
        raise InputError("ET", f"{len(found)} files", f"at most {MAX_RANKS} ranks")
    return found


def rank_of(path: Path, index: int) -> int:
    found = _RANK.search(path.name)
    return int(found.group(1)) if found else index


def read_groups(folder: Path, ranks: int) -> dict[str, list[int]]:
    """``comm_group.json``: communicator id (decimal digits, as ASTRA-sim parses it) ->
    distinct ranks; no file, no groups (every collective is then over all ranks)."""
    path = folder / GROUPS
    check_special(path, GROUPS)
    if not path.is_file():
        return {}
    data: Any = parse_json(read_bounded(path, "comm_group"), "comm_group", str(path))
    if not isinstance(data, dict):
        raise InputError(GROUPS, type(data).__name__, "a JSON object {id: [ranks]}")
    out = {}
    for name, members in data.items():
        if not name.isdigit():
            raise InputError(f"{GROUPS}: key", name, "a communicator id (decimal digits)")
        ok = isinstance(members, list) and all(
            type(r) is int and 0 <= r < ranks for r in members)
        if not ok or len(set(members)) != len(members):
            raise InputError(f"{GROUPS}: {name}", members, f"distinct ranks in 0..{ranks - 1}")
        out[name] = list(members)
    return out


def read_inputs(paths: list[Path]) -> tuple[dict[int, list[EtNode]], dict[str, list[int]]]:
    """Every rank's parsed nodes and the comm groups beside the first file."""
    files = et_files(paths)
    ranks = {rank_of(p, i): p for i, p in enumerate(files)}
    if len(ranks) != len(files):
        raise InputError("ET", "two files of one rank", "one .<rank>.et file per rank")
    if sorted(ranks) != list(range(len(ranks))):
        raise InputError("ET", f"ranks {sorted(ranks)[:8]}", f"ranks 0..{len(ranks) - 1}")
    traces = {}
    total = 0
    for rank, path in sorted(ranks.items()):
        _, nodes = read_trace(path)
        total += len(nodes)
        if total > MAX_TOTAL_NODES:
            raise InputError("ET", f"{path.name} (over {MAX_TOTAL_NODES:,} nodes so far)",
                             f"at most {MAX_TOTAL_NODES:,} nodes in all files")
        traces[rank] = [parse_node(n, rank, len(ranks), label(path.name, i, n))
                        for i, n in enumerate(nodes)]
    return traces, read_groups(files[0].parent, len(ranks))
