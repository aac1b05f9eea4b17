"""The one exception the UBL reader raises: a file invoicectl refuses to send, and why."""

from __future__ import annotations


class InvalidDocument(Exception):
    """A file invoicectl refuses to send; ``reason`` is one line a finance clerk can act on."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
