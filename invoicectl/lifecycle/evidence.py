"""Evidence that GoRoute may hold a delivery of an invoice already: once found, it stands.

Found by a send's history check (transactions with the invoice's number before this journal's
first send of it, or a search that could not reach back far enough to vouch for it) or by
reconcile (``unknown_sent_earlier``, ``unknown_ambiguous``: a match this journal's own send
cannot account for; ``content_unconfirmed``: this invoice, in content GoRoute does not show;
``other_version``: this invoice's number, for its receiver, in other content;
``not_found`` for a ``key_reused`` invoice: its key is used, the transaction named unseen).
It is an event of the audit trail (``delivery_evidence``) and stands whoever holds the invoice,
whatever verdict reconcile reaches next, until reconcile shows the transaction is no delivery
of this invoice (``different_document``, ``sent_then_failed``: ``evidence_cleared``), or an
operator's ``release --force`` gives their word that it is not (``evidence_dismissed``, which
a later reconcile reaching the same verdict does not overrule). An accepted invoice has no use
for it.

While it stands, no send sends or replays the invoice (``plan``), a release needs ``--force``
and ``--new-version`` is refused. Journals written before evidence was an event carry it in
the row (``_from_the_row``): a reconcile verdict that found it, or a history check's hold.
"""

from __future__ import annotations

import re
from typing import Protocol

from invoicectl.errors import JournalError
from invoicectl.journal.records import Event, Invoice, InvoiceState, beneath

EVIDENCE = "delivery_evidence"
CLEARED = "evidence_cleared"  # reconcile showed the transaction is no delivery of it
DISMISSED = "evidence_dismissed"  # the operator's word: release --force
KINDS = (EVIDENCE, CLEARED, DISMISSED)
# Reconcile's verdicts that found the invoice at GoRoute from a send it cannot account for;
# and those that showed a transaction found is no delivery of it.
FOUND_BEFORE = ("unknown_ambiguous", "unknown_sent_earlier", "content_unconfirmed", "other_version")
NO_DELIVERY = ("different_document", "sent_then_failed")
# Who holds an invoice GoRoute already holds a transaction for, found before its first send
# (``send.history``).
HISTORY_CHECK = "history check"


class JournalBackend(Protocol):
    """What evidence needs of a journal: an invoice's audit trail, read and added to, and
    whether another host's history check runs."""

    def events(self, invoice_id: str) -> list[Event]: ...

    def add_event(
        self, invoice_id: str | None, kind: str, detail: str, run_id: int | None = None
    ) -> None: ...

    def check_underway(self) -> bool: ...


def standing_evidence(journal: JournalBackend, invoice: Invoice) -> str | None:
    """Why GoRoute may hold a delivery of ``invoice`` already, or None."""
    return _standing(invoice, last_word(journal, invoice.invoice_id))


def _standing(invoice: Invoice, last: Event | None) -> str | None:
    """``standing_evidence``, the invoice's latest evidence event read already."""
    if invoice.state is InvoiceState.accepted:
        return None
    if last is None:
        return _from_the_row(invoice)
    return (last.detail or "found at GoRoute already") if last.kind == EVIDENCE else None


def last_word(journal: JournalBackend, invoice_id: str) -> Event | None:
    """The invoice's latest evidence event (found, cleared or dismissed), if any."""
    found = [event for event in journal.events(invoice_id) if event.kind in KINDS]
    return found[-1] if found else None


def note_evidence(
    journal: JournalBackend, invoice: Invoice, why: str, run_id: int | None = None
) -> None:
    """Record ``why`` as evidence, unless evidence already stands for ``invoice``."""
    if standing_evidence(journal, invoice) is None:
        journal.add_event(invoice.invoice_id, EVIDENCE, why, run_id)


def note_verdict(
    journal: JournalBackend,
    invoice: Invoice,
    verdict: str,
    run_id: int | None,
    clears: bool = True,
) -> None:
    """What reconcile's ``verdict`` on ``invoice`` (its row before the verdict) means for the
    evidence: found, cleared (unless not ``clears``: a verdict on a search cut short), or,
    where the operator dismissed it for this very verdict, as it was."""
    last = last_word(journal, invoice.invoice_id)  # read once for both questions
    standing = _standing(invoice, last)
    if last is None and standing is not None and not (verdict in NO_DELIVERY and clears):
        # Evidence an older journal keeps in the row only, which the verdict about to replace
        # the row's would lose: kept as an event (helper-89: a short search's verdict did).
        journal.add_event(invoice.invoice_id, EVIDENCE, standing, run_id)
        return
    if verdict in FOUND_BEFORE or _key_held_unseen(invoice, verdict):
        if _word_stands(invoice, last, verdict):
            return
        if standing is None:
            journal.add_event(invoice.invoice_id, EVIDENCE, _found(invoice, verdict), run_id)
    elif verdict in NO_DELIVERY and standing is not None and clears:
        journal.add_event(invoice.invoice_id, CLEARED, f"reconcile: {verdict}", run_id)


