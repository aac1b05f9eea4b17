"""What went wrong with the journal, as one line naming the file and the cause (cron's view).

A cron job's log gets one line per failure; "cannot use: No space left on device" names no
file, and "free disk space" is wrong advice for a journal that is read-only or immutable. So
every SQLite or system error on the journal is read here, by its kind, into one line: which
file, what the system or SQLite said, and what a person does about it. SQLite's kind is its
extended error name (``sqlite_errorname``, Python 3.11+); the system's is ``errno``. Nothing
here touches the journal; ``odd_sidecar`` looks at what lies beside it.
"""

from __future__ import annotations

import errno
import re
import sqlite3
import stat
from pathlib import Path

_KEPT = "everything committed before is kept"

# `invoicectl backup` makes backups; putting one back is a copy (README, "Backing the journal
# up while cron runs").
RESTORE = (
    "restore the journal from a backup (stop the cron job, copy the backup to the journal's "
    "path with no -wal or -shm beside it)"
)

# The first that the error's SQLite name starts with decides.
_SQLITE_ADVICE: tuple[tuple[str, str], ...] = (
    (
        "SQLITE_READONLY",
        "it is read-only to this process: make the file and its directory writable by this "
        "user (chmod/chown; if `lsattr` shows it immutable, `chattr -i`), or remount its file "
        f"system read-write, then run again; {_KEPT}",
    ),
    (
        "SQLITE_CANTOPEN",
        "check that its directory exists and that this user may write and enter it (not "
        "read-only, not immutable: `lsattr`), and that the file and its -wal and -shm beside "
        "it are writable",
    ),
    (
        "SQLITE_PERM",
        "permission denied: check the owner and mode of the file and its directory, and "
        "whether it is immutable (`lsattr`)",
    ),
    ("SQLITE_FULL", f"the disk is full: free space on its file system and run again; {_KEPT}"),
    (
        "SQLITE_IOERR",
        "the system refused a read or write (a full disk, a file-size limit such as "
        f"`ulimit -f`, or a failing disk: see `dmesg`); fix that and run again; {_KEPT}",
    ),
    (
        "SQLITE_NOTADB",
        "it is not an invoicectl journal: point --journal or INVOICECTL_JOURNAL at the "
        "journal, or restore it from a backup (a new, empty journal would not know what was "
        "sent)",
    ),
    (
        "SQLITE_CORRUPT",
        f"it is damaged: keep the file for inspection and {RESTORE}; the next send then "
        "checks GoRoute before sending",
    ),
    (
        "SQLITE_BUSY",
        "another process holds it locked (not an invoicectl run, which would be named): "
        "close whatever has it open (an sqlite3 shell, a copy tool) and run again",
    ),
    (
        "SQLITE_LOCKED",
        "another connection holds it locked: close whatever has it open and run again",
    ),
)

_OS_ADVICE: dict[int, str] = {
    errno.ENOSPC: f"free space on its file system and run again; {_KEPT}",
    errno.EDQUOT: f"the disk quota is used up: free space or raise the quota; {_KEPT}",
    errno.EROFS: "its file system is mounted read-only: remount it read-write, or use "
    "--journal on a writable one",
    errno.EACCES: "check the owner and mode of the file and its directory",
    errno.EPERM: "if `lsattr` shows it (or its directory) immutable, `chattr -i` it; else "
    "check its owner and mode",
    errno.EIO: f"the disk failed a read or write: see `dmesg`, then run again; {_KEPT}",
    errno.EFBIG: f"a file-size limit (`ulimit -f`) or the file system's refused it; {_KEPT}",
}


# SQLite's words for a table or a column that is not there.
_SCHEMA_LACKS = re.compile(r"^no such (table|column)|has no column named ")
# A text the journal holds that is not UTF-8: no invoicectl writes one, a damaged page does.
_NOT_UTF8 = "Could not decode to UTF-8"


