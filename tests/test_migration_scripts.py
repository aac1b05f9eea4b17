"""A migration's script is run statement by statement inside the migrations' transaction;
``migrations.statements`` finds the statements in one pass where sqlite-utils joins the script
again at every character (issue 13: 40 ms of every new journal). Held to sqlite-utils' own
splitting, and a new journal's schema to the one sqlite-utils' plain ``Database`` makes."""

from __future__ import annotations

import sqlite3

import pytest
from sqlite_utils import Database
from sqlite_utils.db import _iter_complete_sql_statements
from sqlite_utils.migrations import Migrations

from invoicectl.journal.chain import CHAIN_SCHEMA
from invoicectl.journal.initial_schema import INITIAL_SCHEMA
from invoicectl.journal.migrations import MIGRATION_SET, MIGRATIONS, bring_up_to_date, statements
from invoicectl.journal.monitoring_schema import MONITORING_INDEXES

_AWKWARD = [
    "CREATE TABLE a (x TEXT DEFAULT ';'); INSERT INTO a VALUES ('b;c')",
    "-- a comment; with a semicolon\nCREATE TABLE a (x);\n-- and one at the end\n",
    "/* block; comment */ CREATE TABLE a (x); /* trailing; */",
    'CREATE TABLE "semi;colon" (x); SELECT 1',
    """CREATE TABLE a (x);
    CREATE TRIGGER t AFTER INSERT ON a BEGIN
        UPDATE a SET x = 1; UPDATE a SET x = 2;
    END;
    SELECT 2;""",
    "",
    ";;  ;\n",
    "SELECT 1",
    "SELECT 1;   ",
]


@pytest.mark.parametrize(
    "script", [INITIAL_SCHEMA, CHAIN_SCHEMA, MONITORING_INDEXES, *_AWKWARD], ids=repr
)
def test_statements_are_those_sqlite_utils_finds(script: str) -> None:
    ours = list(statements(script))
    theirs = [statement for statement in _iter_complete_sql_statements(script)]
    # sqlite-utils also yields what only holds semicolons; running it does nothing
    assert ours == [statement for statement in theirs if statement.strip(" \t\r\n;")]


def _schema(conn: sqlite3.Connection) -> list[tuple[str, str, str]]:
    rows = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY type, name")
    return [tuple(row) for row in rows]


def test_a_new_journal_s_schema_is_the_one_sqlite_utils_makes() -> None:
    ours = sqlite3.connect(":memory:", isolation_level=None)
    bring_up_to_date(ours)
    theirs = sqlite3.connect(":memory:", isolation_level=None)
    theirs.execute("BEGIN IMMEDIATE")
    migrations = Migrations(MIGRATION_SET)
    for migration in MIGRATIONS:
        migrations()(migration)
    migrations.apply(Database(theirs, execute_plugins=False))
    theirs.execute("COMMIT")
    assert _schema(ours) == _schema(theirs)
    assert len(_schema(ours)) > 40
