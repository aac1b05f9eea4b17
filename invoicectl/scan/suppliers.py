"""A scan that takes one supplier's invoices only (a profile's ``sender``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from invoicectl.journal.records import FACT_COLUMNS
from invoicectl.scan.report import Problem
from invoicectl.scan.scanned import ScannedFile

SENDER_COLUMN = FACT_COLUMNS.index("sender_endpoint")
_NO_SUPPLIER = (
    "no supplier EndpointID (AccountingSupplierParty/Party/EndpointID): no profile's send "
    "can tell it is its own"
)


class SupplierFilter:
    """Only one supplier's invoices go into this journal (a profile's ``sender``): a file
    whose supplier EndpointID is another's, or cannot be told (unreadable, no ID), is left
    as it is, for the run of its own profile (``send --all-profiles`` reports what belongs
    to none). Known content read again carries no facts: it is in this journal already,
    taken by an earlier scan of this supplier (a send holds any other, ``lifecycle.suppliers``).
    ``skip``: invoice IDs of this supplier another profile's journal holds as sent through its
    account (``send --all-profiles`` finds them): never taken here, never sent twice.
    ``untold``: the files left whose supplier cannot be told, with why: no profile's send
    would ever say a word of them (helper-97), so each such send lists them.
    """

    def __init__(self, supplier: str, skip: frozenset[str] = frozenset()) -> None:
        self.supplier = supplier
        self.skip = skip
        self.left = 0
        self.untold: list[Problem] = []

    def kept(self, found: Iterable[ScannedFile]) -> Iterator[ScannedFile]:
        for item in found:
            if self.takes(item):
                yield item
                continue
            self.left += 1
            if item.columns is None and item.reason is not None:
                self.untold.append(Problem(item.name, item.reason))
            elif item.columns is not None and item.columns[SENDER_COLUMN] is None:
                self.untold.append(Problem(item.name, _NO_SUPPLIER))

    def takes(self, item: ScannedFile) -> bool:
        if item.columns is not None:
            return item.columns[SENDER_COLUMN] == self.supplier and item.invoice_id not in self.skip
        return item.reason is None and item.sha256 is not None
