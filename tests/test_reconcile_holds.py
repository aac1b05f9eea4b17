"""What reconcile says of invoices on hold it has nothing to look up for (helper-107): a send
on a journal that lost its history held 10 as "not checked" (no transaction id, no unanswered
send), exit 4, and pointed at reconcile, which said "nothing to reconcile", exit 0. Such holds
ask a person, as ``status`` and the README's exit table say: so does reconcile now."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner
from ublfactory import write_invoice

from invoicectl.cli import app

runner = CliRunner()


def test_an_invoice_on_hold_with_nothing_to_look_up_is_still_named(
    outbox: Path, tmp_path: Path
) -> None:
    journal = str(tmp_path / "journal.db")
    write_invoice(outbox, "INV-1")
    write_invoice(outbox, "INV-2")
    assert runner.invoke(app, ["scan", str(outbox), "--journal", journal]).exit_code == 0
    held = runner.invoke(app, ["hold", "INV-1", "--journal", journal, "--reason", "ask sales"])
    assert held.exit_code == 0, held.output

    said = runner.invoke(app, ["reconcile", "--sandbox", "--journal", journal])
    document = runner.invoke(app, ["reconcile", "--sandbox", "--journal", journal, "--json"])

    assert said.exit_code == 4, said.output
    said_line = "nothing to look up (0 requests); 1 on hold (`invoicectl status` says why); exit 4"
    assert said_line in said.output, said.output
    assert json.loads(document.stdout)["on_hold"] == 1
    released = runner.invoke(app, ["release", "INV-1", "--journal", journal])
    assert released.exit_code == 0, released.output
    after = runner.invoke(app, ["reconcile", "--sandbox", "--journal", journal])
    assert after.exit_code == 0, after.output
    assert "nothing to reconcile (0 requests); exit 0" in after.output
