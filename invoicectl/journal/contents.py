"""What the journal knows of contents and files before a scan reads them: whether it holds
a content (``StoredContents``, asked by the scan's workers too), and whether it recorded the
stats of any file under a directory (``has_stats_under``)."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Collection
from pathlib import Path


class StoredContents:
    """``sha256 in contents``: whether the journal holds a revision of that content.

    One indexed lookup per question (revisions_sha256), never a load of every hash: a scan of
    ten new files into a journal of a million asks ten questions. It is asked in the scan's
    forked workers too, and a SQLite connection must not cross a fork: in the process that
    made it, it asks ``conn`` (the journal's, when given); in any other, a read-only
    connection of its own, opened at its first question. A journal it cannot read (being
    made, say) holds nothing as far as it knows: the file is then parsed, which is only the
    cost a known content would have saved.
    """

    def __init__(
        self, path: Path, conn: sqlite3.Connection | None = None, unless: Collection[str] = ()
    ) -> None:
        self.path = path
        self.unless = frozenset(unless)
        self._conn = conn
        self._pid = os.getpid()

    def __contains__(self, sha256: object) -> bool:
        if sha256 in self.unless:
            return False
        try:
            row = (
                self._connection()
                .execute("SELECT 1 FROM revisions WHERE sha256 = ? LIMIT 1", (sha256,))
                .fetchone()
            )
        except self.error_kinds:
            return False
        return row is not None

    def among(self, sha256s: Collection[str]) -> set[str]:
        """Which of ``sha256s`` the journal holds (but for ``unless``): one query for them
        all, as a scan's worker asks for each chunk of files it has read."""
        wanted = [sha256 for sha256 in set(sha256s) if sha256 not in self.unless]
        if not wanted:
            return set()
        try:
            rows = (
                self._connection()
                .execute(
                    "SELECT DISTINCT sha256 FROM revisions"
                    " WHERE sha256 IN (SELECT value FROM json_each(?))",
                    (json.dumps(wanted),),
                )
                .fetchall()
            )
        except self.error_kinds:
            return set()
        return {sha256 for (sha256,) in rows}

    @property
    def error_kinds(self) -> tuple[type[Exception], ...]:
        """The errors that mean "cannot be read this way" (a journal being made, say)."""
        return (sqlite3.Error,)

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None or self._pid != os.getpid():
            self._pid = os.getpid()
            self._conn = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True)
        return self._conn


def has_stats_under(conn: sqlite3.Connection, directory: str) -> bool:
    prefix = directory.rstrip("/") + "/"
    # Every path that starts with prefix sorts from prefix up to prefix with '0' for '/'.
    row = conn.execute(
        "SELECT 1 FROM file_stats WHERE path >= ? AND path < ? LIMIT 1",
        (prefix, prefix[:-1] + "0"),
    ).fetchone()
    return row is not None
