"""A Peppol participant (scheme and identifier) as the emulator records one: plain data."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Party:
    scheme: str
    identifier: str
    name: str | None = None

    @property
    def participant(self) -> str:
        """``scheme:identifier``, the way Peppol writes a participant."""
        return f"{self.scheme}:{self.identifier}"


def parse_participant(value: str) -> Party:
    """A ``Party`` from ``scheme:identifier`` (staging takes participants written that way)."""
    scheme, sep, identifier = value.partition(":")
    if not sep or not scheme or not identifier:
        raise ValueError(f"participant {value!r} must be written scheme:identifier")
    return Party(scheme, identifier)
