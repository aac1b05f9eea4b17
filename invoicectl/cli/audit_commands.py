"""The commands that give an auditor evidence: ``verify``."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from invoicectl.cli.app import app
from invoicectl.cli.options import JournalOption, SandboxOption, journal_path

JsonOption = Annotated[bool, typer.Option("--json", help="One JSON document on stdout.")]


@app.command()
def verify(
    read_data_subset: Annotated[
        str | None,
        typer.Option(
            "--read-data-subset",
            metavar="PERCENT",
            help="Read only this share of the stored blobs (e.g. 10%), chosen at random.",
        ),
    ] = None,
    as_json: JsonOption = False,
    journal: JournalOption = None,
    sandbox: SandboxOption = False,
) -> None:
    """Check the journal, read-only: SQLite's integrity check, the hash chain event by event,
    every stored blob against its sha256, every attempt's body against the stored bytes,
    every invoice against its events. One line per problem; exit 0 only when all hold, 1
    otherwise."""
    from invoicectl.audit.verify import parse_subset
    from invoicectl.audit.verify import verify as check

    result = check(journal_path(journal, sandbox), subset=parse_subset(read_data_subset))
    if as_json:
        print(json.dumps(result.as_dict(), indent=2, ensure_ascii=False))
    else:
        for finding in result.findings:
            print(finding.line())
        print(result.summary())
    raise typer.Exit(0 if result.ok else 1)
