"""The operator's holds: hold, release, abandon; and the verdict reconcile last reached.

A hold sits beside the state and never replaces it: a held invoice keeps exactly the state,
key and 24-hour window it had, and no send sends or replays it. Releasing it therefore
restores exactly the rules that applied before: a ``pending`` invoice is sent by the next run,
an ``unknown`` one is replayed under its key while the window is open and left for reconcile
after it. A release can never turn an unknown send into a new one. ``abandoned`` is final:
the operator settled the invoice outside invoicectl; it stays in the journal and the reports
and is never sent again. Each decision is an event naming who, and why.

A send holds an invoice itself when the bytes the journal stored for it no longer match their
sha256 (``hold_damaged``, by ``STORED_COPY_CHECK``): those bytes are never sent, and the rest of
the outbox goes on. A rescan of a file whose bytes match rewrites the stored copy
(``journal.scans``), and ``lift_repaired`` lifts the hold. A scan lifts a hold for files that
disagree on a number (``hold_clash``) too, once one is left. An operator's hold of an invoice
either holds (``SCAN_LIFTED``) takes that hold over, and only a release lifts it then: the
operator froze it, and a repaired file must not send it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from invoicectl.errors import InvoiceBusy, StoredCopyDamaged, UsageError
from invoicectl.journal.interface import JournalBackend
from invoicectl.journal.records import (
    DUPLICATE_CHECK,
    SCAN_LIFTED,
    STORED_COPY_CHECK,
    Hold,
    Invoice,
    InvoiceState,
)
from invoicectl.lifecycle.evidence import (
    HISTORY_CHECK,
    FoundMeanwhile,
    dismiss_evidence,
    note_evidence,
    note_verdict,
    standing_evidence,
)
from invoicectl.lifecycle.next_steps import unheld
from invoicectl.lifecycle.refusals import refusal_word_due, send_not_looked_up
from invoicectl.lifecycle.transitions import Transition, TransitionRefused, allowed, write


@dataclass(frozen=True)
class Decision:
    """What an operator's action on one invoice came to (or, in a dry run, would)."""

    invoice_id: str
    done: bool  # False: refused, or nothing to do; ``message`` says why
    message: str


def hold(
    journal: JournalBackend,
    invoice_id: str,
    reason: str,
    by: str,
    *,
    dry_run: bool = False,
    existing_transaction_id: str | None = None,
    take_over: bool = False,
) -> Decision:
    """Keep ``invoice_id`` from being sent or replayed until it is released.

    ``existing_transaction_id``: a transaction GoRoute already holds for this never-sent
    invoice (a send's history check found it), kept for ``reconcile`` to judge and adopt.
    ``take_over`` (an operator's hold): a hold a scan would lift by itself becomes this one.
    """
    invoice = _known(journal, invoice_id)
    taken_over = take_over and invoice.hold is Hold.held and invoice.held_by in SCAN_LIFTED
    if invoice.hold is not None and not taken_over:
        return Decision(invoice_id, False, f"already {invoice.hold} ({invoice.hold_reason})")
    if not allowed(Transition.hold, invoice.state):
        return Decision(invoice_id, False, f"{invoice.state}: nothing left to hold")
    found = {"existing_transaction_id": existing_transaction_id} if existing_transaction_id else {}
    if taken_over:
        reason = f"{reason} (was held by {invoice.held_by}: {invoice.hold_reason})"
    if not dry_run:
        _set_hold(journal, invoice, Transition.hold, Hold.held, reason, by, **found)
    return Decision(invoice_id, True, f"held ({invoice.state}): {reason}")


def hold_found(journal: JournalBackend, invoice: Invoice, reason: str, by: str) -> None:
    """Keep an invoice ``send --new-version`` was to send under its next key, GoRoute holding
    a send of it this journal cannot account for, from that and any send until released. An
    accepted one too, unlike ``hold``: its failed delivery is what lets a new version go."""
    if invoice.hold is None:
        _set_hold(journal, invoice, Transition.hold_found, Hold.held, reason, by)


