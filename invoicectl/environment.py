"""Which GoRoute a journal belongs to (design.md, "an environment binding").

Keys and transactions of one environment mean nothing in another: a journal used against one
base URL refuses another unless told explicitly.
"""

from __future__ import annotations

from invoicectl.errors import EnvironmentMismatch
from invoicectl.journal.interface import JournalBackend


def check_environment(journal: JournalBackend, base_url: str, *, allow_change: bool) -> str | None:
    """The base URL the journal is bound to (None: not yet); another is refused unless allowed."""
    bound = journal.bound_base_url()
    if bound is not None and bound != base_url and not allow_change:
        raise EnvironmentMismatch(
            f"the journal {journal.path} is bound to {bound}, not {base_url}; keys and "
            "transactions of one environment mean nothing in another. Use another --journal, "
            "or --allow-environment-change if this is intended"
        )
    return bound


def bind_environment(journal: JournalBackend, base_url: str, *, allow_change: bool) -> None:
    """A journal sends to one base URL; another is refused unless explicitly allowed."""
    if check_environment(journal, base_url, allow_change=allow_change) != base_url:
        journal.bind_base_url(base_url)
