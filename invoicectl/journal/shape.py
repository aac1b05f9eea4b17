"""Whether a journal has every table and column of this version's schema.

At every open of a SQLite journal, once it is migrated, its tables' column names are read in
one query (0.14 ms) and their digest compared with this version's (``SHAPE_DIGEST``, held to
what the migrations make by a test). Only a journal that differs (a table or column dropped
by hand, or one added) is compared with a schema the migrations build in memory (90 ms), to
name what it lacks (``missing_schema``, which ``doctor`` and ``backup`` ask too).
"""

from __future__ import annotations

import hashlib
import sqlite3

from invoicectl.errors import JournalError

SHAPE_DIGEST = "8925ff8c11349687f332af32e95c34d9c7b0218b24b81c8fb60ea15840990c73"

# The tables of a journal brought up to date (a test holds this to what the migrations make):
# what a PostgreSQL journal's open checks it has.
TABLES = frozenset((
    "attempts", "blobs", "chain", "claims", "environment", "events", "file_stats",
    "history_checks", "identity", "invoices", "rate_starts", "receivers", "revisions", "runs",
    "unfinished", "unidentified_files", "validations", "workers",
))  # fmt: skip

_COLUMNS = (
    "SELECT m.name, p.name FROM sqlite_master m, pragma_table_info(m.name) p"
    " WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY 1, 2"
)


def shape_digest(conn: sqlite3.Connection) -> str:
    """The sha256 of the journal's ``table.column`` names, in order."""
    digest = hashlib.sha256()
    for table, column in conn.execute(_COLUMNS):
        digest.update(f"{table}.{column}\n".encode())
    return digest.hexdigest()


def missing_schema(conn: sqlite3.Connection, reference: sqlite3.Connection) -> list[str]:
    """The tables and columns of ``reference`` (this version's schema) that the journal on
    ``conn`` (fully migrated, by its own record) lacks: ``table`` or ``table.column``."""
    found = _shape(conn)
    missing: list[str] = []
    for table, columns in _shape(reference).items():
        if table not in found:
            missing.append(table)
        else:
            missing += [f"{table}.{column}" for column in columns if column not in found[table]]
    return missing


def refuse_lacking(missing: list[str], journal: object) -> None:
    """JournalError for a journal, brought up to date, that lacks ``missing`` (tables, or
    ``table.column``): dropped by hand, a command would fail at its first use of one, half
    way through its work."""
    if missing:
        more = len(missing) - 5
        shown = ", ".join(missing[:5]) + (f" and {more} more" if more > 0 else "")
        raise JournalError(
            f"the journal {journal} is damaged: its schema lacks {shown} (dropped outside "
            "invoicectl?); nothing was changed. `invoicectl doctor` names all it lacks; "
            "restore the journal from a backup"
        )


def _shape(conn: sqlite3.Connection) -> dict[str, list[str]]:
    shape: dict[str, list[str]] = {}
    for table, column in conn.execute(_COLUMNS):
        shape.setdefault(str(table), []).append(str(column))
    return shape