def hold_with_evidence(
    journal: JournalBackend,
    invoice: Invoice,
    reason: str,
    by: str,
    existing_transaction_id: str | None = None,
) -> None:
    """Held for ``reason``, what GoRoute was found to hold of it, with evidence that stands
    whoever holds it and whatever its state becomes; a --new-version's keeps no transaction
    as its own, and an accepted one no evidence (it would stand once the new version made it
    pending). When a live send worker holds it (another host, on a shared journal): the
    evidence alone, while that worker has not sent it (its claim may predate its own check),
    which its first request finds (``evidence.refuse_first_send``) and holds it for;
    nothing once it has."""
    try:
        if invoice.key_first_used_at is None:
            found = existing_transaction_id
            hold(journal, invoice.invoice_id, reason, by, existing_transaction_id=found)
        else:
            hold_found(journal, invoice, reason, by)
    except InvoiceBusy:
        now = journal.invoice(invoice.invoice_id)
        if now is None or now.key_first_used_at is not None:
            return  # that host's send took it up: what was found may be that send
        invoice = now
    if invoice.state is not InvoiceState.accepted:
        note_evidence(journal, invoice, reason)


def hold_meanwhile(journal: JournalBackend, refused: FoundMeanwhile) -> bool:
    """A worker's hold of what another host's check found after the worker claimed it, as
    that check would have held it (``hold_with_evidence``), with the one transaction found
    for reconcile to judge; whether it was held."""
    found, why = refused.existing, refused.evidence
    return hold(journal, refused.invoice_id, why, HISTORY_CHECK, existing_transaction_id=found).done


def abandon(
    journal: JournalBackend,
    invoice_id: str,
    reason: str,
    by: str,
    *,
    dry_run: bool = False,
    force: bool = False,
) -> Decision:
    """The operator settled ``invoice_id`` outside invoicectl: never send it again. An
    accepted invoice only when its delivery failed (sent on paper, say): a new version is all
    that was left to send of it. One whose send may have been delivered, only once reconcile
    has looked it up (``refusals.send_not_looked_up``), or with ``force``."""
    invoice = _known(journal, invoice_id)
    if invoice.hold is Hold.abandoned:
        return Decision(invoice_id, False, f"already abandoned ({invoice.hold_reason})")
    delivered = invoice.state is InvoiceState.accepted and invoice.remote_status != "failed"
    if delivered or not allowed(Transition.abandon, invoice.state):
        return Decision(invoice_id, False, f"{invoice.state}: it was sent; nothing to abandon")
    if not force and (unjudged := send_not_looked_up(journal, invoice)) is not None:
        return Decision(invoice_id, False, unjudged)
    found = standing_evidence(journal, invoice) or _found_by_reconcile(invoice)
    if not dry_run:
        _set_hold(journal, invoice, Transition.abandon, Hold.abandoned, reason, by)
    said = f"abandoned ({invoice.state}): {reason}"
    if found is not None:  # helper-106: a clerk who posts it would deliver it twice
        said += f"; but {found}: GoRoute may have delivered it, do not send it another way"
    return Decision(invoice_id, True, said)


def _found_by_reconcile(invoice: Invoice) -> str | None:
    """Reconcile's last verdict found a transaction of the invoice's unanswered send."""
    if invoice.verdict != "unknown_found":
        return None
    return f"reconcile found a transaction of its send under {invoice.idempotency_key}"


