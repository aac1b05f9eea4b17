"""The checks ``invoicectl doctor`` makes on this machine: settings, key, journal, lock, disk.

Each is read-only: the settings are resolved as every command resolves them (``settings``
records where each value came from), the journal is examined without being opened for
writing or migrated (``journal.health``), and the lock is looked at without being taken
where the kernel can say (``journal.runlock.lock_state``).
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from invoicectl.config_file import config_label, config_path
from invoicectl.doctor.checks import Check, fail, ok, warn
from invoicectl.errors import InvoicectlError
from invoicectl.goroute.apikey import ApiKey
from invoicectl.journal.failures import RESTORE, explain_empty, explain_missing, odd_sidecar
from invoicectl.journal.health import JournalHealth
from invoicectl.journal.runlock import LockState, lock_path_for
from invoicectl.settings import Settings, resolve, retention_years
from invoicectl.text import first_few

# Below this much free space a journal's commits may fail (each send writes its WAL first).
DISK_FAIL_BYTES = 100 * 1024**2
DISK_WARN_BYTES = 1024**3
_SHOWN_SETTINGS = (
    "journal", "base_url", "tier", "rate", "concurrency", "batch_size", "max_attempts",
    "max_wait", "request_timeout",
)  # fmt: skip


def settings_check(
    journal: Path | str | None,
    sandbox: bool,
    environ: Mapping[str, str],
    api_key_file: Path | None = None,
) -> tuple[Check, Settings | None]:
    """The settings as a run would resolve them, and where each value came from (the key of
    ``api_key_file`` is not read, only looked for in the other settings, as a run does)."""
    config_file, config_name = config_path(environ), config_label(environ)
    try:
        settings = resolve(
            journal=journal,
            sandbox=sandbox,
            api_key_file=api_key_file,
            need_key=False,
            environ=environ,
        )
        retention_years(environ)  # export's alone: a bad one would surface only there
    except InvoicectlError as error:  # a bad value: its own line names it and its source
        # A key pasted into the wrong setting is hidden with every check's text (``run``).
        return fail("config", str(error), config_file=config_name), None
    sources = {name: settings.sources[name] for name in _SHOWN_SETTINGS if name in settings.sources}
    chosen = [
        f"{name} from {'the command line' if source == 'option' else source}"
        for name, source in sources.items()
        if source != "default"
    ]
    found = config_file is not None and config_file.is_file()
    message = f"config file {config_name}{'' if found else ' (none there)'}; " + (
        ", ".join(chosen) + "; the rest default" if chosen else "every setting default"
    )
    values = {
        "journal": str(settings.journal),
        "base_url": settings.base_url,
        "rate": settings.rate_per_minute,
        "concurrency": settings.concurrency,
        "batch_size": settings.batch_size,
        "max_attempts": settings.max_attempts,
        "max_wait": settings.max_wait,
        "request_timeout": settings.request_timeout,
    }
    details = {
        "config_file": None if config_file is None else str(config_file),
        "config_file_found": found,
        "sources": sources,
        "values": values,
    }
    return ok("config", message, **details), settings


def api_key_check(
    api_key_file: Path | None, sandbox: bool, environ: Mapping[str, str]
) -> tuple[Check, ApiKey | None]:
    """Whether a key is there, and its fingerprint (never the key: the start of its SHA-256,
    as each run records it in the journal)."""
    try:
        settings = resolve(sandbox=sandbox, api_key_file=api_key_file, environ=environ)
    except InvoicectlError as error:  # no key, or a key file that is not private
        return fail("api_key", str(error)), None
    key, source = settings.api_key, settings.sources.get("api_key", "")
    assert key is not None
    message = f"from {source}, fingerprint {key.fingerprint}"
    return ok("api_key", message, source=source, fingerprint=key.fingerprint), key


def journal_check(health: JournalHealth, base_url: str) -> Check:
    """Readable, undamaged, writable, of this version's schema, bound to these settings'
    base URL (or to none yet)."""
    path = health.path
    details: dict[str, Any] = {
        "path": str(path),
        "exists": health.exists,
        "size_bytes": health.size,
        "wal_bytes": health.wal_size,
        "writable": health.writable,
        "quick_check": (health.problems or ["ok"]) if health.exists and not health.error else [],
        "bound_base_url": health.bound_base_url,
        "schema": health.schema if health.exists else None,
    }
    if not health.exists:
        # A fresh journal would pass every check: a mistyped or unmounted path must not.
        unwritable = "" if health.writable else "; its directory is not writable by this user"
        return fail("journal", explain_missing(path) + unwritable, **details)
    if odd := odd_sidecar(path):  # SQLite reads it as read-only, or cannot open it
        return fail("journal", f"{path} cannot be used: {odd}", **details)
    if health.error is not None:
        return fail("journal", f"{path} cannot be read as a journal: {health.error}", **details)
    if health.size == 0 and health.wal_size == 0:
        return fail("journal", explain_empty(path), **details)
    if health.problems:
        first = health.problems[0][:120]
        return fail(
            "journal",
            f"{path} is damaged: quick_check found {len(health.problems)} problem(s), the "
            f"first: {first}; {RESTORE}",
            **details,
        )
    if health.schema == "newer":
        return fail("journal", f"{path} was written by a newer invoicectl: upgrade", **details)
    if health.schema == "foreign":
        return fail(
            "journal",
            f"{path} is not an invoicectl journal: an SQLite database of another program; "
            "name a file of its own with --journal or INVOICECTL_JOURNAL",
            **details,
        )
    if health.schema == "damaged":
        lacking = first_few(health.missing, 5)
        return fail(
            "journal",
            f"{path} is damaged: its schema lacks {lacking}; {RESTORE}",
            **details,
        )
    if not health.writable:
        return fail("journal", f"{path} or its directory is not writable by this user", **details)
    bound = health.bound_base_url
    # ``base_url`` names the profile too (``environment.bound_to``).
    if bound is not None and bound != base_url:
        return fail(
            "journal",
            f"{path} is bound to {bound}, but the settings send to {base_url}: send and "
            "reconcile refuse it without --allow-environment-change",
            **details,
        )
    size = _size(health.size) + (f" (+ {_size(health.wal_size)} WAL)" if health.wal_size else "")
    binding = f"bound to {bound}" if bound else "not bound to a base URL yet"
    later = "; its schema is upgraded at the next run" if health.schema == "older" else ""
    return ok("journal", f"{path}: {size}, quick_check ok, writable, {binding}{later}", **details)


def lock_check(state: LockState, journal: Path) -> Check:
    """Free, or held by whom: a held lock is a run at work (the kernel drops a dead one's)."""
    path = lock_path_for(journal)
    holder = state.holder
    details: dict[str, Any] = {
        "path": str(path),
        "held": state.held,
        "pid": holder.pid if holder else None,
        "host": holder.host if holder else None,
        "started_at": holder.started_at if holder else None,
        "command": holder.command if holder else None,
    }
    if path.exists() and not path.is_file():  # a run opens it to write its name
        return fail("lock", f"{path} is not a regular file: no run can take the lock", **details)
    if not state.held:
        return ok("lock", f"free ({path})", **details)
    who = (
        f"invoicectl {holder.command}, {holder.describe()}"
        if holder
        else "another process (it has not said who yet)"
    )
    return warn("lock", f"held by {who}: a run is at work; another now would exit 6", **details)


def disk_check(journal: Path) -> Check:
    """Free space where the journal is (or will be)."""
    where = journal.parent
    while not where.exists() and where.parent != where:
        where = where.parent
    try:
        usage = shutil.disk_usage(where)
    except OSError as error:
        return fail("disk", f"cannot tell the free space of {where}: {error.strerror}")
    details: dict[str, Any] = {
        "path": str(where),
        "free_bytes": usage.free,
        "total_bytes": usage.total,
    }
    message = f"{_size(usage.free)} free of {_size(usage.total)} at {where}"
    if usage.free < DISK_FAIL_BYTES:
        return fail("disk", f"{message}: too little for the journal's commits", **details)
    if usage.free < DISK_WARN_BYTES:
        return warn("disk", f"{message}: running low", **details)
    return ok("disk", message, **details)


def _size(count: int) -> str:
    """812 B, 96 KB, 1.2 MB, 3.4 GB."""
    size = float(count)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit in ("B", "KB") else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TB"
