"""Help text written for users: one line per command, examples, no reStructuredText markup."""

from __future__ import annotations

import re
import subprocess
import sys

from libra_des.cli import COMMANDS


def help_text(*args: str) -> str:
    env = {"COLUMNS": "100", "NO_COLOR": "1", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "libra_des.cli", *args, "--help"],
                          capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_top_level_help_lists_each_command_on_one_line_with_examples() -> None:
    text = help_text()
    for name in COMMANDS:
        (line,) = [ln for ln in text.splitlines() if re.match(rf"\s+{name}\s{{2,}}\S", ln)]
        following = text.splitlines()[text.splitlines().index(line) + 1]
        assert not re.match(r"\s{10,}\S", following) or following.strip().split()[0] in COMMANDS
    assert "examples:" in text and "libra-des figs --quick" in text
    assert not re.search(r"``|:mod:|:func:|:class:", text)


def test_command_help_has_no_markup() -> None:
    for name in ("figs", "report", "sweep"):
        text = help_text(name)
        assert not re.search(r"``|:mod:|:func:|:class:", text), name
