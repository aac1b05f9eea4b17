"""How ``status`` writes what it found, in flat memory whatever the journal's size.

JSON (one array), JSON Lines and CSV: every invoice, row by row as the journal reads them. A
pipe: the counts, then one plain line per invoice. A terminal: the counts, then a page of the
invoices that need a person first (``--limit``, default a screenful; more than a screenful
goes through the pager too, in that order), or with ``--all`` every one, through the pager
(``$PAGER``, else ``less``). A rich table of a million rows took 70 s
for 100,000; a page is one query per state that reads no more rows than it shows.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import IO, TYPE_CHECKING

from invoicectl.cli.consoles import say, stdout_console, stdout_lines
from invoicectl.cli.options import StatusFormat
from invoicectl.journal.interface import JournalBackend
from invoicectl.journal.records import Hold, InvoiceState

if TYPE_CHECKING:
    from rich.console import Console

# A screenful leaves this many lines for the counts, the table's frame and the last line.
_FRAME_LINES = 8
_SHORTEST_PAGE = 10

# Per state, per hold, unanswered sends, accepted invoices whose delivery failed.
Counts = tuple[Mapping[InvoiceState, int], Mapping[Hold, int], int, int]


def write_status(
    journal: JournalBackend,
    output_format: StatusFormat,
    counts: Counts,
    state: str | None,
    verdict: str | None,
    limit: int | None,
    every: bool,
) -> None:
    from invoicectl.render.formats import write_csv, write_json_array, write_json_lines
    from invoicectl.render.listing import STATUS_FIELDS, status_records, write_tsv
    from invoicectl.render.status import print_state_counts

    out = sys.stdout
    if output_format is StatusFormat.json:
        write_json_array(out, status_records(journal, state, verdict, limit))
        return
    if output_format is StatusFormat.jsonl:
        write_json_lines(out, status_records(journal, state, verdict, limit))
        return
    if output_format is StatusFormat.csv:
        write_csv(out, status_records(journal, state, verdict, limit), STATUS_FIELDS)
        return
    lines = stdout_lines()
    counts_line = print_state_counts(lines, *counts)
    head_seq, head_hash = journal.chain_head()
    head_line = f"chain head {head_seq}:{head_hash}"
    lines.print(head_line, highlight=False)
    if limit == 0:
        return
    if not out.isatty():  # every invoice, by ID, as before (unless --limit)
        write_tsv(out, status_records(journal, state, verdict, limit))
        return
    console = stdout_console()
    height = console.size.height
    screenful = max(_SHORTEST_PAGE, height - _FRAME_LINES)
    if every or (limit is not None and limit > screenful):  # more than a screen: paged
        from invoicectl.render.listing import attention_first

        out.flush()
        with pager() as stream:
            if limit is None:  # --all (given with --limit, a usage error)
                write_tsv(stream, status_records(journal, state, verdict))
            else:  # as a page orders them, but streamed: a table is drawn whole, in memory
                write_tsv(stream, attention_first(journal, limit, state, verdict))
        return
    room = height - _screen_lines(console, counts_line, head_line)
    _print_page(console, journal, screenful if limit is None else limit, room, state, verdict)


def write_period(
    journal: JournalBackend,
    output_format: StatusFormat,
    since: str | None,
    until: str | None,
    quiet: bool = False,
) -> None:
    """``--since/--until``: the invoices per state and per day (render/period.py); with
    ``--quiet`` the table is not written (the dates are still checked)."""
    from datetime import UTC, date, datetime

    from invoicectl.errors import UsageError
    from invoicectl.render.formats import write_csv, write_json_array, write_json_lines
    from invoicectl.render.period import FIELDS, period_bounds, period_rows, write_period_table

    def day(option: str, value: str | None, default: date) -> date:
        if value is None:
            return default
        try:
            return date.fromisoformat(value)
        except ValueError:
            raise UsageError(f"{option}: {value!r} is not a date; write it YYYY-MM-DD") from None

    first = day("--since", since, date(1970, 1, 1))
    last = day("--until", until, datetime.now(UTC).date())
    if last < first:
        raise UsageError(f"--until {last} is before --since {first}")
    rows = period_rows(journal.day_counts(*period_bounds(first, last)))
    out = sys.stdout
    if output_format is StatusFormat.csv:
        write_csv(out, rows, FIELDS)
    elif output_format is StatusFormat.json:
        write_json_array(out, rows)
    elif output_format is StatusFormat.jsonl:
        write_json_lines(out, rows)
    elif not quiet:
        write_period_table(out, rows, first.isoformat(), last.isoformat())


def _print_page(
    console: Console,
    journal: JournalBackend,
    page: int,
    room: int,
    state: str | None,
    verdict: str | None,
) -> None:
    """At most ``page`` invoices, those that need a person first, in the ``room`` lines left
    on the screen (less two: the exit line and the shell's prompt), and a line saying what is
    not shown."""
    from invoicectl.render.listing import attention_first
    from invoicectl.render.page import LEFT_OUT_FIRST, print_page

    records = list(attention_first(journal, page + 1, state, verdict))
    longest_note = _note(page, list(LEFT_OUT_FIRST))
    shown, left_out = print_page(
        console, records[:page], room - _screen_lines(console, longest_note) - 2
    )
    if len(records) > shown or left_out:
        console.print(_note(shown if len(records) > shown else None, left_out), highlight=False)


def _note(first: int | None, left_out: list[str]) -> str:
    said = []
    if first is not None:
        said.append(
            f"the first {first}, those that need a person first; --all lists every one "
            "(paged), --limit N more, --state STATE one state"
        )
    if left_out:
        said.append(f"{', '.join(left_out)} left out for the width: `invoicectl show ID` has them")
    return "; ".join(said)


def _screen_lines(console: Console, *texts: str) -> int:
    """The lines ``texts`` take on the screen, wrapped as the console wraps them."""
    from rich.text import Text

    return sum(len(console.render_lines(Text(text), pad=False)) for text in texts)


@contextmanager
def pager() -> Iterator[IO[str]]:
    """A stream into ``$PAGER`` (else ``less``, which quits at once when all fits, keeps
    colours and leaves the screen as it was: LESS=FRX unless set); stdout when there is
    none. A person who quits the pager early ends the listing, not with an error."""
    given = os.environ.get("PAGER") or "less"
    env = {**os.environ, "LESS": os.environ.get("LESS", "FRX")}
    try:
        process = subprocess.Popen(shlex.split(given), stdin=subprocess.PIPE, text=True, env=env)
    except (OSError, ValueError, IndexError) as error:  # not there; quotes unclosed; empty
        reason = getattr(error, "strerror", None) or "it cannot be read as a command"
        say(f"invoicectl: warning: no pager: {given!r} ($PAGER): {reason}; listing unpaged")
        yield sys.stdout
        return
    assert process.stdin is not None
    try:
        yield process.stdin
    except BrokenPipeError:
        pass
    finally:
        with suppress(BrokenPipeError):
            process.stdin.close()
        process.wait()
