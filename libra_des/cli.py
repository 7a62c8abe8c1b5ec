"""Command-line entry point: ``libra-des <command> ...``.

Each command lives in ``libra_des/commands/<name>.py`` and exposes ``register(subparsers)``.
Bad input of any kind ends here as one line on stderr and exit status 2 (no traceback).
Exit statuses: 0 success; 1 a sweep with failed points; 2 bad input (or an output path
that cannot be written); 3 a failed built-in check or an internal error, i.e. a bug, reported
as one line asking for a bug report (:mod:`libra_des.commands.safety`); 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from collections.abc import Sequence
from typing import Any

from rich_argparse import RawDescriptionRichHelpFormatter

from libra_des.base.startup import blas_threads, tune_process
from libra_des.commands.safety import guarded
from libra_des.errors import EXIT_BAD_INPUT, InputError

#: Command modules, in the order ``--help`` lists them.
COMMANDS = ("quickstart", "run", "plan", "sweep", "cost", "profile", "validate", "figs", "report",
            "explain", "calibrate", "import", "scenario")

#: What ``libra-des --help`` says above and below the command list (plain text, no markup).
DESCRIPTION = "Simulate Libra and its baselines on modelled GPU clusters."
EXAMPLES = """examples:
  libra-des quickstart                                  # 1,024 GPUs: Libra Full vs Ulysses
  libra-des run scenarios/quickstart.yaml --set parallelism.dp=16 --trace
  libra-des sweep scenarios/quickstart.yaml --grid balancer.policy=libra,ulysses
  libra-des figs --quick --out figs                     # every paper-style figure
  libra-des report runs/quickstart --out report.html    # one self-contained HTML page
  libra-des COMMAND --help                              # the options of one command
"""


class HelpFormatter(RawDescriptionRichHelpFormatter):
    """Descriptions kept as written; group titles keep their case (rich-argparse title-cases
    them, which mangles file names such as ``workloads/longctx-1m.yaml``)."""

    group_name_formatter = staticmethod(lambda title: title[:1].upper() + title[1:])  # type: ignore[assignment]


def help_formatter(prog: str) -> argparse.HelpFormatter:
    """Rich-coloured help with command names in one column."""
    return HelpFormatter(prog, max_help_position=34)


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports usage errors on one line with exit status 2; rich help text."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", help_formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(usage_line(self.prog, message) + "\n")
        raise SystemExit(EXIT_BAD_INPUT)


#: argparse's type names as the one-line form says them.
TYPE_WORDS = {"float": "number", "int": "whole number", "positive": "positive number"}
#: argparse's usage messages -> (field, value, allowed) of the one-line bad-input form.
USAGE_FORMS = (
    (re.compile(r"argument (?P<f>[^:]+): invalid (?P<t>\w+) value: (?P<v>.*)"),
     lambda m: (m["f"], m["v"], f"a {TYPE_WORDS.get(m['t'], m['t'])}")),
    (re.compile(r"argument (?P<f>[^:]+): invalid choice: (?P<v>.*?) \(choose from (?P<c>.*)\)"),
     lambda m: (m["f"], m["v"], m["c"].replace("'", "").replace(", ", " | "))),
    (re.compile(r"argument (?P<f>[^:]+): expected (?P<n>.*)"),
     lambda m: (m["f"], "nothing", m["n"].replace("argument", "value"))),
    (re.compile(r"the following arguments are required: (?P<f>.*)"),
     lambda m: (m["f"], "nothing", "a value (required)")),
    (re.compile(r"unrecognized arguments: (?P<v>.*)"),
     lambda m: ("arguments", repr(m["v"]), "the options the command accepts")),
)


def usage_line(prog: str, message: str) -> str:
    """``error: FIELD: got VALUE; allowed: ...`` for an argparse usage message (the same
    one-line form as every other bad input); an unknown form keeps argparse's words."""
    for pattern, parts in USAGE_FORMS:
        match = pattern.fullmatch(message)
        if match:
            field, value, allowed = parts(match)
            return f"error: {field}: got {value}; allowed: {allowed} (see {prog} --help)"
    return f"error: {prog}: got {message!r}; allowed: the usage {prog} --help shows"


def chosen_command(argv: Sequence[str]) -> str | None:
    """The sub-command named on the command line, if it is one of COMMANDS (else None)."""
    first = next((a for a in argv if not a.startswith("-")), None)
    return first if first in COMMANDS else None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The full parser; with ``argv`` naming a command, only that command's module is imported
    (the others get a bare sub-parser, so choices and errors stay the same): importing every
    command costs more than a short ``plan`` run."""
    from libra_des.api import __version__  # inside blas_threads (run_command): numpy may load

    parser = OneLineParser(prog="libra-des", description=DESCRIPTION, epilog=EXAMPLES)
    parser.add_argument("--version", action="version", version=f"libra-des {__version__}")
    # prog given (argparse's default: the same name, formatted by the help formatter, whose
    # first use imports rich: a visible share of a short ``plan`` run).
    subs = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser,
                                 metavar="COMMAND [ARGS]", title="commands", prog=parser.prog)
    only = chosen_command(argv) if argv is not None else None
    for name in COMMANDS:
        if only is not None and name != only:
            subs.add_parser(name)
            continue
        try:
            module = importlib.import_module(f"libra_des.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"libra_des.commands.{name}":
                raise
            continue
        module.register(subs)
    return parser


#: Options that take one ``KEY=VALUE`` word each.
KEY_VALUE_OPTIONS = ("--set", "--grid")


def split_key_value(words: Sequence[str]) -> str | None:
    """The one-line error for ``--set KEY VALUE`` typed as two words (argparse would only
    say the second word is not an option), else None."""
    for option, key, value in zip(words, words[1:], words[2:], strict=False):
        if (option in KEY_VALUE_OPTIONS and "=" not in key and not key.startswith("-")
                and not value.startswith("-")):
            return (f"error: {option}: got {f'{key} {value}'!r}; allowed: KEY=VALUE as one "
                    f"word, e.g. {option} {key}={value}")
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """The ``libra-des`` command: the process is the command's own, so it is tuned for speed
    first (``startup.tune_process``: the collector, numba's BLAS check, the C heap)."""
    tune_process()
    words = list(sys.argv[1:] if argv is None else argv)
    split = split_key_value(words)
    if split is not None:
        sys.stderr.write(split + "\n")
        return EXIT_BAD_INPUT
    return guarded(run_command, words, command_name(words))


def run_command(argv: list[str]) -> int:
    """Parse the command line and run the chosen command's handler."""
    # The whole run: numpy's OpenBLAS loads with the command's imports, scipy's own when
    # the flow network's solver imports scipy.linalg (startup.py).
    with blas_threads(chosen_command(argv)):
        parser = build_parser(argv)
        args = parser.parse_args(argv)
        try:
            code: int = args.handler(args)
        except InputError as exc:
            # Lower layers name model fields; a command maps them to the flags it was given.
            raise exc.renamed(getattr(args, "flag_names", {})) from None
    return code


def command_name(argv: Sequence[str]) -> str:
    """``run`` or ``profile import``: what a bug-report line names."""
    words = [w for w in argv if not w.startswith("-")]
    if words and words[0] in COMMANDS:
        return " ".join(words[:2]) if words[0] == "profile" and len(words) > 1 else words[0]
    return "libra-des"

if __name__ == "__main__":
    raise SystemExit(main())
