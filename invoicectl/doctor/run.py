"""``diagnose``: every check of ``invoicectl doctor``, in order, as one ``Diagnosis``.

The CLI gives the options and, for ``--sandbox``, the emulator's transport; everything else
is read from the machine. The checks that need an answer from GoRoute are made with a client
of their own, whose every request is bounded (``remote.PROBE_SECONDS``).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import httpx

from invoicectl.doctor.checks import NAMES, Check, Diagnosis, fail, ok, skipped, warn
from invoicectl.doctor.local import (
    api_key_check,
    disk_check,
    journal_check,
    lock_check,
    settings_check,
)
from invoicectl.doctor.remote import PROBE_SECONDS, remote_checks
from invoicectl.environment import bound_to
from invoicectl.errors import InvoicectlError, JournalError
from invoicectl.goroute.apikey import ApiKey
from invoicectl.goroute.client import GoRouteClient
from invoicectl.journal.health import examine
from invoicectl.journal.runlock import lock_path_for, lock_state
from invoicectl.known_keys import key_hider
from invoicectl.locations import JournalURL
from invoicectl.settings import Settings

# Without a key the health check and the clock can still be asked about: the client needs a
# key to send, and this one says what it is.
_NO_KEY = "invoicectl-doctor-without-a-key"


def diagnose(
    *,
    journal: Path | str | None = None,
    sandbox: bool = False,
    api_key_file: Path | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    environ: Mapping[str, str] | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> Diagnosis:
    environ = os.environ if environ is None else environ
    # Every message and detail, once, with each key this process can find hidden (the key of
    # --api-key-file too): a key pasted into a setting doctor shows must not be printed.
    hide = key_hider(environ, None if api_key_file is None else str(api_key_file))
    checks = _checks(journal, sandbox, api_key_file, transport, environ, now)
    return Diagnosis([check.hidden(hide) for check in checks])


def _checks(
    journal: Path | str | None,
    sandbox: bool,
    api_key_file: Path | None,
    transport: httpx.AsyncBaseTransport | None,
    environ: Mapping[str, str],
    now: Callable[[], datetime],
) -> list[Check]:
    config, settings = settings_check(journal, sandbox, environ, api_key_file)
    if settings is None:
        because = "the settings could not be resolved"
        return [config, *(skipped(name, because) for name in NAMES[1:])]
    key_check, key = api_key_check(api_key_file, sandbox, environ)
    checks = {check.name: check for check in (config, key_check)}
    for check in _remote(settings, key, transport, now):
        checks[check.name] = check
    if isinstance(settings.journal, JournalURL):
        checks.update(_database_checks(settings.journal))
    else:
        checks["journal"] = journal_check(
            examine(settings.journal), bound_to(settings.base_url, settings.profile)
        )
        checks["lock"] = _lock(settings.journal)
        checks["disk"] = disk_check(settings.journal)
    return [checks[name] for name in NAMES]


def _database_checks(journal: JournalURL) -> dict[str, Check]:
    """A PostgreSQL journal: reachable, its schema up to date (opening it migrates it, as
    any command's first use does); its locks and disk are the server's."""
    from invoicectl.journal import opened_journal

    server = "kept by the PostgreSQL server"
    try:
        with opened_journal(journal) as opened:
            counts = opened.state_counts()
            offset = cast(Any, opened).clock_offset()
    except InvoicectlError as error:
        failed = fail("journal", str(error))
        return {"journal": failed, "lock": skipped("lock", server), "disk": skipped("disk", server)}
    total = sum(counts.values())
    said = (
        f"{journal}: reachable, schema up to date, {total} invoices; this host's clock is "
        f"{abs(offset):.1f} s {'behind' if offset > 0 else 'ahead of'} the server's"
    )
    # A key's 24-hour window is reckoned from the clock of the host that first used it, with
    # a 10-minute margin; workers on hosts further apart than that could replay a key late.
    checked = warn if abs(offset) > _CLOCK_APART_SECONDS else ok
    return {
        "journal": checked("journal", said + ("; run NTP" if checked is warn else "")),
        "lock": skipped("lock", f"{server} (advisory locks)"),
        "disk": skipped("disk", server),
    }


_CLOCK_APART_SECONDS = 60.0


def _lock(journal: Path) -> Check:
    """The lock check; a lock file that cannot even be opened (its directory is a file, no
    permission) fails this check: it must not end the diagnosis with an error instead."""
    try:
        state = lock_state(journal)
    except OSError as error:
        return fail("lock", f"cannot look at the lock {lock_path_for(journal)}: {error.strerror}")
    except JournalError as error:  # the journal's links loop: no lock can be named
        return fail("lock", str(error))
    return lock_check(state, journal)


def _remote(
    settings: Settings,
    key: ApiKey | None,
    transport: httpx.AsyncBaseTransport | None,
    now: Callable[[], datetime],
) -> list[Check]:
    seconds = min(settings.request_timeout, PROBE_SECONDS)
    try:
        client = GoRouteClient(
            settings.base_url,
            key or ApiKey(_NO_KEY),
            transport=transport,
            connect_timeout=seconds,
            read_timeout=seconds,
            request_timeout=seconds,
            max_connections=1,
            now=now,
        )
    except InvoicectlError as error:  # plain http to a remote host: the key would travel bare
        because = "the base URL cannot be used"
        return [
            fail("base_url", str(error)),
            skipped("credentials", because),
            skipped("clock", because),
        ]
    redact = (key or ApiKey(_NO_KEY)).redact

    async def ask() -> list[Check]:
        async with client:
            return await remote_checks(client, key.fingerprint if key else None, redact, now)

    return asyncio.run(ask())
