"""The journal's SQL, as PostgreSQL reads it: one statement written for SQLite, translated.

The journal's statements are written once, in SQLite's dialect, and a PostgreSQL journal
runs each through ``translate`` (cached: a statement is translated once per process). What
changes is small and mechanical:

    placeholders   ``?``, ``?N`` and ``:name`` become psycopg's ``%s`` / ``%(name)s``
    IS             SQLite's ``a IS b`` / ``a IS NOT b`` (b not NULL) become IS [NOT] DISTINCT FROM
    INSERT OR      ``INSERT OR IGNORE`` / ``OR REPLACE`` / ``REPLACE`` become ``ON CONFLICT``
    temp.          the connection's temporary schema is ``pg_temp``
    json_each      ``json_each(x)`` of a list becomes ``json_array_elements_text``; ``IN`` such
                   a list, ``= ANY`` an array of it (looked up by index)
    REFERENCES     left out: SQLite does not enforce them (the journal never turns that on)
    types (DDL)    INTEGER -> BIGINT, REAL -> DOUBLE PRECISION, BLOB -> BYTEA, TEXT compared
                   byte by byte (``COLLATE "C"``, as SQLite compares), a table's own
                   ``INTEGER PRIMARY KEY`` an identity column (SQLite's rowid alias)

What does not translate (SQLite's PRAGMAs, ``rowid``, ``json_set``) the PostgreSQL journal
says in its own statements (``pg_scans``, ``pg_journal``); ``translate`` raises on a PRAGMA
rather than let one through.
"""

from __future__ import annotations

import re
from functools import lru_cache

# The key columns of the tables the journal writes with INSERT OR REPLACE / REPLACE: the
# ON CONFLICT target, and every column to set from EXCLUDED (from the statement's own column
# list, or these when it has none).
_REPLACED = {
    "receivers": (("peppol_id",), ("peppol_id", "registered", "document_types", "checked_at")),
    "validations": (("sha256",), ("sha256", "valid", "errors", "checked_at")),
    "file_stats": (
        ("path",),
        ("path", "size", "mtime_ns", "ctime_ns", "inode", "checked_at_ns", "sha256", "invoice_id"),
    ),
    "pg_temp.ids": (
        ("invoice_id",),
        ("invoice_id", "one_content", "scan_row", "same", "state"),
    ),
    "pg_temp.last_event": (("tbl", "key"), ("tbl", "key", "seq", "digest")),
}

_LITERAL = re.compile(r"'(?:[^']|'')*'")
_NUMBERED = re.compile(r"\?(\d+)")
_NAMED = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
_IS_NOT = re.compile(r"\bIS NOT (?!NULL\b)", re.IGNORECASE)
_IS = re.compile(r"\bIS (?!NOT\b|NULL\b|DISTINCT\b)", re.IGNORECASE)
_INSERT_OR = re.compile(
    r"^\s*(?:INSERT OR (IGNORE|REPLACE)|(REPLACE)) INTO (\S+)(\s*\(([^)]*)\))?", re.IGNORECASE
)
_RETURNING = re.compile(r"\sRETURNING\s", re.IGNORECASE)
_JSON_EACH_LIST = re.compile(r"json_each\(((?:\?|%s|%\(\w+\)s))\)")
# ``x IN (SELECT value FROM json_each(?))``: PostgreSQL's planner guesses 100 rows for any
# set-returning function and, on a table of a few thousand rows, reads the whole table
# rather than look each up; an array it looks up by index (issue 16: a scan's content
# check read every revision).
_IN_JSON_LIST = re.compile(
    r"\b(NOT )?IN \(SELECT value FROM json_each\(((?:%s|%\(\w+\)s))\)\)", re.IGNORECASE
)


class Untranslatable(ValueError):
    """A statement only SQLite can run: the PostgreSQL journal must say it its own way."""


@lru_cache(maxsize=1024)
def translate(sql: str) -> str:
    """``sql`` (SQLite's dialect, the journal's) as PostgreSQL runs it through psycopg."""
    if sql.lstrip().upper().startswith("PRAGMA"):
        raise Untranslatable(f"a PRAGMA has no PostgreSQL form: {sql.strip()[:60]}")
    pieces = _split_literals(sql)
    code = [
        _translate_code(piece) if index % 2 == 0 else piece for index, piece in enumerate(pieces)
    ]
    # Literals keep their text; a '%' in them must be doubled for psycopg's placeholders.
    text = "".join(
        piece if index % 2 == 0 else piece.replace("%", "%%") for index, piece in enumerate(code)
    )
    return _insert_or(text)