def explain_sqlite(error: sqlite3.Error, journal: Path | None) -> str:
    """One line for a SQLite error on ``journal``: the file, SQLite's words, the advice."""
    where = f"the journal {journal}" if journal else "the journal"
    name = getattr(error, "sqlite_errorname", "") or ""
    readonly = name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN"))
    if journal and readonly and (odd := odd_sidecar(journal)):
        return f"{where} could not be used ({error}): {odd}"
    for prefix, advice in _SQLITE_ADVICE:
        if name.startswith(prefix):
            return f"{where} could not be used ({error}): {advice}"
    if _SCHEMA_LACKS.search(str(error)):
        # The schema its migrations say it has is not there: a table dropped by hand, or a
        # file pieced together; running again changes nothing.
        return (
            f"{where} is damaged: its schema lacks what its migrations made ({error}); "
            f"{_KEPT}. `invoicectl doctor` checks it; restore the journal from a backup"
        )
    said = str(error).encode("unicode_escape").decode("ascii")  # a damaged text, escaped
    if said.startswith(_NOT_UTF8):
        return (
            f"{where} is damaged: it holds a text that is not UTF-8 ({said}), a damaged page "
            f"or a byte changed by hand; {_KEPT}. `invoicectl doctor` names the damage (a "
            f"damaged index it tells how to rebuild); else {RESTORE}"
        )
    return (
        f"{where} could not be written or read ({said}); {_KEPT}: run again, and if it "
        "recurs, check the disk"
    )


def odd_sidecar(journal: Path) -> str | None:
    """What to do when the -wal or -shm beside ``journal`` is there but no regular file (a
    directory, say): SQLite then calls the journal read-only, and "make it writable" sends a
    person to the wrong file (helper-83). None when both are files or absent."""
    for suffix in ("-wal", "-shm"):
        sidecar = Path(f"{journal}{suffix}")
        try:
            mode = sidecar.lstat().st_mode
        except OSError:
            continue
        if not stat.S_ISREG(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else "no regular file"
            return (
                f"{sidecar} beside it is {kind}, where SQLite keeps the journal's {suffix[1:]} "
                f"file: move it aside (with no invoicectl running) and run again; {_KEPT}"
            )
    return None


def explain_lost_row(journal: Path, what: str) -> str:
    """One line for a row the journal must hold and does not (deleted by hand, or a file
    pieced together): ``what`` names it. Nothing more is done with such a journal; a send
    may have sent other invoices before it came to the row, so it never says none went."""
    return (
        f"the journal {journal} is damaged: {what} is gone (deleted by hand, or the file "
        f"pieced together); invoicectl stops and sends nothing more from it, and {_KEPT} "
        "(any send before this included). Restore the journal from a backup"
    )


def explain_never_written(invoice_id: str | None, error: ValueError) -> str:
    """One line for a row holding a state or hold no invoicectl writes: ``error`` is the
    enum's own (``'x' is not a valid InvoiceState``)."""
    whose = f"the invoice {invoice_id!r}" if invoice_id is not None else "an invoice"
    return (
        f"the journal is damaged: {whose} holds what invoicectl never writes ({error}; the "
        "journal changed by hand?); nothing was changed. `invoicectl verify` shows what "
        f"differs from the hash chain; {RESTORE}"
    )


def explain_missing(journal: Path) -> str:
    """One line for a journal that is not there, to a command that does not create one."""
    return (
        f"no journal at {journal}: nothing was ever scanned or sent with it here, or it was "
        "lost or not mounted; `invoicectl scan` or `send` creates one"
    )


def explain_empty(journal: Path) -> str:
    """One line for a journal file of 0 bytes, to a command that does not create one."""
    return (
        f"the journal {journal} is empty (0 bytes): it was cut to nothing, or a scan or send "
        "stopped before setting it up; nothing was read or changed. If it held invoices, "
        "restore it from a backup; if not, `invoicectl scan` or `send` sets it up"
    )


def explain_os(error: OSError, journal: Path | None) -> str:
    """One line for a system error: the file it names (else the journal, or a file beside
    it), the system's words, and advice for the causes a person can act on."""
    if error.filename:
        where = f"{error.filename}"
    elif journal is not None:
        where = f"the journal {journal} (or a file beside it)"
    else:
        where = "a file"
    line = f"cannot use {where}: {error.strerror or error}"
    advice = _OS_ADVICE.get(error.errno or 0)
    return f"{line}: {advice}" if advice else line
