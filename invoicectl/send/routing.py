"""Routing by supplier (``send --all-profiles``): which profile each file of an outbox is for.

Each invoice goes through the profile whose ``sender`` is the invoice's supplier EndpointID
(``scheme:id``, as the UBL reader extracts it and the journal keeps it as
``sender_endpoint``). The files are read here with the scan's own hardened reader, only to
tell their supplier; each profile's send reads its own again (``scan.ingest.SupplierFilter``).

A file whose supplier has no profile is never sent through another account, and never taken
into any journal: a journal is bound to one account, and an invoice in it could be released
and sent there. It is reported by every run while it stays in the outbox, with its reason
(``no profile for supplier 0088:XYZ``), and makes the run's exit code 4 (like a held
invoice); a file whose supplier cannot be told (unreadable, not UBL, no EndpointID) makes it
3 (a person must fix the file).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from invoicectl.errors import ExitCode
from invoicectl.journal.records import peppol_id
from invoicectl.locations import expand_user
from invoicectl.scan.candidates import find_candidates
from invoicectl.scan.scanned import ScannedFile, as_text
from invoicectl.ubl.errors import InvalidDocument
from invoicectl.ubl.facts import parse_document
from invoicectl.ubl.reading import read_document


@dataclass(frozen=True)
class Unrouted:
    """A file no profile of this run takes: never sent; said every run while it is there."""

    file: str  # relative to the outbox
    invoice_id: str | None
    supplier: str | None  # scheme:id, None when it cannot be told
    reason: str
    code: ExitCode

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "invoice_id": self.invoice_id,
            "supplier": self.supplier,
            "reason": self.reason,
            "exit_code": int(self.code),
        }


@dataclass
class Routing:
    """Where the outbox's files go: how many to each profile of the run, how many to
    profiles left out of it (``--profiles``), and those no profile takes."""

    files: dict[str, int] = field(default_factory=dict)  # profile -> files
    elsewhere: dict[str, int] = field(default_factory=dict)  # profile not in this run -> files
    unrouted: list[Unrouted] = field(default_factory=list)
    ids: dict[str, set[str]] = field(default_factory=dict)  # profile of the run -> invoice IDs
    names: dict[str, list[str]] = field(default_factory=dict)  # profile of the run -> files


def route(
    directory: Path, senders: Mapping[str, str], chosen: Iterable[str], *, recursive: bool = False
) -> Routing:
    """Each file's profile by its supplier. ``senders``: every profile's sender -> name;
    ``chosen``: the profiles this run sends through."""
    root = expand_user(directory, "the outbox").absolute()
    unlisted: list[ScannedFile] = []
    names = find_candidates(root, recursive, unlisted)
    routing = Routing(files=dict.fromkeys(chosen, 0))
    for item in unlisted:  # not a regular file, unreadable directory entries
        routing.unrouted.append(_unreadable(item.name, item.reason or "not readable"))
    for name in names:
        _place(routing, name, root, senders)
    return routing


def _place(routing: Routing, name: str, root: Path, senders: Mapping[str, str]) -> None:
    shown = as_text(name)
    try:
        facts = parse_document(read_document(str(root / name), str(root)))
    except InvalidDocument as error:
        routing.unrouted.append(_unreadable(shown, error.reason))
        return
    endpoint = facts.supplier_endpoint
    supplier = None if endpoint is None else peppol_id(endpoint.scheme, endpoint.id)
    if supplier is None:
        routing.unrouted.append(
            Unrouted(
                shown,
                facts.invoice_id,
                None,
                "no supplier EndpointID (cac:AccountingSupplierParty's cbc:EndpointID with a "
                "schemeID): no profile can be chosen; not sent",
                ExitCode.NEEDS_FIX,
            )
        )
        return
    profile = senders.get(supplier)
    if profile is None:
        reason = f"no profile for supplier {supplier}; not sent"
        routing.unrouted.append(
            Unrouted(shown, facts.invoice_id, supplier, reason, ExitCode.NEEDS_RECONCILE)
        )
    elif profile in routing.files:
        routing.files[profile] += 1
        routing.ids.setdefault(profile, set()).add(facts.invoice_id)
        routing.names.setdefault(profile, []).append(name)
    else:
        routing.elsewhere[profile] = routing.elsewhere.get(profile, 0) + 1


def _unreadable(name: str, reason: str) -> Unrouted:
    return Unrouted(
        name, None, None, f"{reason}; its supplier cannot be told, not sent", ExitCode.NEEDS_FIX
    )
