"""A terminal's page of ``status``: as many invoices as fit the screen, one line each.

Every column is drawn at its widest cell but the reason, which takes what is left and is cut
(``…``), never wrapped. On a terminal too narrow for all of them the columns ``show ID``
repeats go first (transaction, receiver, type, amount), so that an invoice stays one line
at 80 columns; where even the ID and state wrap, fewer invoices are shown, so the page
still fits.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from invoicectl.render.listing import failed_delivery, shown_reason
from invoicectl.text import one_line

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

_COLUMNS = ("invoice", "type", "state", "receiver", "amount", "transaction", "reason")
LEFT_OUT_FIRST = ("transaction", "receiver", "type", "amount")
_REASON_AT_LEAST = 20
_WIDEST_ID = 40  # a longer one folds onto more lines
_FRAME = 4  # the table's lines around its rows: top, head, rule, bottom


def cells(record: dict[str, Any]) -> dict[str, str]:
    amount = " ".join(value for value in (record["payable_amount"], record["currency"]) if value)
    values = (
        record["invoice_id"] or f"(file) {record['path']}",
        record["document_type"] or "",
        "accepted, delivery failed" if failed_delivery(record) else record["state"],
        record["receiver"] or "",
        amount,
        record["transaction_id"] or record["existing_transaction_id"] or "",
        shown_reason(record),
    )
    return dict(zip(_COLUMNS, map(one_line, values), strict=True))


def print_page(
    console: Console, records: Sequence[dict[str, Any]], lines: int
) -> tuple[int, list[str]]:
    """The table of as many of ``records`` as fit in ``lines`` (one at least), in order;
    returns how many, and the columns left out for the width."""
    rows = [cells(record) for record in records]
    count = len(rows)
    while True:
        table, left_out = _table(rows[:count], console.width)
        height = len(console.render_lines(table, pad=False))
        if height <= lines or count <= 1:
            break
        # Rows in proportion to the lines they took, and always one fewer.
        count = max(1, min(count - 1, count * (lines - _FRAME) // max(1, height - _FRAME)))
    if count:
        console.print(table)
    return count, left_out


def _table(rows: list[dict[str, str]], width: int) -> tuple[Table, list[str]]:
    from rich.table import Table  # here: a pipe's listing and the exports never draw one

    widest = {name: max([len(name)] + [len(row[name]) for row in rows]) for name in _COLUMNS}
    widest["invoice"] = min(widest["invoice"], _WIDEST_ID)
    shown = list(_COLUMNS)

    def fixed() -> int:  # each column's cells, its padding and its border; the last border
        return sum(widest[name] + 3 for name in shown if name != "reason") + 4

    for name in LEFT_OUT_FIRST:
        if fixed() + _REASON_AT_LEAST <= width:
            break
        shown.remove(name)
    table = Table(show_lines=False)
    for name in shown:
        if name == "reason":
            room = max(_REASON_AT_LEAST, min(widest[name], width - fixed()))
            table.add_column(name, overflow="ellipsis", no_wrap=True, width=room)
        else:
            table.add_column(name, overflow="fold", width=widest[name])
    for row in rows:
        table.add_row(*(row[name] for name in shown))
    return table, [name for name in _COLUMNS if name not in shown]