def release(
    journal: JournalBackend,
    invoice_id: str,
    by: str,
    *,
    dry_run: bool = False,
    force: bool = False,
) -> Decision:
    """Lift a hold: the invoice is again under exactly the rules of its state. A hold that
    says GoRoute may hold a delivery already (``evidence``), whoever placed it, is lifted only
    with ``force``: the operator's word that it is not this invoice's, which clears it."""
    invoice = _known(journal, invoice_id)
    if invoice.hold is Hold.abandoned:
        return Decision(invoice_id, False, "abandoned, which is final")
    evidence = standing_evidence(journal, invoice)
    # What --force answers: the evidence, or a refusal that may hide a delivery (a 409).
    word = evidence or refusal_word_due(journal, invoice)
    if invoice.hold is None:
        if not (force and word):  # found, or refused as a duplicate, and not held: the word alone
            return Decision(invoice_id, False, "not held")
        if not dry_run:
            dismiss_evidence(journal, invoice, f"by {by} with --force: {word}")
        return Decision(invoice_id, True, f"not held; the evidence dismissed ({word})")
    if not force and evidence is not None:
        # A send of a key the journal has no answer for (``hold_found``) no reconcile judges.
        adopts = "`invoicectl reconcile --apply` adopts that transaction if it is this invoice's; "
        if invoice.key_first_used_at is not None and invoice.held_by == HISTORY_CHECK:
            adopts = ""
        return Decision(
            invoice_id,
            False,
            f"{evidence}: released, it could be delivered twice. {adopts}`release --force` only "
            "once you know it is not",
        )
    if not dry_run:
        with journal.transaction():
            _lift(journal, invoice, f"by {by} (was held: {invoice.hold_reason})")
            if force and word is not None:
                dismiss_evidence(journal, invoice, f"released with --force by {by}: {word}")
    was = f"held by {invoice.held_by}: {invoice.hold_reason}"
    again = ""
    if invoice.held_by == "receiver check":
        again = (
            "; the next send checks its receiver again (`--refresh-receivers` asks GoRoute "
            "anew, `--no-receiver-check` sends without asking)"
        )
    elif invoice.held_by == "validation":
        again = (
            "; `send --validate` holds the same content again (fix the file for a new "
            "revision, or send without `--validate`)"
        )
    elif taken := _taken_over(invoice.hold_reason):
        again = f"; unless what the {taken} held it for is gone, the scan before it holds it again"
    next_step = unheld(invoice, journal.clock(), word_given=force and word is not None)
    return Decision(invoice_id, True, f"released ({was}): {next_step}{again}")


def _taken_over(reason: str | None) -> str | None:
    """The scan's holder whose hold an operator's took over (``hold``), as its reason says."""
    return next((by for by in SCAN_LIFTED if f"(was held by {by}: " in (reason or "")), None)


def decide(
    journal: JournalBackend,
    action: str,
    invoice_id: str,
    by: str,
    *,
    reason: str = "",
    dry_run: bool = False,
    force: bool = False,
) -> Decision:
    """An operator's ``hold``, ``release`` or ``abandon`` of one invoice. Refused, nothing
    written, when the invoice changed between reading it and writing the decision (another
    operator's, say): the decision was taken on what no longer holds; and when a send worker
    holds it (a PostgreSQL journal): a bulk decision goes on with the others, each said."""
    try:
        if action == "release":
            return release(journal, invoice_id, by, dry_run=dry_run, force=force)
        if action == "hold":
            return hold(journal, invoice_id, reason, by, dry_run=dry_run, take_over=True)
        return abandon(journal, invoice_id, reason, by, dry_run=dry_run, force=force)
    except TransitionRefused:
        return Decision(
            invoice_id,
            False,
            f"changed by another command while {action} was deciding; nothing changed: "
            f"look again (`invoicectl show {invoice_id}`)",
        )
    except InvoiceBusy as busy:  # a send worker holds it: refused alone, the rest go on
        return Decision(invoice_id, False, str(busy).replace(f"invoice {invoice_id} is", "it is"))


