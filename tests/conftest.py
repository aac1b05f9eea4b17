from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# CI runs the same examples every time (a landing must not hinge on a lucky draw); locally
# the examples vary from run to run, which is how the mutation tests keep finding things.
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


@pytest.fixture(autouse=True)
def isolated_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No test touches real state or real credentials."""
    journal = tmp_path / "state" / "journal.db"
    monkeypatch.setenv("INVOICECTL_JOURNAL", str(journal))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    for name in (
        "GOROUTE_API_KEY",
        "GOROUTE_BASE_URL",
        "INVOICECTL_DEBUG",
        "INVOICECTL_CONFIG",
        "INVOICECTL_PING_URL",
        "INVOICECTL_PROFILE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "200")
    return journal


@pytest.fixture
def outbox(tmp_path: Path) -> Path:
    directory = tmp_path / "outbox"
    directory.mkdir()
    return directory


# ---- a PostgreSQL server for the tests of the PostgreSQL journal (tests/pgserver.py) -----


@pytest.fixture(scope="session")
def pg_server():
    """One throwaway PostgreSQL server for the session; each test takes a new database."""
    import pgserver

    reason = pgserver.missing_reason()
    if reason is not None:
        if pgserver.required():
            pytest.fail(f"INVOICECTL_REQUIRE_POSTGRES=1 but {reason}")
        pytest.skip(reason)
    with pgserver.running_server() as server:
        yield server


@pytest.fixture
def pg_url(pg_server) -> str:
    """The URL of a new, empty database (a journal's) on the session's server."""
    return pg_server.new_database()


@pytest.fixture(params=["sqlite", "postgresql"])
def journal_at(request: pytest.FixtureRequest, tmp_path: Path):
    """Where a test's journal lives, once on each backend: a SQLite file, then a PostgreSQL
    database. ``open_journal(journal_at)`` opens it; the CLI takes ``str(...)`` for a path
    and ``journal_url(...)`` for either."""
    from invoicectl.locations import JournalURL

    if request.param == "sqlite":
        return tmp_path / "journal.db"
    return JournalURL(request.getfixturevalue("pg_url"))
