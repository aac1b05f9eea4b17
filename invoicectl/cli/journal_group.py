"""``invoicectl journal``: commands that move a journal as a whole. ``journal copy --to
postgresql://...`` copies a SQLite journal into an empty PostgreSQL journal and checks the
copy (``journal/copying.py``); the SQLite file is left as it was."""

from __future__ import annotations

from typing import Annotated

import typer

from invoicectl.cli.app import app
from invoicectl.cli.options import JournalOption, JsonOption, QuietOption, journal_path
from invoicectl.errors import UsageError
from invoicectl.locations import JournalURL, is_database_url, sqlite_file

journal_app = typer.Typer(
    name="journal",
    help="""Move a journal: copy a SQLite journal into PostgreSQL.

    \b
    Example:
      invoicectl journal copy --to postgresql://invoicectl@db.example/invoicectl
    """,
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(journal_app)


@journal_app.command("copy")
def copy(
    to: Annotated[
        str,
        typer.Option(
            "--to",
            metavar="URL",
            help="The PostgreSQL journal to copy into: postgresql://user@host/db, an empty"
            " database (libpq reads PGPASSWORD and ~/.pgpass for what the URL leaves out).",
            show_default=False,
        ),
    ],
    journal: JournalOption = None,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
) -> None:
    """Copy the SQLite journal into PostgreSQL, and check the copy.

    Everything is copied (stored bytes, revisions, invoices, attempts, runs, events, the
    hash chain, the journal's identity) in one transaction, under the SQLite journal's run
    lock, reading the file read-only; then each table is read back and compared with the
    source before the copy commits. Exit 0 when the copy is complete and equal; 1 when it
    differs (rolled back: the target holds none of it); 2 when the target is not empty or
    either journal is not one to copy; 6 while a run holds the SQLite journal; 75 when the
    server cannot be reached.

    \b
    Example:
      invoicectl journal copy --journal ~/.local/state/invoicectl/journal.db \\
          --to postgresql://invoicectl@db.example/invoicectl
    """
    from invoicectl.journal.copying import copy_journal

    if not is_database_url(to):
        raise UsageError(f"--to {to!r}: give the target as a postgresql:// URL")
    source = sqlite_file(
        journal_path(journal),
        "journal copy",
        "give the SQLite journal to copy with --journal, and the database with --to",
    )
    report = copy_journal(source, JournalURL(to.strip()))
    if as_json:
        from invoicectl.render.formats import to_json

        print(to_json({**report.to_dict(), "exit_code": 0}))
    elif not quiet:
        print("\n".join(report.lines()))
