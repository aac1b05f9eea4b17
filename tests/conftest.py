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
