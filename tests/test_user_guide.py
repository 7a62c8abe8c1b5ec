"""Every example of ``docs/user-guide.md`` runs verbatim, one fresh empty folder per section.

No path is rewritten: a command that only works inside the repository fails here.

Blocks: ```` ```LANG file=NAME ```` writes NAME; ```` ```python run ```` runs the block with
this Python; in ```` ```sh ```` blocks every ``libra-des ...`` line runs through the CLI and
must exit 0, or 2 when the line ends with ``# exit 2``.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from libra_des.cli import main

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "user-guide.md"
BLOCK = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```", re.M | re.S)


def sections() -> list[tuple[str, str]]:
    parts = re.split(r"^## ", GUIDE.read_text(), flags=re.M)
    return [("intro", parts[0])] + [(p.splitlines()[0], p) for p in parts[1:]]


SECTIONS = sections()


@pytest.mark.parametrize("title,text", SECTIONS, ids=[t for t, _ in SECTIONS])
def test_section_runs(title: str, text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert not any(tmp_path.iterdir()), "each section starts in an empty folder"
    ran = 0
    for lang, info, body in BLOCK.findall(text):
        name = re.search(r"file=(\S+)", info)
        if name:
            (tmp_path / name.group(1)).write_text(body)
        elif lang == "python" and "run" in info:
            done = subprocess.run([sys.executable, "-c", body], capture_output=True, text=True,
                                  timeout=120, env={**os.environ})
            assert done.returncode == 0, done.stderr[-2000:]
            ran += 1
        elif lang == "sh":
            for line in body.splitlines():
                if not line.startswith("libra-des "):
                    continue
                want = 2 if line.rstrip().endswith("# exit 2") else 0
                argv = shlex.split(line.split("#")[0])[1:]
                code = main(argv)
                err = capsys.readouterr().err
                assert code == want, f"{line}\n{err}"
                if want == 2:
                    assert err.count("\n") == 1, err
                ran += 1
    assert ran > 0, f"section {title!r} runs nothing"