def _split_literals(sql: str) -> list[str]:
    """Code and quoted literals, alternating (code first), so that no rule rewrites a literal."""
    pieces: list[str] = []
    at = 0
    for match in _LITERAL.finditer(sql):
        pieces += [sql[at : match.start()], match.group(0)]
        at = match.end()
    pieces.append(sql[at:])
    return pieces


def _translate_code(code: str) -> str:
    code = code.replace("%", "%%")
    code = _NUMBERED.sub(lambda match: f"%(p{match.group(1)})s", code)
    code = code.replace("?", "%s")
    code = _NAMED.sub(lambda match: f"%({match.group(1)})s", code)
    code = _IS_NOT.sub("IS DISTINCT FROM ", code)
    code = _IS.sub("IS NOT DISTINCT FROM ", code)
    code = re.sub(r"\btemp\.", "pg_temp.", code)
    code = _IN_JSON_LIST.sub(_as_array, code)
    return _JSON_EACH_LIST.sub(r"json_array_elements_text(\1::json)", code)


def _as_array(match: re.Match[str]) -> str:
    test = "<> ALL" if match.group(1) else "= ANY"  # the values are never NULL
    return f"{test}(ARRAY(SELECT json_array_elements_text({match.group(2)}::json)))"


def _insert_or(sql: str) -> str:
    match = _INSERT_OR.match(sql)
    if match is None:
        return sql
    ignore = (match.group(1) or "").upper() == "IGNORE"
    table = match.group(3)
    head = f"INSERT INTO {table}{match.group(4) or ''}"
    rest = sql[match.end() :]
    if ignore:
        clause = " ON CONFLICT DO NOTHING"
    else:
        if table not in _REPLACED:
            raise Untranslatable(f"REPLACE INTO {table}: its key is not known here")
        keys, columns = _REPLACED[table]
        named = match.group(5)
        if named:
            columns = tuple(name.strip() for name in named.split(","))
        updates = ", ".join(f"{name} = EXCLUDED.{name}" for name in columns if name not in keys)
        clause = f" ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {updates}"
    returning = _RETURNING.search(rest)
    if returning is None:
        return f"{head}{rest.rstrip().rstrip(';')}{clause}"
    return f"{head}{rest[: returning.start()]}{clause}{rest[returning.start() :]}"


def translate_schema(script: str) -> list[str]:
    """A migration's SQLite DDL script as PostgreSQL statements, one each."""
    statements = []
    for statement in _statements(script):
        statement = _ddl_types(statement)
        statements.append(translate(statement))
    return statements


_COMMENT = re.compile(r"--[^\n]*")


def _statements(script: str) -> list[str]:
    """The statements of ``script``, comments removed first (comments hold apostrophes; no
    literal of the journal's DDL holds ``--`` or ``;``)."""
    code = _COMMENT.sub("", script)
    return [statement.strip() for statement in code.split(";") if statement.strip()]


# SQLite does not enforce REFERENCES unless asked (the journal never asks, and a scan stores
# a revision before its invoice, in another transaction): PostgreSQL would. Left out, as
# SQLite leaves them unenforced.
_REFERENCES = re.compile(r"\s+REFERENCES\s+\w+\s*\(\w+\)", re.IGNORECASE)
_ROWID_KEY = re.compile(r"\b(id) INTEGER PRIMARY KEY\b(?! CHECK)", re.IGNORECASE)
_TYPES = (
    (re.compile(r"\bINTEGER\b"), "BIGINT"),
    (re.compile(r"\bREAL\b"), "DOUBLE PRECISION"),
    (re.compile(r"\bBLOB\b"), "BYTEA"),
    (re.compile(r"\bTEXT\b"), 'TEXT COLLATE "C"'),
)


def _ddl_types(statement: str) -> str:
    head = statement.lstrip().upper()
    if not (head.startswith("CREATE TABLE") or head.startswith("ALTER TABLE")):
        return statement
    statement = _REFERENCES.sub("", statement)
    statement = _ROWID_KEY.sub(r"\1 BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY", statement)
    for pattern, replacement in _TYPES:
        statement = pattern.sub(replacement, statement)
    return statement
