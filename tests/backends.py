"""The journal's two backends, for the tests parametrised over both (``journal_at``, conftest).

A witness reads what another connection sees (what is committed): SQLite's own module on a
file, psycopg on a PostgreSQL database, never the journal's connection under test. The CLI
takes a journal as text: ``cli_journal`` gives the path, or the URL whole.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from invoicectl.locations import JournalURL, Location


def witness_rows(location: Location, sql: str, parameters: tuple[Any, ...] = ()) -> list[tuple]:
    """The rows of ``sql`` (``?`` placeholders) on a connection of its own."""
    if isinstance(location, JournalURL):
        import psycopg

        with psycopg.connect(location.connection_url(), autocommit=True) as conn:
            return [tuple(row) for row in conn.execute(sql.replace("?", "%s"), parameters)]
    with sqlite3.connect(location) as witness:
        return [tuple(row) for row in witness.execute(sql, parameters)]


def witness_execute(location: Location, sql: str, parameters: tuple[Any, ...] = ()) -> None:
    """``sql`` written and committed on a connection of its own (a test's staging)."""
    if isinstance(location, JournalURL):
        import psycopg

        with psycopg.connect(location.connection_url(), autocommit=True) as conn:
            conn.execute(sql.replace("?", "%s"), parameters)
        return
    with sqlite3.connect(location) as witness:
        witness.execute(sql, parameters)
    witness.close()


def cli_journal(location: Location) -> str:
    """``location`` as ``--journal`` takes it."""
    if isinstance(location, JournalURL):
        return location.connection_url()
    return str(location)


def is_postgresql(location: Location) -> bool:
    return isinstance(location, JournalURL)


def as_path(location: Location) -> Path:
    assert isinstance(location, Path), location
    return location


def lose(location: Location, *, truncate: bool = False) -> None:
    """The journal lost with its disk: a SQLite file and its -wal/-shm removed (or the file
    truncated to 0 bytes), a PostgreSQL database emptied (a new server's, or a restore that
    missed it): either way the next run finds an empty journal with a new identity."""
    if isinstance(location, JournalURL):
        import psycopg

        with psycopg.connect(location.connection_url(), autocommit=True) as conn:
            conn.execute("DROP SCHEMA public CASCADE")
            conn.execute("CREATE SCHEMA public")
        return
    if truncate:
        location.write_bytes(b"")
        return
    for path in location.parent.glob(location.name + "*"):
        path.unlink()


def _server_and_name(location: JournalURL) -> tuple[str, str]:
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(location.connection_url())
    return urlunsplit(parts._replace(path="/postgres")), parts.path.lstrip("/")


def _copy_database(location: JournalURL, source: str, target: str) -> None:
    import psycopg

    server, _ = _server_and_name(location)
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
            (source,),
        )
        conn.execute(f'DROP DATABASE IF EXISTS "{target}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{target}" TEMPLATE "{source}"')


def snapshot(location: Location, name: str) -> Location:
    """A copy of the journal as it is now (SQLite's backup; a database made from it)."""
    if isinstance(location, JournalURL):
        _, database = _server_and_name(location)
        _copy_database(location, database, f"{database}_{name}")
        server, _ = _server_and_name(location)
        return JournalURL(server.rsplit("/", 1)[0] + f"/{database}_{name}")
    from invoicectl.journal.backup import backup

    copy = location.with_name(f"{name}.db")
    backup(location, copy)
    return copy


def restore(location: Location, copy: Location) -> None:
    """The journal put back as ``copy`` holds it (an older backup restored)."""
    if isinstance(location, JournalURL):
        assert isinstance(copy, JournalURL)
        _, database = _server_and_name(location)
        _, source = _server_and_name(copy)
        _copy_database(location, source, database)
        return
    import shutil

    assert isinstance(copy, Path)
    shutil.copyfile(copy, location)


def another_journal(journal_at: Location, request: Any, name: str) -> Location:
    """A second journal on ``journal_at``'s backend: a file beside it, or a new database."""
    if isinstance(journal_at, JournalURL):
        return JournalURL(request.getfixturevalue("pg_server").new_database())
    return journal_at.with_name(f"{name}.db")


def chain_findings(location: Location) -> list[str]:
    """What is wrong with the journal's hash chain: ``verify``'s findings on a SQLite file;
    on PostgreSQL (which ``verify`` does not read) the chain walked through a witness: each
    event's hash links it to the one before, the numbers run without a gap, and every
    chained row as it is now is the row its last event holds (the chain's form: SELECT *)."""
    if isinstance(location, Path):
        from invoicectl.audit.verify import verify

        return [finding.line() for finding in verify(location).findings]
    import json

    from invoicectl.journal.chain import COVERED, ZERO_HASH, link

    findings: list[str] = []
    previous, expected_seq = ZERO_HASH, 1
    last: dict[tuple[str, str], dict[str, Any]] = {}
    for seq, payload, hash_ in witness_rows(
        location, "SELECT seq, payload, hash FROM chain ORDER BY seq"
    ):
        if seq != expected_seq:
            findings.append(f"chain event {seq} follows {expected_seq - 1}")
        if link(previous, payload.encode("utf-8")) != hash_:
            findings.append(f"chain event {seq}: its hash does not link it")
        event = json.loads(payload)
        if "table" in event and "row" in event:
            last[(event["table"], str(event["key"]))] = event["row"]
        previous, expected_seq = hash_, seq + 1
    for table, (_kind, key_column) in COVERED.items():
        for row in witness_dicts(location, f"SELECT * FROM {table}"):
            held = last.get((table, str(row[key_column])))
            if held != json.loads(json.dumps(row)):
                findings.append(f"{table} {row[key_column]}: not as its last chain event holds")
    return findings


def witness_dicts(location: Location, sql: str) -> list[dict[str, Any]]:
    """The rows of ``sql`` as mappings, on a witness's connection."""
    if isinstance(location, JournalURL):
        import psycopg
        from psycopg.rows import dict_row

        with psycopg.connect(location.connection_url(), row_factory=dict_row) as conn:
            return list(conn.execute(sql))
    with sqlite3.connect(location) as witness:
        witness.row_factory = sqlite3.Row
        return [dict(row) for row in witness.execute(sql)]
