"""Plain lines on stdout for a pipe or a file, without rich."""

from __future__ import annotations

from typing import TextIO


class PlainLines:
    """What a rich console prints of a line invoicectl composes itself (counts, a chain
    head: no markup, tabs or control characters) when stdout is a pipe or a file: the line as
    it is. Importing rich was a tenth of a piped ``status``'s start-up."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def print(self, text: str, *, highlight: bool | None = None) -> None:
        self._stream.write(f"{text}\n")
