"""Rendering a ``ReconcileReport``: a rich table grouped by verdict, JSON, CSV, and ``--output``.

Nothing here decides anything. The table, the JSON and the CSV are built from the same flat
records (``case_record``), so they always agree; JSON adds the summary around them. Files are
written atomically: a temporary file in the same directory, flushed to disk, then renamed over
the target, so a reader (or a crash) never sees half a report.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from rich.console import Console
from rich.table import Table

from invoicectl.loglines import tag
from invoicectl.reconcile.report import ReconcileReport
from invoicectl.reconcile.verdicts import VERDICT_ORDER, Case, Verdict
from invoicectl.text import one_line

Format = Literal["table", "json", "csv"]

FIELDS = (
    "invoice_id",
    "verdict",
    "needs_person",
    "applied",
    "action",
    "detail",
    "state",
    "document_type",
    "receiver",
    "idempotency_key",
    "sent_sha256",
    "current_sha256",
    "sent_revision",
    "current_revision",
    "first_attempt_at",
    "last_attempt_at",
    "window_open",
    "window_closes_at",
    "api_transaction_id",
    "existing_transaction_id",
    "api_invoice_number",
    "api_receiver",
    "api_document_type",
    "api_status",
    "api_created_at",
    "api_delivered_at",
)


def case_record(case: Case) -> dict[str, Any]:
    """One flat record per case: the row of the CSV and of the JSON ``cases`` list."""
    side, api = case.journal, case.api
    return {
        "invoice_id": case.invoice_id,
        "verdict": str(case.verdict),
        "needs_person": case.needs_person,
        "applied": case.applied,
        "action": case.action,
        "detail": case.detail,
        "state": side.state,
        "document_type": side.document_type,
        "receiver": side.receiver,
        "idempotency_key": side.idempotency_key,
        "sent_sha256": side.sent_sha256,
        "current_sha256": side.current_sha256,
        "sent_revision": side.sent_revision,
        "current_revision": side.current_revision,
        "first_attempt_at": side.first_attempt_at,
        "last_attempt_at": side.last_attempt_at,
        "window_open": case.window_open,
        "window_closes_at": case.window_closes_at,
        "api_transaction_id": api.transaction_id if api else None,
        # The 422's name for the send its key already carried, as the operator knows it.
        "existing_transaction_id": (
            api.transaction_id if api and side.state == "key_reused" else None
        ),
        "api_invoice_number": api.invoice_number if api else None,
        "api_receiver": api.receiver if api else None,
        "api_document_type": api.document_type if api else None,
        "api_status": api.status if api else None,
        "api_created_at": api.created_at if api else None,
        "api_delivered_at": api.delivered_at if api else None,
    }


def summary_line(report: ReconcileReport) -> str:
    """One line: how many cases, how many need a person, what changed, the exit code."""
    held = f"{report.on_hold} on hold (`invoicectl status` says why); "
    held = held if report.on_hold else ""
    if not report.cases:
        what = "nothing to look up" if report.on_hold else "nothing to reconcile"
        return f"{what} ({report.requests} requests); {held}exit {int(report.exit_code)}"
    groups = ", ".join(f"{verdict} {n}" for verdict, n in report.counts.items())
    changed = [f"{len(report.applied)} adopted"] if report.apply else []
    if report.held:
        changed.append(f"{len(report.held)} held")
    if report.recorded:
        changed.append(f"{len(report.recorded)} delivery statuses recorded")
    if not report.search.complete:
        changed.append(f"transactions search incomplete: {report.search.note}")
    tail = f"; {', '.join(changed)}" if changed else ""
    return (
        f"{len(report.cases)} invoices to reconcile, {report.needs_person} need a person "
        f"({groups}){tail}; {report.requests} requests; {held}exit {int(report.exit_code)}"
    )


def report_document(report: ReconcileReport) -> dict[str, Any]:
    """The whole report as plain JSON-ready data."""
    return {
        "checked_at": report.checked_at,
        "apply": report.apply,
        "exit_code": int(report.exit_code),
        "on_hold": report.on_hold,
        "summary": summary_line(report),
        "counts": {str(verdict): count for verdict, count in report.counts.items()},
        "needs_person": report.needs_person,
        "applied": list(report.applied),
        "held": list(report.held),
        "recorded": list(report.recorded),
        "requests": report.requests,
        "search": {
            "pages": report.search.pages,
            "transactions": report.search.transactions,
            "complete": report.search.complete,
            "note": report.search.note,
        },
        "cases": [case_record(case) for case in report.cases],
    }


def to_json(report: ReconcileReport) -> str:
    return json.dumps(report_document(report), indent=2, ensure_ascii=False) + "\n"


def to_csv(report: ReconcileReport) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(FIELDS), lineterminator="\n")
    writer.writeheader()
    for case in report.cases:
        record = case_record(case)
        writer.writerow({key: _cell(record[key]) for key in FIELDS})
    return buffer.getvalue()


def print_report(console: Console, report: ReconcileReport, *, every: bool = True) -> None:
    """The terminal view: the summary line; the verdicts that need a person first, each a
    table with its next step; the rest one table each too, or with ``every`` off one line
    each (``--all`` lists them); then the summary again, in plain words, at the end."""
    tag(
        "reconcile.summary",
        exit_code=int(report.exit_code),
        counts=report.counts,
        needs_person=report.needs_person,
        requests=report.requests,
    )
    console.print(summary_line(report), highlight=False, markup=False, soft_wrap=True)
    groups = sorted(_groups(report), key=lambda group: not _needs_person(group[1]))
    summarised = 0
    for verdict, cases in groups:
        guidance = verdict.guidance
        needing = sum(case.needs_person for case in cases)
        who = "needs a person" if needing == len(cases) else f"{needing} need a person"
        who = who if needing else "no person needed"
        console.print()
        console.print(
            f"{guidance.title} ({len(cases)}, {who}) — next: {_group_step(verdict, cases)}",
            highlight=False,
            markup=False,
        )
        if every or _needs_person(cases):
            console.print(_table(cases))
        else:
            summarised += len(cases)
    if summarised:
        console.print()
        console.print(f"{summarised} cases that need no person not listed; --all lists them")
    if report.cases:
        console.print()
        console.print(closing_line(report), highlight=False, markup=False)


def closing_line(report: ReconcileReport) -> str:
    """The summary once more, in words, where a person finishes reading."""
    # Case by case, as the first line counts them (helper-106: a group with one case that
    # needs a person was counted whole here, and adopted cases still "needed" one).
    person: list[tuple[Verdict, int]] = []
    adopt: list[tuple[Verdict, int]] = []  # found, not adopted yet: exit 4 until --apply
    rest: list[tuple[Verdict, int]] = []
    for verdict, cases in _groups(report):
        needing = sum(case.needs_person for case in cases)
        to_adopt = sum(not case.needs_person and _to_adopt([case]) for case in cases)
        for kind, count in ((person, needing), (adopt, to_adopt)):
            if count:
                kind.append((verdict, count))
        if left := len(cases) - needing - to_adopt:
            rest.append((verdict, left))

    def listed(groups: list[tuple[Verdict, int]]) -> str:
        return ", ".join(f"{n} {v.guidance.title}" for v, n in groups)

    needing = sum(n for _, n in person)
    said = f"In short: {len(report.cases)} invoices checked; "
    said += f"{needing} need a person ({listed(person)})" if person else "none needs a person"
    if adopt:
        count = sum(n for _, n in adopt)
        said += f"; {count} to adopt with `invoicectl reconcile --apply` ({listed(adopt)})"
    if rest:
        said += f"; {sum(n for _, n in rest)} need nothing now ({listed(rest)})"
    return f"{said}; {report.requests} requests to GoRoute; exit {int(report.exit_code)}."


def _needs_person(cases: list[Case]) -> bool:
    return any(case.needs_person for case in cases)


def _to_adopt(cases: list[Case]) -> bool:
    return any(case.verdict.guidance.adoptable and not case.applied for case in cases)


def render(report: ReconcileReport, fmt: Format, *, width: int = 120) -> str:
    """The report as text in ``fmt``; the table without colour, at ``width`` columns."""
    if fmt == "json":
        return to_json(report)
    if fmt == "csv":
        return to_csv(report)
    buffer = io.StringIO()
    console = Console(
        file=buffer, width=width, no_color=True, color_system=None, markup=False, emoji=False
    )
    print_report(console, report)
    return buffer.getvalue()


def write_output(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (temp file in the same directory, then rename)."""
    directory = path.parent if str(path.parent) else Path(".")
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def _groups(report: ReconcileReport) -> Iterator[tuple[Verdict, list[Case]]]:
    for verdict in VERDICT_ORDER:
        cases = [case for case in report.cases if case.verdict is verdict]
        if cases:
            yield verdict, cases


