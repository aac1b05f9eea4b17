"""An answer meant for another request: a 202 naming a transaction id that is another
invoice's, given to it earlier in this run (a 202, or a 422's ``existing_transaction_id``) or
held for it by the journal (``SeenTransactions``).

GoRoute gives every document a transaction of its own. An invoice answered with another one's
id got an answer from something that answered from memory (a caching proxy, a broken
gateway), which says nothing about its own request: counted as accepted, it would never be
sent, and the journal would call it delivered. It stays unknown instead, and is replayed under
its key, which GoRoute answers with its own transaction if it has it.
"""

from __future__ import annotations

from collections.abc import Callable

from invoicectl.goroute.outcomes import Accepted, KeyReused, Outcome, Transient

# The ids of the most recent answers: a cache repeats recent ones, and memory stays flat
# however long the run.
_REMEMBERED = 4096


class SeenTransactions:
    """The transaction ids of this run's accepted answers, each with its invoice, and the
    journal's (``owner``: the other invoice holding an id, by its index): a run's answers
    grouped into one commit are not in the journal yet when the next is checked."""

    def __init__(
        self, owner: Callable[[str, str, str], str | None], remembered: int = _REMEMBERED
    ) -> None:
        # Each id's invoice, and the key whose send it is when a 422 named it (else None).
        self._owners: dict[str, tuple[str, str | None]] = {}
        self._owner_in_journal = owner
        self._remembered = remembered

    def checked(self, invoice_id: str, key: str, outcome: Outcome) -> Outcome:
        """``outcome`` of a request under ``key``, unless it is an ``Accepted`` naming
        another invoice's transaction: then a ``Transient`` (the request's fate is unknown).
        The id a 422 names is the send of that invoice's key: another invoice's from then
        on, but to a request under that same key (two invoice IDs may share a key)."""
        named = outcome.existing_transaction_id if isinstance(outcome, KeyReused) else None
        # Never over an acceptance seen (or a journal holder): that one stays the owner.
        if named and self._owners.get(named, (None, key))[1] is not None:
            self._remember(named, (invoice_id, key))
        if not isinstance(outcome, Accepted):
            return outcome
        txn = outcome.transaction_id
        owner, owner_key = self._owners.get(txn, (invoice_id, None))
        if owner == invoice_id or owner_key == key:
            owner = self._owner_in_journal(txn, invoice_id, key) or invoice_id
            self._remember(txn, (owner, None))  # the journal's holder, not a refused answer
        if owner == invoice_id:
            return outcome
        return Transient(
            reason=f"GoRoute's answer names transaction {txn}, which is invoice {owner}'s: an "
            "answer meant for another request (a proxy or cache answering from memory) says "
            "nothing of this one",
            **outcome.common(),
        )

    def _remember(self, txn: str, owner: tuple[str, str | None]) -> None:
        """``txn`` is ``owner``'s; the oldest id forgotten past ``remembered``."""
        self._owners.pop(txn, None)
        self._owners[txn] = owner
        if len(self._owners) > self._remembered:
            del self._owners[next(iter(self._owners))]
