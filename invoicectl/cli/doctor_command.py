"""``invoicectl doctor``: one line per check of what a run needs, exit 0 only when all pass."""

from __future__ import annotations

import typer

from invoicectl.cli.app import app
from invoicectl.cli.options import (
    ApiKeyFileOption,
    JournalOption,
    JsonOption,
    QuietOption,
    SandboxOption,
)
from invoicectl.loglines import explain_exit


@app.command()
def doctor(
    journal: JournalOption = None,
    sandbox: SandboxOption = False,
    api_key_file: ApiKeyFileOption = None,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
) -> None:
    """Check that a run can work here, one line per check.

    Where each setting came from, the API key (its fingerprint, never the key), the base
    URL (GoRoute's health check), the credentials (one cheap GET), the journal (readable,
    quick_check, writable, its base URL), the run lock (free, or held by whom), the clock
    (against GoRoute's Date header) and the free disk space. Changes nothing; two GETs at
    most, 10 s each at most.

    Each check is ok, warn (passes, worth knowing), fail or skipped. Exit 0 only when
    all pass; else 5 when GoRoute refused the key, 75 when it did not answer, 1 otherwise.

    \b
    Examples:
      invoicectl doctor
      invoicectl doctor --json | jq '.checks[] | select(.status != "ok")'
      invoicectl doctor --sandbox         # the built-in emulator, no account
    """
    from invoicectl.doctor.checks import Status
    from invoicectl.doctor.run import diagnose
    from invoicectl.render.formats import to_json

    transport = None
    if sandbox:  # a fresh emulator in this process: nothing of the sandbox's memory is written
        from invoicectl.sandbox import Sandbox

        transport = Sandbox().transport()
    diagnosis = diagnose(
        journal=journal, sandbox=sandbox, api_key_file=api_key_file, transport=transport
    )
    if as_json:
        print(to_json(diagnosis.to_dict()))
    elif quiet:  # the checks that failed, the cause of a non-zero exit
        for check in diagnosis.checks:
            if check.status is Status.fail:
                print(check.line())
    else:
        for check in diagnosis.checks:
            print(check.line())
        print(diagnosis.summary())
    # The last line names the failed checks, not the exit-code table's words for the code.
    explain_exit(int(diagnosis.exit_code), diagnosis.summary().rsplit("; exit ", 1)[0])
    raise typer.Exit(int(diagnosis.exit_code))