def record_verdict(
    journal: JournalBackend,
    invoice_id: str,
    verdict: str,
    at: str,
    run_id: int | None = None,
    keys_transaction: str | None = None,
    clears: bool = True,
) -> None:
    """The verdict reconcile reached for the invoice, and when; an event when it changed. A
    verdict that found it at GoRoute from another send records evidence; one that showed the
    transaction is no delivery of it clears the evidence (``evidence``).
    ``clears``: False for a verdict that must not clear evidence (``note_verdict``).
    ``keys_transaction``: the transaction the verdict found its key carried (a send that
    failed), kept as the key's (``existing_transaction_id``), in the row's chain record too:
    a new version's search then knows it for the earlier key's, not for its own."""
    with journal.transaction():
        invoice = journal.invoice(invoice_id)
        if invoice is None:
            return
        found = {"existing_transaction_id": keys_transaction} if keys_transaction else {}
        write(
            journal,
            Transition.record_verdict,
            invoice,
            touch=False,
            verdict=verdict,
            verdict_at=at,
            **found,
        )
        if verdict != invoice.verdict:
            journal.add_event(
                invoice_id, "verdict", f"{invoice.verdict or 'none'} -> {verdict}", run_id
            )
        note_verdict(journal, invoice, verdict, run_id, clears)


def _set_hold(
    journal: JournalBackend,
    invoice: Invoice,
    transition: Transition,
    kind: Hold,
    reason: str,
    by: str,
    **found: Any,
) -> None:
    with journal.transaction():
        write(
            journal,
            transition,
            invoice,
            hold=kind,
            hold_reason=reason,
            held_at=journal.now(),
            held_by=by,
            **found,
        )
        journal.add_event(invoice.invoice_id, str(transition), f"by {by}: {reason}")


def _lift(journal: JournalBackend, invoice: Invoice, detail: str) -> None:
    """The hold taken off, and a ``release`` event saying by whom."""
    write(
        journal,
        Transition.release,
        invoice,
        hold=None,
        hold_reason=None,
        held_at=None,
        held_by=None,
    )
    journal.add_event(invoice.invoice_id, "release", detail)


def _known(journal: JournalBackend, invoice_id: str) -> Invoice:
    invoice = journal.invoice(invoice_id)
    if invoice is None:
        raise UsageError(f"no invoice {invoice_id!r} in the journal {journal.path}")
    return invoice


# ---- files that disagree on a sent invoice's number --------------------------------------


def hold_clash(journal: JournalBackend, invoice: Invoice, reason: str) -> None:
    """Keep a sent invoice whose number several files hold in different content from any
    send, replay or new version until one file is left (``lift_clash``): the journal's
    content may be neither file's. Its state stays as it is; a hold already there stands."""
    if invoice.hold is None:
        _set_hold(journal, invoice, Transition.hold_duplicate, Hold.held, reason, DUPLICATE_CHECK)


def lift_clash(journal: JournalBackend, invoice: Invoice) -> None:
    """One file is left for a sent invoice ``hold_clash`` held: its state's rules apply again."""
    with journal.transaction():
        _lift(
            journal,
            invoice,
            f"by {DUPLICATE_CHECK}: one file left (was held: {invoice.hold_reason})",
        )


# ---- a damaged stored copy ----------------------------------------------------------------


def hold_damaged(journal: JournalBackend, invoice_id: str, damage: StoredCopyDamaged) -> Decision:
    """Keep ``invoice_id`` from being sent until its stored copy is whole again."""
    reason = (
        f"invoice {invoice_id}: stored copy of content {damage.sha256[:12]} damaged (it no "
        "longer matches its sha256); rescan the file or restore the journal"
    )
    return hold(journal, invoice_id, reason, by=STORED_COPY_CHECK)


def content_to_send(invoice: Invoice) -> str:
    """The sha256 of the bytes a send of ``invoice`` carries: the key's, else the file's."""
    return invoice.key_sha256 or invoice.current_sha256


def damaged_content(journal: JournalBackend) -> set[str]:
    """The sha256 of every stored copy a send found damaged: what a rescan reads again."""
    return {content_to_send(invoice) for invoice in journal.held_by(STORED_COPY_CHECK)}


def lift_repaired(journal: JournalBackend) -> list[str]:
    """Release every invoice held for a damaged copy whose content now reads back whole."""
    lifted = []
    for invoice in journal.held_by(STORED_COPY_CHECK):
        try:
            journal.content(content_to_send(invoice))
        except StoredCopyDamaged:
            continue
        if release(journal, invoice.invoice_id, by="scan (stored copy repaired)").done:
            lifted.append(invoice.invoice_id)
    return lifted
