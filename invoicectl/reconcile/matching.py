"""Matching: whether a GoRoute transaction is this invoice, and the verdict on one that should be.

``compare`` decides whether a transaction is this invoice (number, receiver, document type);
the content hash (``metadata.sha256``) decides whether it carries the content this journal
sent, and its creation date whether this journal sent it (``CLOCK_SLACK``). ``matched`` turns
one transaction that should be this invoice's, whether named by a 422 or found in the list,
into its verdict: adopt it, wait for it, resend after its failure, or investigate a different
document. ``api_side`` is what a transaction shows in a ``Case``. The times compared are read
with ``goroute.times.parse_time`` (ISO 8601 in its variants, or Unix seconds or milliseconds;
None for anything else); ``first_time`` is when a key first carried a request, the start of its
24-hour window and the point "sent by this journal" is measured from. Pure: nothing here asks
GoRoute or writes the journal.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from invoicectl.goroute.times import parse_time
from invoicectl.goroute.transactions import Transaction
from invoicectl.reconcile.verdicts import ApiSide, Case, JournalSide, Verdict, Window, build_case
from invoicectl.text import one_line

# A transaction can look a little older than the first attempt that created it when the two
# clocks disagree. Anything older than this before the first attempt was not created by it.
CLOCK_SLACK = timedelta(minutes=10)
IN_PROGRESS_STATUSES = frozenset({"pending", "processing", "sending"})
# A journal state whose key carried a request with no final answer: the next send replays it.
_UNANSWERED = ("unknown", "pending")


def matched(
    invoice_id: str,
    side: JournalSide,
    txn: Transaction,
    txn_id: str | None,
    *,
    adopt: Verdict,
    window: Window = (None, None),
) -> Case:
    """The verdict on a transaction that should be this invoice's; ``adopt`` when it is."""
    api = api_side(txn, txn_id)
    differences = compare(invoice_id, side, txn)
    notes = _date_notes(side, txn)
    content = content_difference(side, txn)
    if differences:
        verdict, detail = Verdict.different_document, differences + ([content] if content else [])
    elif txn.status == "failed" and content:
        # Another version of the invoice, failed: no delivery, and not this key's send.
        replay = side.state in _UNANSWERED and window[0]
        return build_case(
            invoice_id,
            Verdict.sent_then_failed,
            side,
            api=api,
            action=f"GoRoute's {api.transaction_id} is another version of {invoice_id}, and it "
            "failed: not this key's send. `invoicectl send DIR` replays this content under its "
            "key (its 24-hour window is open)"
            if replay
            else None,
            detail="; ".join(
                [f"transaction {api.transaction_id} failed", same_number(content), *notes]
            ),
            window=window,
        )
    elif txn.status == "failed":
        verdict, detail = Verdict.sent_then_failed, [f"transaction {api.transaction_id} failed"]
    elif content:
        # Its number, for its receiver, in other content: a delivery of this invoice all the
        # same, whatever the key carried. Sending this content too would deliver it twice.
        return build_case(
            invoice_id,
            Verdict.other_version,
            side,
            api=api,
            action=_other_version_action(invoice_id, api.transaction_id),
            detail="; ".join([same_number(content), *notes]),
            window=window,
        )
    elif adopt is Verdict.already_sent and txn.status in IN_PROGRESS_STATUSES:
        verdict, detail = Verdict.in_progress, [f"transaction {api.transaction_id} is {txn.status}"]
    elif adopt is Verdict.already_sent and not _content_hash(txn):
        # A 422 says the key carried another request, and a history check found a send by
        # something else: without the hash, what GoRoute holds may be another version of
        # the invoice, and adopting it would claim this one delivered.
        return build_case(
            invoice_id,
            Verdict.content_unconfirmed,
            side,
            api=api,
            action=f"investigate: compare GoRoute's {api.transaction_id} with the file; if it "
            f"is this content, `invoicectl abandon {invoice_id}` records it as delivered; if "
            f"not, `invoicectl reconcile --apply` holds it and `invoicectl release {invoice_id} "
            "--force` lets it go on",
            detail="; ".join(
                [f"transaction {api.transaction_id} is this invoice, without a sha256", *notes]
            ),
            window=window,
        )
    elif api.transaction_id is None:
        return build_case(
            invoice_id,
            adopt,
            side,
            api=api,
            needs_person=True,  # nothing to adopt: --apply cannot record it
            action="investigate: GoRoute holds this invoice under a transaction id invoicectl "
            "cannot use; ask GoRoute support which transaction it is",
            detail="; ".join(["the transaction is this invoice, but its id is unusable", *notes]),
            window=window,
        )
    else:
        status = txn.status or "no status given"
        return build_case(
            invoice_id,
            adopt,
            side,
            api=api,
            action=f"`invoicectl reconcile --apply` adopts {api.transaction_id}",
            detail="; ".join(
                [f"transaction {api.transaction_id} is this invoice ({status})", *notes]
            ),
            window=window,
        )
    return build_case(
        invoice_id,
        verdict,
        side,
        api=api,
        action=_replay_first(invoice_id, verdict, side, window),
        detail="; ".join(detail + notes),
        window=window,
    )


