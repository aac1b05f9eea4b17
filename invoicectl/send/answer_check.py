"""An answer meant for another request: a transaction id this run was given for one invoice
and then again for another (``SeenTransactions``).

GoRoute gives every document a transaction of its own. A second invoice answered with the first
one's id got an answer from something that answered from memory (a caching proxy, a broken
gateway), which says nothing about its own request: counted as accepted, it would never be
sent, and the journal would call it delivered. It stays unknown instead, and is replayed under
its key, which GoRoute answers with its own transaction if it has it.
"""

from __future__ import annotations

from invoicectl.goroute.outcomes import Accepted, Outcome, Transient

# The ids of the most recent answers: a cache repeats recent ones, and memory stays flat
# however long the run.
_REMEMBERED = 4096


class SeenTransactions:
    """The transaction ids of this run's accepted answers, each with its invoice."""

    def __init__(self, remembered: int = _REMEMBERED) -> None:
        self._owners: dict[str, str] = {}
        self._remembered = remembered

    def checked(self, invoice_id: str, outcome: Outcome) -> Outcome:
        """``outcome``, unless it is an ``Accepted`` naming another invoice's transaction:
        then a ``Transient`` (the request's fate is unknown)."""
        if not isinstance(outcome, Accepted):
            return outcome
        owner = self._owners.setdefault(outcome.transaction_id, invoice_id)
        if owner == invoice_id:
            if len(self._owners) > self._remembered:
                del self._owners[next(iter(self._owners))]
            return outcome
        return Transient(
            reason=f"GoRoute's answer names transaction {outcome.transaction_id}, which this "
            f"run was given for invoice {owner}: an answer meant for another request (a proxy "
            "or cache answering from memory) says nothing of this one",
            http_status=outcome.http_status,
            request_id=outcome.request_id,
            raw_body=outcome.raw_body,
            duration=outcome.duration,
        )