def _group_step(verdict: Verdict, cases: list[Case]) -> str:
    if all(case.applied for case in cases):
        return "nothing: adopted by --apply"
    if _needs_person(cases) and not verdict.guidance.needs_person:
        # A case its judge knew more of (a delivery in a status GoRoute does not document).
        return "as each case says below: some need a person"
    return verdict.guidance.next_step


def _table(cases: list[Case]) -> Table:
    table = Table(show_lines=True, expand=False)
    for column in ("invoice", "journal (sent)", "GoRoute", "what happened / next"):
        table.add_column(column, overflow="fold")
    for case in cases:
        table.add_row(case.invoice_id, _journal_cell(case), _api_cell(case), _next_cell(case))
    return table


def _journal_cell(case: Case) -> str:
    side = case.journal
    lines = [f"state {side.state}" + (" → accepted" if case.applied else "")]
    if side.idempotency_key:
        lines.append(f"key {side.idempotency_key}")
    if side.sent_sha256:
        lines.append(f"sent {side.sent_sha256[:12]} (rev {side.sent_revision})")
    if side.current_sha256 and side.current_sha256 != side.sent_sha256:
        lines.append(f"now {side.current_sha256[:12]} (rev {side.current_revision})")
    if side.first_attempt_at:
        lines.append(f"first tried {side.first_attempt_at}")
    if case.window_open is not None:
        lines.append(f"window {'open' if case.window_open else 'closed'} ({case.window_closes_at})")
    return "\n".join(lines)


def _api_cell(case: Case) -> str:
    api = case.api
    if api is None:
        return "-"
    lines = [api.transaction_id or "?"]
    for label, value in (
        ("status", api.status),
        ("invoice", api.invoice_number),
        ("receiver", api.receiver),
        ("type", api.document_type),
        ("created", api.created_at),
    ):
        if value:
            lines.append(f"{label} {one_line(value, 200)}")
    return "\n".join(lines)


def _next_cell(case: Case) -> str:
    return f"{case.detail}\n→ {case.action}" if case.detail else f"→ {case.action}"


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value