def _other_version_action(invoice_id: str, transaction_id: str | None) -> str:
    """What to do when GoRoute holds another version of the invoice: keep that one, or
    correct it as a delivered invoice is corrected, never send this one beside it."""
    return (
        f"investigate: GoRoute's {transaction_id or 'transaction'} is another version of "
        f"{invoice_id}, a delivery of it; if that version is right, restore the file to it, or "
        f"`invoicectl abandon {invoice_id}` records it as settled; send the change as a credit "
        f"note or an invoice of its own. `invoicectl release {invoice_id} --force` or "
        f"`--new-version {invoice_id}` would deliver {invoice_id} twice"
    )


def _replay_first(
    invoice_id: str, verdict: Verdict, side: JournalSide, window: Window
) -> str | None:
    """A failed delivery of a send never answered, its key's window still open: a new key is
    refused until the replay under the old one has said what the key did (``--new-version``'s
    rule), so the steps are the replay, reconcile, then the new version. Else the verdict's."""
    if verdict is not Verdict.sent_then_failed or side.state not in _UNANSWERED or not window[0]:
        return None
    return (
        f"delivery failed; `invoicectl send DIR` replays it under its key (its 24-hour window "
        f"is open, so GoRoute answers with that transaction, delivering nothing), then "
        f"`invoicectl reconcile` reads the failure, then `invoicectl send DIR --new-version "
        f"{invoice_id}` sends it again under a new key"
    )


def api_side(txn: Transaction, fallback_id: str | None = None) -> ApiSide:
    """What GoRoute holds for ``txn``, as a ``Case`` shows it (its id, else ``fallback_id``)."""
    return ApiSide(
        transaction_id=txn.transaction_id or fallback_id,
        invoice_number=txn.invoice_number,
        receiver=txn.receiver or txn.receiver_id,
        document_type=txn.document_type,
        status=txn.status,
        created_at=txn.created_at,
        delivered_at=txn.delivered_at,
    )


def compare(invoice_id: str, side: JournalSide, txn: Transaction) -> list[str]:
    """How ``txn`` differs from the journal's invoice; [] when it is the same invoice.

    The receiver matches on scheme and id, or on the id alone when the API gives no scheme
    (case-insensitive: Peppol participant ids are). A missing document type is not a
    difference; a missing invoice number is, since nothing then ties the two together.
    """
    differences: list[str] = []
    number = (txn.invoice_number or "").strip()
    if not number:
        differences.append("the API record carries no invoice number to match")
    elif number != invoice_id:
        differences.append(
            f"invoice number: API {one_line(number, 80)}, journal {one_line(invoice_id, 80)}"
        )
    if not _same_receiver(side.receiver, txn):
        shown = txn.receiver or txn.receiver_id
        differences.append(f"receiver: API {shown}, journal {side.receiver}")
    if txn.document_type and _kind(txn.document_type) != _kind(side.document_type):
        differences.append(f"document type: API {txn.document_type}, journal {side.document_type}")
    return differences


