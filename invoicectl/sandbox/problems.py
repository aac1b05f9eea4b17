"""Answers other than success, as plain data: a ``Problem`` raised anywhere, with its details.

This module imports nothing of the emulator's, so every layer can raise a ``Problem``; how
one is written on the wire (the shapes GoRoute's docs show) lives in ``responses.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Detail:
    """One finding, as the docs' ``{rule, location, message}``."""

    rule: str
    message: str
    location: str = ""

    def as_json(self) -> dict[str, str]:
        return {"rule": self.rule, "location": self.location, "message": self.message}


# Not frozen: the interpreter and contextlib set attributes such as __traceback__ on raise.
@dataclass(eq=False)
class Problem(Exception):
    """An answer other than success, raised anywhere in a handler and rendered once."""

    status: int
    code: str
    message: str
    details: tuple[Detail, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
