"""Exit codes and the one exception family the CLI turns into a message and a code.

    InvoicectlError                 exit 1: could not run
    ├── ConfigError                 exit 1: bad setting, missing key, unreadable key file
    ├── JournalError                exit 1: journal unreadable, newer schema, wrong environment
    │   ├── EnvironmentMismatch     exit 1: journal bound to another base URL
    │   └── StoredCopyDamaged       one content's stored bytes fail their sha256 (a send
    │                               holds that invoice and goes on; exit 1 only elsewhere)
    ├── UsageError                  exit 2: options that contradict each other
    ├── CredentialsRefused          exit 5: the API refused the credentials (401/403)
    └── JournalLocked               exit 6: another run holds the journal

Library code raises these and never prints or exits; the CLI catches them in one place
(``cli/app.py``).
"""

from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple


class ExitCode(IntEnum):
    OK = 0
    COULD_NOT_RUN = 1
    USAGE = 2
    NEEDS_FIX = 3
    NEEDS_RECONCILE = 4
    AUTH_REFUSED = 5
    LOCKED = 6
    NO_INPUT = 66  # sysexits' EX_NOINPUT, as 75 is its EX_TEMPFAIL
    INCOMPLETE = 75
    INTERRUPTED = 130


# What each code tells a person or a monitor, in the order the help and the README list them.
MEANINGS = {
    ExitCode.OK: "done; nothing needs attention",
    ExitCode.INCOMPLETE: "incomplete for a transient reason (rate limit, outage, deadline): "
    "the next run continues",
    ExitCode.NO_INPUT: "the outbox holds no *.xml file (a wrong or unmounted path?)",
    ExitCode.NEEDS_FIX: "some invoices are invalid or rejected: a person must fix them",
    ExitCode.NEEDS_RECONCILE: "some invoices need reconciliation (key_reused, unknown outside "
    "the 24-hour window, amended) or are held",
    ExitCode.LOCKED: "another run holds the journal, or sends from the outbox through another "
    "journal",
    ExitCode.AUTH_REFUSED: "the API refused the credentials (401/403)",
    ExitCode.COULD_NOT_RUN: "could not run (configuration, journal unreadable, bug)",
    ExitCode.USAGE: "usage error",
    ExitCode.INTERRUPTED: "interrupted; state saved",
}

# design.md: "the highest-ranked that applies", highest first.
_RANK = [
    ExitCode.USAGE,
    ExitCode.COULD_NOT_RUN,
    ExitCode.AUTH_REFUSED,
    ExitCode.LOCKED,
    ExitCode.INTERRUPTED,
    ExitCode.NEEDS_RECONCILE,
    ExitCode.NEEDS_FIX,
    ExitCode.NO_INPUT,
    ExitCode.INCOMPLETE,
    ExitCode.OK,
]


def worst(*codes: ExitCode) -> ExitCode:
    """The highest-ranked of several exit codes (OK when given none)."""
    return min(codes, key=_RANK.index, default=ExitCode.OK)


class Cause(NamedTuple):
    """One reason for an exit code, in plain words (``2 rejected``, ``deadline reached``):
    a run's exit code is the worst of its causes' codes, and its last line names them."""

    code: ExitCode
    text: str


def explain(code: ExitCode, causes: tuple[Cause, ...] | list[Cause]) -> str:
    """``1 invalid, 2 rejected``: the causes of ``code`` (else what the code means), then
    those of lesser codes after ``also``; the words of the run's last line, ``exit 3: ...``."""
    ranked = sorted(causes, key=lambda cause: _RANK.index(cause.code))
    own = [cause.text for cause in ranked if cause.code == code]
    others = [cause.text for cause in ranked if cause.code not in (code, ExitCode.OK)]
    text = ", ".join(dict.fromkeys(own)) or MEANINGS[code]
    return text + (f"; also {', '.join(dict.fromkeys(others))}" if others else "")


class InvoicectlError(Exception):
    exit_code = ExitCode.COULD_NOT_RUN


class ConfigError(InvoicectlError):
    pass


class JournalError(InvoicectlError):
    pass


class EnvironmentMismatch(JournalError):
    pass


class InvoiceBusy(JournalError):
    """A send worker holds the invoice (a shared PostgreSQL journal): a write now would
    interleave with its send, so nothing was changed."""


class StoredCopyDamaged(JournalError):
    """The bytes the journal stored for one content are gone or no longer hash to its
    sha256: that content must not be sent, and nothing else is affected."""

    def __init__(self, sha256: str, message: str) -> None:
        super().__init__(message)
        self.sha256 = sha256


class ExportError(InvoicectlError):
    """An export that could not be written whole (full disk, unwritable DEST): nothing of
    it is left behind."""


class UsageError(InvoicectlError):
    exit_code = ExitCode.USAGE


class CredentialsRefused(InvoicectlError):
    exit_code = ExitCode.AUTH_REFUSED


class JournalLocked(InvoicectlError):
    exit_code = ExitCode.LOCKED

    def __init__(self, message: str, *, holder_pings: bool = False) -> None:
        super().__init__(message)
        # Kept out by a run of the same journal that pings its own end (a send, a reconcile):
        # this one then sends no end ping of its own (``cli.pinging.leave_end_to_holder``).
        self.holder_pings = holder_pings