def content_difference(side: JournalSide, txn: Transaction) -> str | None:
    """How the content differs, when GoRoute gives back the hash invoicectl sent with it.

    Every send carries ``metadata.sha256``, the hash of the content its key carries; a
    transaction whose hash is another one holds other content (under the same invoice number
    or not: ``same_number`` says so where it is known).
    """
    theirs = _content_hash(txn)
    sent = side.sent_sha256
    if not theirs or not sent:
        return None
    if theirs.casefold() == sent.casefold():
        return None
    return (
        f"different content: the API's transaction carries sha256 {theirs}, the journal "
        f"sent sha256 {sent} under this key"
    )


def same_number(content: str) -> str:
    """``content_difference``'s words for a transaction that carries this invoice's number."""
    return f"same invoice number, {content}"


def _content_hash(txn: Transaction) -> str | None:
    """The ``metadata.sha256`` GoRoute gives back with a transaction, if any."""
    theirs = txn.metadata.get("sha256")
    return theirs.strip() or None if isinstance(theirs, str) else None


def _same_receiver(journal_receiver: str | None, txn: Transaction) -> bool:
    """The journal's "scheme:id" (built in subjects.py) against GoRoute's scheme and id,
    compared whole: a scheme may hold a colon (``DK:CVR``), so neither side can be cut in two
    at the first one (helper-96: ``{"scheme": "DK:CVR", "identifier": "12345671"}`` never
    matched, and the invoice GoRoute had delivered was reported as never sent). Without a
    scheme on one side, the id ends the other's address."""
    if txn.receiver_id is None or journal_receiver is None:
        return True  # nothing to compare against; the invoice number carries the match
    ours, identifier = journal_receiver.casefold(), txn.receiver_id.casefold()
    if txn.receiver_scheme is not None and ":" in ours:
        return ours == f"{txn.receiver_scheme}:{txn.receiver_id}".casefold()
    return identifier == ours or ours.endswith(f":{identifier}")


def _kind(document_type: str | None) -> str:
    """A document type as a word to compare: ``Invoice``, ``invoice``, a UBL namespace
    (``...:xsd:Invoice-2``) and a Peppol document type identifier (``busdox-docid-qns::urn:
    ...:Invoice-2::Invoice##urn:cen.eu:...::2.1``) all read ``invoice``."""
    if not document_type:
        return ""
    name = document_type.split("##", 1)[0].rsplit("::", 1)[-1].rsplit(":", 1)[-1]
    return "".join(char for char in name.casefold() if char.isalpha())


def _date_notes(side: JournalSide, txn: Transaction) -> list[str]:
    created = parse_time(txn.created_at)
    first = first_time(side)
    if created is None or first is None or created >= first - CLOCK_SLACK:
        return []
    return [
        f"created {txn.created_at}, before this journal's first attempt ({first.isoformat()}):"
        " something else sent it"
    ]


# No request of an invoicectl journal is older than this: an earlier time was written by
# hand or a broken clock, and reckoning from it (less ``LOOK_BACK``) overflows.
_EARLIEST_REQUEST = datetime(2000, 1, 1, tzinfo=UTC)


def first_time(side: JournalSide) -> datetime | None:
    """When the key first carried a request: the earlier of its recorded first use and its
    first attempt's start (they are written together; one lost, changed by hand or later
    than the other, the attempt is the request's own record), of those that can be times."""
    times = [parse_time(side.key_first_used_at), parse_time(side.first_attempt_at)]
    plausible = [time for time in times if time is not None and time >= _EARLIEST_REQUEST]
    return min(plausible, default=None)
