"""The command line: options in, one library call, rendered result out, an exit code.

No SQL and no HTTP here. The package is small modules behind this facade:

    app               the Typer app, the one error-translation point, --version, main()
    options           options shared between commands, declared once
    consoles          stdout's rich console; ``say`` for every line on stderr
    journal_commands  scan, status, show
    send_commands     send, reconcile, validate
    operator_commands hold, release, abandon
    audit_commands    verify, export, verify-export
    doctor_command    doctor
    sandbox_command   sandbox
    profile_commands  profiles

Importing this package registers every command on ``app``; ``main`` is the entry point of
the ``invoicectl`` script and of ``python -m invoicectl``.
"""

# isort: off
# Imported for their commands, in the order `invoicectl --help` lists them.
from invoicectl.cli import (  # noqa: F401
    journal_commands,
    send_commands,
    operator_commands,
    audit_commands,
    journal_group,
    doctor_command,
    sandbox_command,
    profile_commands,
)
from invoicectl.cli.app import app, main

# isort: on

__all__ = ["app", "main"]
