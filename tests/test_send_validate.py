"""``send --validate``: GoRoute's validation before a revision's first send, kept per revision,
and no send spent on what it finds invalid; counted through the emulator's own stats."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from sendkit import emulator, send, settings_for, states
from ublfactory import invoice_xml, write_invoice

from invoicectl.errors import ExitCode
from invoicectl.goroute.retry import RetryPolicy
from invoicectl.journal import Journal
from invoicectl.lifecycle.holds import release
from invoicectl.render.send import summary_line

PROFILE = b"<cbc:ProfileID>urn:fdc:peppol.eu:2017:poacc:billing:01:1.0</cbc:ProfileID>"


@pytest.fixture
def journal_path(tmp_path: Path) -> Path:
    return tmp_path / "validate.db"


def write_invalid(outbox: Path, invoice_id: str) -> None:
    document = invoice_xml(invoice_id)
    assert PROFILE in document
    (outbox / f"{invoice_id}.xml").write_bytes(document.replace(PROFILE, b""))


class FailingValidate(httpx.AsyncBaseTransport):
    """The emulator, except that ``POST /api/v1/validate`` answers 503."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.validations = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/api/v1/validate"):
            self.validations += 1
            return httpx.Response(503, json={"message": "validator down"})
        return await self.inner.handle_async_request(request)


def test_an_invalid_invoice_is_held_with_its_rules_and_never_sent(journal_path: Path, outbox: Path):
    write_invoice(outbox, "GOOD-1")
    write_invoice(outbox, "GOOD-2")
    write_invalid(outbox, "BAD-1")
    sandbox = emulator()

    _, summary = send(settings_for(journal_path), outbox, sandbox.transport(), validate=True)

    stats = sandbox.stats()
    assert stats["validations"] == 3
    assert set(stats["per_invoice"]) == {"GOOD-1", "GOOD-2"}
    assert summary.held_for_validation == ("BAD-1",)
    assert (summary.validations, summary.unvalidated) == (3, 0)
    assert summary.exit_code == ExitCode.NEEDS_RECONCILE  # held: a person decides
    assert summary.to_dict()["validation"] == {"asked": 3, "unvalidated": 0, "held": ["BAD-1"]}
    assert "1 held as invalid (validation); 3 validations" in summary_line(summary)
    with Journal(journal_path) as journal:
        bad = journal.invoice("BAD-1")
        assert bad is not None
        assert (bad.state, bad.hold, bad.idempotency_key) == ("pending", "held", None)
        assert "PEPPOL-EN16931-R001 at /cbc:ProfileID" in (bad.hold_reason or "")
        assert journal.attempts("BAD-1") == []  # no send spent on it
        kept = journal.validation(bad.current_sha256)
        assert kept is not None and not kept.valid
        assert kept.errors == (
            "PEPPOL-EN16931-R001 at /cbc:ProfileID: Business process MUST be provided",
        )
        good = journal.invoice("GOOD-1")
        assert good is not None
        validated = journal.validation(good.current_sha256)
        assert validated is not None and validated.valid and validated.errors == ()


def test_the_same_content_is_not_validated_again(journal_path: Path, outbox: Path):
    write_invoice(outbox, "A-1")
    write_invoice(outbox, "A-2")
    sandbox = emulator()
    settings = settings_for(journal_path)
    send(settings, outbox, sandbox.transport(), validate=True)
    assert sandbox.stats()["validations"] == 2

    write_invoice(outbox, "A-3")
    _, summary = send(settings, outbox, sandbox.transport(), validate=True)

    assert sandbox.stats()["validations"] == 3  # only A-3's content was new
    assert summary.validations == 1
    assert states(journal_path) == {"A-1": "accepted", "A-2": "accepted", "A-3": "accepted"}


def test_a_released_invalid_revision_is_held_again_without_a_request(
    journal_path: Path, outbox: Path
):
    write_invalid(outbox, "BAD-1")
    sandbox = emulator()
    settings = settings_for(journal_path)
    send(settings, outbox, sandbox.transport(), validate=True)
    with Journal(journal_path) as journal:
        released = release(journal, "BAD-1", by="test")
    assert released.done and "holds the same content again" in released.message

    _, summary = send(settings, outbox, sandbox.transport(), validate=True)

    assert summary.held_for_validation == ("BAD-1",) and summary.validations == 0
    assert sandbox.stats()["validations"] == 1
    assert sandbox.stats()["sends_received"] == 0
    with Journal(journal_path) as journal:
        release(journal, "BAD-1", by="test")
    send(settings, outbox, sandbox.transport())  # the operator's choice: without --validate
    assert states(journal_path) == {"BAD-1": "accepted"}


def test_a_failed_validation_sends_anyway(journal_path: Path, outbox: Path):
    write_invalid(outbox, "BAD-1")
    write_invoice(outbox, "GOOD-1")
    sandbox = emulator()
    failing = FailingValidate(sandbox.transport())
    policy = RetryPolicy(max_attempts=2, max_wait=1.0, backoff_initial=0.01, backoff_max=0.02)

    _, summary = send(settings_for(journal_path), outbox, failing, validate=True, policy=policy)

    assert failing.validations == 2  # one try each (an advisory check), then sent unvalidated
    assert (summary.validations, summary.unvalidated) == (2, 2)
    assert summary.held_for_validation == ()
    assert set(sandbox.stats()["per_invoice"]) == {"BAD-1", "GOOD-1"}
    # The validation asked for was not made: not "done; nothing needs attention".
    assert summary.exit_code == ExitCode.INCOMPLETE
    assert summary.exit_cause == "2 not validated"
    with Journal(journal_path) as journal:
        bad = journal.invoice("BAD-1")
        assert bad is not None
        assert journal.validation(bad.current_sha256) is None  # nothing believed, nothing kept


def test_without_validate_no_validation_is_asked(journal_path: Path, outbox: Path):
    write_invalid(outbox, "BAD-1")
    sandbox = emulator()

    _, summary = send(settings_for(journal_path), outbox, sandbox.transport())

    assert sandbox.stats()["validations"] == 0
    assert summary.validations == 0 and "validation" not in summary_line(summary)
    assert states(journal_path) == {"BAD-1": "accepted"}


def test_the_cli_flag_validates_and_holds(outbox: Path):
    from typer.testing import CliRunner

    from invoicectl.cli import app

    write_invoice(outbox, "GOOD-1")
    write_invalid(outbox, "BAD-1")
    args = ["send", str(outbox), "--sandbox", "--rate", "60000", "--validate", "--json"]

    result = CliRunner().invoke(app, args)

    assert result.exit_code == ExitCode.NEEDS_RECONCILE, result.output
    summary = json.loads(result.stdout)  # stderr has the new journal's history check
    assert summary["validation"] == {"asked": 2, "unvalidated": 0, "held": ["BAD-1"]}
    assert summary["counts"] == {"accepted": 1}
