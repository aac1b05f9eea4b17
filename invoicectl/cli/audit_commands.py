"""The commands that give an auditor evidence: ``verify``, ``export``, ``verify-export``."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer

from invoicectl.cli.app import app
from invoicectl.cli.consoles import say
from invoicectl.cli.options import (
    JournalOption,
    JsonOption,
    QuietOption,
    SandboxOption,
    journal_path,
)
from invoicectl.errors import UsageError
from invoicectl.locations import expand_user, setting_named, sqlite_file
from invoicectl.loglines import explain_exit


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
    quiet: QuietOption = False,
    journal: JournalOption = None,
    sandbox: SandboxOption = False,
) -> None:
    """Check the journal and its hash chain, read-only.

    The file and SQLite's integrity check (a SQLite journal's; PostgreSQL keeps its own
    pages), the hash chain event by event, every stored blob
    against its sha256, every attempt's body against the stored bytes, every invoice,
    attempt, revision, run and decision against its events. One line per problem; exit 0
    only when all hold, 1 otherwise.

    \b
    Examples:
      invoicectl verify
      invoicectl verify --read-data-subset 10% --json
    """
    from invoicectl.audit.verify import parse_subset
    from invoicectl.audit.verify import verify as check

    result = check(journal_path(journal, sandbox), subset=parse_subset(read_data_subset))
    if as_json:
        document = {**result.as_dict(), "exit_code": 0 if result.ok else 1}
        print(json.dumps(document, indent=2, ensure_ascii=False))
    else:
        for finding in result.findings:
            print(finding.line())
        if not quiet:
            print(result.summary())
    if not result.ok:
        explain_exit(1, f"{result.problems} problem(s) found in the journal")
    raise typer.Exit(0 if result.ok else 1)


_POSTGRESQL_EXPORT = (
    "invoicectl cannot export from PostgreSQL yet: what was sent before a `journal copy` to it "
    "exports from the SQLite file copied (an archive now: --journal /path/to/journal.db); "
    "`invoicectl verify` checks this journal, hash chain included; what was sent since has no "
    "signed export"
)

DestArgument = Annotated[Path, typer.Argument(metavar="DEST", help="The export directory.")]


@app.command()
def export(
    destination: DestArgument,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            help="Invoices with a request sent from this date or time (UTC unless"
            " it names an offset).",
        ),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option(
            "--until", help="... up to this date (the whole day included) or time (excluded)."
        ),
    ] = None,
    invoice: Annotated[
        list[str] | None, typer.Option("--invoice", metavar="ID", help="Only this invoice.")
    ] = None,
    signing_key: Annotated[
        Path | None,
        typer.Option(
            "--signing-key",
            help="The Ed25519 key (PEM). Default: config signing_key,"
            " else signing-key.pem beside the journal; made on first use.",
        ),
    ] = None,
    rotate_key: Annotated[
        bool, typer.Option("--rotate-key", help="Retire the signing key and sign with a new one.")
    ] = False,
    journal: JournalOption = None,
    sandbox: SandboxOption = False,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
) -> None:
    """Write a signed archive of what was sent to DEST.

    Verifiable without invoicectl: the exact bytes, the evidence per invoice, the chain
    segment, manifest.json, manifest.sig and signing-key.pub. A second export to DEST adds
    a part with what is new.

    \b
    Examples:
      invoicectl export /srv/audit
      invoicectl export /srv/audit --since 2026-01-01 --until 2026-01-31
      invoicectl export /srv/audit --rotate-key
    """
    from datetime import UTC

    from invoicectl.audit.export import export as write_export
    from invoicectl.audit.signing import load_or_create
    from invoicectl.journal import refuse_missing

    # No command copies a journal back to SQLite: the advice is what can be done today.
    path = sqlite_file(journal_path(journal, sandbox), "export", _POSTGRESQL_EXPORT)
    refuse_missing(path)  # before a key is made beside a journal that is not there
    start, end = _range(since, until)
    retention_years = _retention_years()  # every setting checked before a key is made
    key_path = _key_path(signing_key, path)
    made = not key_path.exists()
    key, retired = load_or_create(key_path, rotate=rotate_key)
    if retired and not (as_json or quiet):
        print(f"retired signing key {retired}; now signing with {key.key_id}")
    elif made and key_path != _default_key_path(path):  # a path named, and mistyped, would sign
        # unnoticed with a key no one trusts (the default, beside the journal, is made so)
        say(
            f"invoicectl: warning: made a new signing key {key.key_id} at {key_path} (there was "
            "none); pin it where parts are checked: verify-export --trusted-key"
            f" {key.key_id}"
        )
    done = write_export(
        path,
        destination,
        key,
        since=start,
        until=end,
        invoice_ids=invoice or None,
        now=datetime.now(UTC),
        retention_years=retention_years,
    )
    if as_json:
        from invoicectl.render.documents import export_document
        from invoicectl.render.formats import to_json

        print(to_json(export_document(done, retired)))
    elif not quiet:
        print(done.line())


@app.command("verify-export")
def verify_export(
    destination: DestArgument,
    trusted_key: Annotated[
        list[str] | None,
        typer.Option("--trusted-key", metavar="KEY_ID", help="Accept only these key ids."),
    ] = None,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
) -> None:
    """Check an export's signatures and files, without a journal.

    Every part's signature and key id, every file against the manifest, the chain segment.
    One line per problem; exit 0 only when all hold.

    \b
    Examples:
      invoicectl verify-export /srv/audit
      invoicectl verify-export /srv/audit --trusted-key KEY_ID --json
    """
    from invoicectl.audit.verify_export import verify_export as check
    from invoicectl.known_keys import key_hider

    keys: list[str] = []
    found, checked = check(destination, set(trusted_key) if trusted_key else None, keys)
    signers = list(dict.fromkeys(keys))  # each key once, in the order parts were signed
    hide = key_hider()  # DEST is named as typed: an API key pasted there, as in any error
    if as_json:
        problems = [{"subject": hide(f.subject), "problem": hide(f.problem)} for f in found]
        document = {"ok": not found, "parts": checked, "keys": signers, "problems": problems}
        print(json.dumps({**document, "exit_code": 0 if not found else 1}, indent=2))
    else:
        for finding in found:
            print(hide(finding.line()))
        if not quiet:
            signed = f"; signed by {', '.join(signers)}" if signers else ""
            outcome = "ok" if not found else f"{len(found)} problem(s)"
            print(f"{outcome}: {checked} part(s) checked{signed}")
            if len(signers) > 1 and not trusted_key:
                print(
                    f"note: {len(signers)} keys signed these parts (a --rotate-key, or a part "
                    "signed again by someone else): confirm each with --trusted-key"
                )
    if found:
        explain_exit(1, f"{len(found)} problem(s) found in the export")
    raise typer.Exit(0 if not found else 1)


def _key_path(option: Path | None, journal: Path) -> Path:
    if option is not None:
        return expand_user(option, "--signing-key")
    import os

    from invoicectl import config_values
    from invoicectl.config_file import config_label
    from invoicectl.settings import load_config

    configured = load_config(os.environ).get("signing_key")
    if configured is None:
        return _default_key_path(journal)
    source = f"config file {config_label(os.environ)}"
    text = config_values.text("signing_key", configured, source)  # not another key, unsaid
    return expand_user(text, *setting_named("signing_key", source))


def _default_key_path(journal: Path) -> Path:
    return journal.parent / "signing-key.pem"


def _retention_years() -> int:
    """``retention_years`` from the config file, checked; else the default (10)."""
    import os

    from invoicectl.settings import retention_years

    return retention_years(os.environ)


def _range(since: str | None, until: str | None) -> tuple[str | None, str | None]:
    """``--since``/``--until`` as the journal's timestamps compare (UTC, ISO 8601): a date is
    a whole UTC day (``--until 2026-01-31`` takes in all of 31 January), a time is exact
    (``--until`` excluded), and a time without an offset is UTC."""
    start = _moment(since, "--since", day_end=False)
    end = _moment(until, "--until", day_end=True)
    if start is not None and end is not None and end <= start:
        raise UsageError(
            f"--until {until} is not after --since {since}: no request can be in that range"
        )
    return (
        None if start is None else start.isoformat(),
        None if end is None else end.isoformat(),
    )


def _moment(text: str | None, option: str, *, day_end: bool) -> datetime | None:
    if text is None:
        return None
    from datetime import UTC, date, timedelta

    try:
        if len(text) in (8, 10) and "T" not in text:  # a date, YYYY-MM-DD or YYYYMMDD: the
            # day, from its first moment (to its last; 9999-12-31, many a script's "no end",
            # to the last moment there is)
            day = datetime.combine(date.fromisoformat(text), datetime.min.time(), UTC)
            if not day_end:
                return day
            return (
                day + timedelta(days=1)
                if day.date() < date.max
                else datetime.max.replace(tzinfo=UTC)
            )
        moment = datetime.fromisoformat(text)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.astimezone(UTC)
    except ValueError:
        raise UsageError(
            f"{option} {text!r}: give a date like 2026-01-31 or a time like 2026-01-31T18:00"
        ) from None
    except OverflowError:
        raise UsageError(f"{option} {text!r} falls outside the years 1 to 9999 in UTC") from None
