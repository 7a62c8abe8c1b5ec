"""The bad-input contract: one line naming the field, the value and what is allowed.

Every user-facing failure caused by input (scenario files, flags, data files) is raised as
:class:`InputError`; the CLI turns it into a single line on stderr and exit status 2.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

EXIT_BAD_INPUT = 2


class InputError(ValueError):
    """Bad user input, reported as ``field: got VALUE; allowed: ALLOWED``."""

    def __init__(self, field: str, value: Any, allowed: str) -> None:
        self.field = field
        self.value = value
        self.allowed = allowed
        super().__init__(self.line())

    def line(self) -> str:
        shown = repr(value_text(self.value))
        return f"error: {self.field}: got {shown}; allowed: {self.allowed}"

    def renamed(self, names: Mapping[str, str]) -> InputError:
        """The same error naming what the user typed: lower layers name model fields
        (``nbytes``), a command maps them to its flags (``--bytes``)."""
        field = names.get(self.field, self.field)
        return self if field == self.field else InputError(field, self.value, self.allowed)


class CheckError(RuntimeError):
    """A built-in conservation check failed at the end of a run (names the check)."""

    def __init__(self, check: str, detail: str) -> None:
        self.check = check
        super().__init__(f"check failed: {check}: {detail}")


def value_text(value: Any, limit: int = 120) -> str:
    """A short printable form of a bad value (long values are cut, never multi-line).

    The tail is kept: for a path it holds the file name, the part a user needs to see.
    """
    text = str(value).replace("\n", " ")
    return text if len(text) <= limit else "..." + text[-(limit - 3) :]
