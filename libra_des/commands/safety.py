"""The CLI's safety net: every outcome of a command is one line and a known exit status.

``guarded`` runs a command handler and maps what escapes it:

* :class:`~libra_des.errors.InputError` -> its one line, exit 2 (bad input);
* :class:`OSError` (disk full, permission denied, a name the OS refuses) -> the contract's
  one line (``error: COMMAND: got 'PATH (reason)'; allowed: ...``), exit 2: the
  environment, not the simulator, is at fault;
* :class:`~libra_des.errors.CheckError` -> one line, exit 3 (a result failed a built-in check:
  a bug, never printed as a result);
* ``MemoryError`` -> one line naming the memory limit it hit, and the process ends at once
  (exit 2: the input asks for more than the machine has) so that no worker thread or pool
  keeps it alive;
* a closed stdout (``libra-des run --json | head -c10``) -> quiet exit 0;
* ``KeyboardInterrupt`` -> ``interrupted``, exit 130;
* anything else -> one line naming the command and asking for a bug report with the input,
  exit 3. No traceback is ever printed.

Library warnings (numpy's overflow or invalid-value ``RuntimeWarning``, scipy's fit warnings,
``loadtxt`` on an empty file) are silenced inside commands so that stderr stays one line: a
non-finite number that reaches a result is caught by the plausibility checks instead
(:mod:`libra_des.results.plausibility`), and bad input by the validation layer.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable
from typing import TypeVar

from libra_des.errors import EXIT_BAD_INPUT, CheckError, InputError, value_text

EXIT_BUG = 3
EXIT_INTERRUPTED = 130

T = TypeVar("T")


def say(line: str) -> None:
    """Write one line to stderr; a closed stderr is not worth a traceback."""
    try:
        sys.stderr.write(line.replace("\n", " ") + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def os_error_line(command: str, exc: OSError) -> str:
    """The contract's one line for an OS error: the command as the field, the path and the
    OS's reason as the value (the checks before any work name the exact flag instead)."""
    what = exc.strerror or type(exc).__name__
    where = exc.filename if exc.filename is not None else ""
    value = f"{value_text(where)} ({what})" if where else what
    return InputError(command, value, "paths the OS lets this command read and write (a "
                      "readable input, a writable folder with free space)").line()


def memory_line(command: str) -> str:
    """The one line for running out of memory, naming the limit that was hit: the process's
    address-space limit (``ulimit -v``) when one is set, else the machine's memory."""
    import resource

    limit, _ = resource.getrlimit(resource.RLIMIT_AS)
    if limit != resource.RLIM_INFINITY:
        hit = f"the address-space limit of {limit / 2**30:.1f} GiB (ulimit -v)"
    else:
        try:
            total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
            hit = f"this machine's {total / 2**30:.1f} GiB of memory"
        except (OSError, ValueError):
            hit = "this machine's memory"
    return InputError(command, "an input needing more memory than is free",
                      f"an input that fits in {hit} (make the scenario smaller)").line()


def guarded(handler: Callable[[T], int], args: T, command: str) -> int:
    """Run ``handler(args)`` under the one-line contract (see the module docstring)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return handler(args)
    except InputError as exc:
        say(exc.line())
        return EXIT_BAD_INPUT
    except CheckError as exc:
        say(f"error: {command}: {exc}; this is a bug, please report it with the input")
        return EXIT_BUG
    except KeyboardInterrupt:
        say("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        silence_stdout()
        return 0
    except MemoryError:
        say(memory_line(command))
        os._exit(EXIT_BAD_INPUT)
    except RecursionError:
        say(f"error: {command}: input nested too deeply to read")
        return EXIT_BAD_INPUT
    except OSError as exc:
        say(os_error_line(command, exc))
        return EXIT_BAD_INPUT
    except Exception as exc:
        detail = value_text(f"{type(exc).__name__}: {exc}", 160)
        say(f"error: {command}: internal error ({detail}); this is a bug, please report it "
            "with the command line and input files")
        return EXIT_BUG
