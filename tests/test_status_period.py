"""status --since/--until: a period report, the invoices per state and per day (CSV for the
accountant), from an index: a month of a journal of years reads only that month."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from datetime import date

import pytest
from backends import cli_journal
from historykit import flat, history_invoice, steps_at_two_sizes
from typer.testing import CliRunner

from invoicectl.cli import app
from invoicectl.journal import Journal, open_journal
from invoicectl.journal.records import InvoiceState
from invoicectl.locations import Location
from invoicectl.render.period import FIELDS, period_bounds


@pytest.fixture
def journal(journal_at: Location, monkeypatch: pytest.MonkeyPatch) -> Iterator[Journal]:
    monkeypatch.setenv("INVOICECTL_JOURNAL", cli_journal(journal_at))
    with open_journal(journal_at) as opened:
        yield opened


def march(journal: Journal) -> None:
    """Three invoices on 1 March (one whose delivery failed), one rejected on 2 March, and one
    pending on 1 April, outside the month."""
    for number, (day, changes) in enumerate(
        [
            ("2026-03-01", {}),
            ("2026-03-01", {}),
            ("2026-03-01", {"remote_status": "failed"}),
            ("2026-03-02", {"state": InvoiceState.rejected, "reason": "400"}),
            ("2026-04-01", {"state": InvoiceState.pending, "transaction_id": None}),
        ]
    ):
        at = f"{day}T10:00:00+00:00"
        journal.insert_invoice(
            history_invoice(f"P-{number}", f"{number:064x}", created_at=at, **changes)
        )


def invoke(*args: str):
    return CliRunner().invoke(app, ["status", *args])


def test_a_month_as_csv_per_state_and_day(journal: Journal) -> None:
    march(journal)

    result = invoke("--since", "2026-03-01", "--until", "2026-03-31", "--format", "csv")

    assert result.exit_code == 4, result.output  # the delivery failure needs a person
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert list(rows[0]) == list(FIELDS)
    assert [row["day"] for row in rows] == ["2026-03-01", "2026-03-02", "total"]
    first, second, total = rows
    assert (first["accepted"], first["delivery_failed"], first["total"]) == ("2", "1", "3")
    assert (second["rejected"], second["total"]) == ("1", "1")
    assert total["total"] == "4" and total["pending"] == "0"  # April's is outside


def test_the_table_and_json_say_the_same(journal: Journal) -> None:
    march(journal)

    table = invoke("--since", "2026-03-01", "--until", "2026-03-31")
    assert table.stdout.splitlines()[-1] == (
        "4 invoices first recorded from 2026-03-01 to 2026-03-31: 2 accepted, 1 delivery "
        "failed, 1 rejected, 0 invalid, 0 pending, 0 to reconcile"
    )
    records = json.loads(invoke("--since", "2026-04-01", "--format", "json").stdout)
    assert [(r["day"], r["pending"], r["total"]) for r in records] == [
        ("2026-04-01", 1, 1),
        ("total", 1, 1),
    ]


def test_the_last_day_there_is_stands_for_no_end(journal: Journal) -> None:
    """``--until 9999-12-31`` was an OverflowError traceback, and no JSON at all."""
    march(journal)
    records = json.loads(invoke("--until", "9999-12-31", "--format", "json").stdout)
    assert records[-1]["day"] == "total" and records[-1]["total"] == 5


def test_a_bad_date_is_a_usage_error(journal: Journal) -> None:
    result = invoke("--since", "March")
    assert result.exit_code == 2
    assert "--since: 'March' is not a date; write it YYYY-MM-DD" in result.output
    result = invoke("--since", "2026-03-02", "--until", "2026-03-01")
    assert result.exit_code == 2
    assert "--until 2026-03-01 is before --since 2026-03-02" in result.output


def test_a_listing_option_is_refused_with_a_period(journal: Journal) -> None:
    """``--since ... --state invalid`` gave the whole period report as if --state were not
    there (a probing review): it chooses invoices to list, which a period report does not."""
    result = invoke("--since", "2026-03-01", "--state", "invalid", "--limit", "5")
    assert result.exit_code == 2
    assert "counts every invoice per state and day, and takes no --state or --limit" in (
        result.output
    )


def test_a_period_reads_only_its_invoices(journal: Journal) -> None:
    march(journal)
    bounds = period_bounds(date(2026, 3, 1), date(2026, 3, 31))
    cost = steps_at_two_sizes(journal, lambda: journal.day_counts(*bounds))  # 2020's history
    assert flat(cost), cost