def operators_word_stands(journal: JournalBackend, invoice: Invoice, verdict: str) -> bool:
    """Whether the operator's ``release --force`` dismissed the evidence of this very finding
    (``invoice`` as it was before reconcile reached ``verdict`` again): their word stands
    until the finding changes, so reconcile neither finds it again nor holds it again."""
    return _word_stands(invoice, last_word(journal, invoice.invoice_id), verdict)


def _word_stands(invoice: Invoice, last: Event | None, verdict: str) -> bool:
    return last is not None and last.kind == DISMISSED and invoice.verdict == verdict


def _key_held_unseen(invoice: Invoice, verdict: str) -> bool:
    """A key GoRoute refused as used (422) naming a transaction it then says it does not
    know: something under the key reached it, and nothing shows it was no delivery. Also
    beneath an edit (helper-86: amended over key_reused, the 404 noted nothing, and
    ``--new-version`` went out)."""
    return verdict == "not_found" and beneath(invoice) is InvoiceState.key_reused


def _found(invoice: Invoice, verdict: str) -> str:
    if verdict in FOUND_BEFORE:
        return f"reconcile found it at GoRoute already ({verdict})"
    named = invoice.existing_transaction_id
    unseen = "naming no transaction, and a search of its list did not find it"
    if named:
        unseen = f"naming transaction {named}, then answered 404 for it"
    return (
        f"GoRoute refused its key {invoice.idempotency_key} as used (422), {unseen}: a send "
        "under that key may have been delivered (not_found)"
    )


def dismiss_evidence(journal: JournalBackend, invoice: Invoice, why: str) -> None:
    """The operator's word that the standing evidence is no delivery of ``invoice``."""
    journal.add_event(invoice.invoice_id, DISMISSED, why)


def dismissed_since_first_use(journal: JournalBackend, invoice: Invoice) -> bool:
    """Whether the operator's ``release --force`` is the last word on the evidence, given
    since the invoice's key first carried a request: what ``--new-version`` then accepts
    in place of a verdict that shows no delivery."""
    last = last_word(journal, invoice.invoice_id)
    first_used = invoice.key_first_used_at
    return (
        last is not None
        and last.kind == DISMISSED
        and (first_used is None or last.at >= first_used)
    )


def _from_the_row(invoice: Invoice) -> str | None:
    """The evidence a journal written before evidence was an event carries in the row: a
    verdict that found the invoice (whoever holds it, held or not), or a history check's hold
    (but one for a search that stopped short, whose reason says 'not checked')."""
    if invoice.verdict in FOUND_BEFORE:
        return f"reconcile found it at GoRoute already ({invoice.verdict})"
    checked = not (invoice.hold_reason or "").startswith("not checked")
    if invoice.held_by == HISTORY_CHECK and invoice.verdict not in NO_DELIVERY and checked:
        found = invoice.existing_transaction_id or "transactions"
        return (
            f"GoRoute already holds {found} with its number (found before this journal's "
            "first send of it)"
        )
    return None


class FoundMeanwhile(JournalError):
    """A first send refused: evidence that GoRoute holds the invoice already stands, noted
    since it was claimed by another host's history check, which cannot hold an invoice a
    live worker holds (``holds.hold_with_evidence``). The worker holds it instead."""

    def __init__(self, invoice_id: str, evidence: str) -> None:
        super().__init__(f"invoice {invoice_id}: {evidence}; nothing was sent")
        self.invoice_id, self.evidence = invoice_id, evidence
        # The one transaction the check found of it, kept as its hold keeps it, for reconcile
        # to judge and adopt (the reason's wording: ``send.history_texts.found_reason``).
        named = re.match(r"GoRoute already holds transaction (\S+) \(", evidence)
        self.existing = named.group(1) if named else None


# How often a worker whose first send met another host's check asks again (seconds).
CHECK_POLL = 1.0


class CheckUnderway(JournalError):
    """A first send refused while another host's history check runs (``journal.CheckTurn``),
    or one begun never recorded its end: that check may find, or have found, the invoice at
    GoRoute. Nothing was sent; the worker asks again (``send.workers.may_wait_for_check``)."""

    def __init__(self, invoice_id: str) -> None:
        super().__init__(
            f"invoice {invoice_id}: another host is checking GoRoute's transactions before "
            "its first send from this journal; nothing was sent for it yet"
        )


def refuse_first_send(journal: JournalBackend, invoice: Invoice) -> None:
    """On a journal several hosts send from (one with a worker registered), a first send is
    refused while another host's history check runs or never ended (``CheckUnderway``), or
    where evidence it noted meanwhile stands (``FoundMeanwhile``); read in the attempt's
    write transaction."""
    if invoice.key_first_used_at is None and getattr(journal, "worker_id", None) is not None:
        if journal.check_underway():
            raise CheckUnderway(invoice.invoice_id)
        evidence = standing_evidence(journal, invoice)
        if evidence is not None:
            raise FoundMeanwhile(invoice.invoice_id, evidence)
