"""Which invoices a part of an export holds, and where it begins, read so that a top-up's
cost follows what is new since the last part, not what DEST already holds.

A top-up (a second export to DEST) begins where the last part's chain ended, once the journal
is shown to hold that chain unchanged, and holds the invoices asked for that changed since:
the chain's events after the last head name them. An invoice asked for that did not change
must be in an earlier part, or the top-up would leave it out without a word. When every part
before was made for a range that covers this one (the nightly ``export DEST``: no range at
all), that holds by itself: such an invoice's last event lies in some part's segment, and
that part chose every invoice of its range with an event in its segment. Otherwise the
earlier parts' invoice lists are read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from invoicectl.audit.manifest import last_head, part_range, safe_name, unlisted
from invoicectl.audit.signing import public_key_from_pem, signature_holds
from invoicectl.errors import ExportError, UsageError
from invoicectl.journal.audit import AuditReader
from invoicectl.journal.chain import follows


def anchored(reader: AuditReader, part: Path, head: int) -> int:
    """The last part's head, where the next begins, once its manifest is shown to be as
    signed and this journal to hold its chain to there unchanged: parts handed out are a
    record a rewrite cannot reach."""
    _refuse_unsigned(part)
    seq, digest, journal_id = last_head(part)
    if journal_id != reader.journal_id():
        raise ExportError(
            f"{part} came from journal {journal_id}, not this one: use a DEST of its own"
        )
    if (lost := head < seq) or reader.chain_hash(seq) != digest:
        raise ExportError(
            f"this journal's hash chain {'ends before' if lost else 'differs at'} event {seq}, "
            f"where {part.name} ended: it {'lost events' if lost else 'was rewritten'} since "
            "that part was made (a backup restored, or changed outside invoicectl); nothing was "
            "exported. `invoicectl verify` and `invoicectl verify-export` tell more"
        )
    return seq


def reaching_back(reader: AuditReader, chosen: list[str], last: int, earlier: list[Path]) -> int:
    """Where a part's checks of the journal's rows start (``export._refuse_rows_gone``): on
    a top-up, at the chosen invoices' first event, once the chain from there to the last
    part's head is shown unbroken. A part vouches for each invoice's rows, which their last
    events before that head also record: a row edited with its event there, or an attempt
    deleted and its events filed under no invoice, passed the checks that began at the head
    (helper-87). From the head itself when no chosen invoice has an event before it."""
    if last:
        _refuse_unfiled(reader, chosen, last, earlier)
    first = reader.first_event_of(chosen) if last and chosen else None
    if first is None or first > last:
        return last
    for _event in linked(reader, first, last, ", before the last part's head"):
        pass
    return first - 1


def linked(reader: AuditReader, first: int, upto: int, where: str = "") -> Iterator[Any]:
    """The chain's events from ``first`` to ``upto``, each shown to follow the one before it
    (its number and its hash), or nothing is exported: a signature over a broken chain would
    vouch for what the chain cannot. ``where`` places the break for the reader."""
    previous = reader.chain_hash(first - 1)
    expected = first
    for event in reader.chain(after=first - 1, upto=upto):
        if event.seq != expected or not follows(previous, event.payload, event.hash):
            broken = "missing" if event.seq != expected else "not what its hash says"
            raise ExportError(
                f"the journal's hash chain is broken at event {expected}{where}: it is {broken} "
                "(changed outside invoicectl); nothing was exported. `invoicectl verify` tells "
                "what was changed; a backup restores it"
            )
        yield event
        previous, expected = event.hash, event.seq + 1


def _refuse_unfiled(reader: AuditReader, chosen: list[str], last: int, earlier: list[Path]) -> None:
    """An invoice an earlier part holds has events before the last head: when none is filed
    under it, they were filed elsewhere by hand, and the checks from its first event would
    start after them (helper-88). Held means a folder of its name (no link) whose
    ``evidence.json`` names it: a stray folder, or one of another ID on a file system that
    ignores case, blocked every top-up (helper-89). A stat of its folder in each earlier
    part; a query and a small read only where one is there."""
    for invoice_id in chosen:
        folders = [part / safe_name(invoice_id) for part in earlier]
        held = [folder for folder in folders if folder.is_dir() and not folder.is_symlink()]
        if not held:
            continue
        first = reader.first_event_of([invoice_id])
        if first is not None and first <= last:
            continue
        if (folder := next((f for f in held if _names(f, invoice_id)), None)) is not None:
            raise ExportError(
                f"invoice {invoice_id} is in {folder}, but none of its events before that "
                "part's head is filed under it in the journal (changed outside invoicectl); "
                "nothing was exported. `invoicectl verify` tells more"
            )


def _names(folder: Path, invoice_id: str) -> bool:
    """Whether the part's ``evidence.json`` in ``folder`` is ``invoice_id``'s."""
    try:
        evidence = json.loads((folder / "evidence.json").read_bytes())
    except (OSError, ValueError):
        return False
    return isinstance(evidence, dict) and evidence.get("invoice_id") == invoice_id


def _refuse_unsigned(part: Path) -> None:
    """A last part whose manifest is not what its signature covers names another head than
    the one it was made with: a top-up from there would leave events in no part, for good,
    or blame the journal for a rewrite (helper-87)."""
    try:
        data = (part / "manifest.json").read_bytes()
        signature = (part / "manifest.sig").read_bytes()
        public = public_key_from_pem((part / "signing-key.pub").read_bytes())
    except OSError:
        public = None
    if public is None or not signature_holds(public, signature, data):
        raise ExportError(
            f"{part}/manifest.json is not as signed (or its signature or key cannot be read); "
            f"nothing was exported. Run invoicectl verify-export {part.parent}"
        )


def choose(
    reader: AuditReader,
    earlier: list[Path],
    since: str | None,
    until: str | None,
    invoice_ids: list[str] | None,
    last: int,
) -> list[str]:
    """The invoices of the next part, by ID: those asked for (``invoice_ids``, else those
    sent in [since, until), as the attempts table or the chain's attempt events say), and on
    a top-up only those with chain events after ``last``."""
    if invoice_ids:
        known = reader.known_invoices(invoice_ids)
        if missing := [invoice_id for invoice_id in invoice_ids if invoice_id not in known]:
            raise UsageError(f"no invoice {missing[0]!r} in the journal {reader.path}")
    asked = sorted(set(invoice_ids or ()))
    if not earlier:
        return asked or reader.sent_invoice_ids(since, until)
    changed = reader.changed_after(last)
    if invoice_ids:
        chosen = [invoice_id for invoice_id in asked if invoice_id in changed]
        unchanged = {invoice_id for invoice_id in asked if invoice_id not in changed}
    else:
        chosen = reader.sent_among(sorted(changed), since, until)
        unchanged = set()
        if not _every_part_covers(earlier, since, until):
            unchanged = set(reader.sent_invoice_ids(since, until)).difference(changed)
    if missing := sorted(unlisted(earlier, unchanged)):
        raise UsageError(
            f"{len(missing)} invoice(s) asked for (the first: {missing[0]}) are in no part "
            "of this export and have not changed since its last part; a part holds the hash "
            "chain from where the one before it ended, so export them to a new DEST"
        )
    return chosen


def _every_part_covers(earlier: list[Path], since: str | None, until: str | None) -> bool:
    """Whether the parts are all there (numbered 1 to N: one removed by hand held invoices
    no other does) and each chose every invoice sent in [since, until) that had an event in
    its segment."""
    numbered = all(int(part.name) == number for number, part in enumerate(earlier, 1))
    return numbered and all(_covers(part_range(part), since, until) for part in earlier)


def _covers(earlier: Any, since: str | None, until: str | None) -> bool:
    if not isinstance(earlier, dict) or earlier.get("invoices"):
        return False
    start, end = earlier.get("since"), earlier.get("until")
    if not all(bound is None or isinstance(bound, str) for bound in (start, end)):
        return False  # not what export records: the parts' invoice lists are read instead
    return (start is None or (since is not None and start <= since)) and (
        end is None or (until is not None and until <= end)
    )
