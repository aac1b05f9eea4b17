"""Where a journal lives: a SQLite file (a ``Path``) or a PostgreSQL database (``JournalURL``).

Settings read ``journal`` (option, environment, config, profile) through ``journal_location``;
a value starting ``postgresql://`` or ``postgres://`` is a database, anything else a path.
A ``JournalURL`` prints without its password (the URL's, or a ``password=`` parameter), so
no message, report, run record or repr can carry one; psycopg gets the whole URL, and libpq
reads the usual ``PG*`` variables and ``~/.pgpass`` for whatever it leaves out. Imports
nothing heavy: every command resolves its settings.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

from invoicectl.errors import ConfigError, InvoicectlError, UsageError

_SCHEMES = ("postgresql://", "postgres://")
_PASSWORD_PARAMETER = re.compile(r"(?i)(password=)[^&]*")


class JournalURL:
    """A PostgreSQL journal's connection URL; ``str()`` and ``repr()`` never show a password."""

    __slots__ = ("_url",)

    def __init__(self, url: str) -> None:
        self._url = url

    def connection_url(self) -> str:
        """The whole URL, password included: for psycopg only, never for a message."""
        return self._url

    def __str__(self) -> str:
        return redacted(self._url)

    def without_secrets(self, text: str) -> str:
        """``text`` (a message of libpq's about this URL) with every password of the URL
        masked, as written and as decoded: libpq quotes a token it cannot parse, and a
        password with a bare ``%`` or a space is such a token."""
        for secret in sorted(_secrets(self._url), key=len, reverse=True):
            text = text.replace(secret, "***")
        return text

    def __repr__(self) -> str:
        return f"JournalURL({redacted(self._url)!r})"

    def without_password(self) -> str:
        """The URL with no password at all, for a command to run again: libpq takes it from
        ``PGPASSWORD`` or ``~/.pgpass`` then."""
        return redacted(self._url, mask="")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JournalURL) and other._url == self._url

    def __hash__(self) -> int:
        return hash(self._url)


Location = Path | JournalURL


def is_database_url(text: str) -> bool:
    return text.strip().lower().startswith(_SCHEMES)


def journal_location(text: str | Location, source: str = "option") -> Location:
    """``text`` as a journal's location: a PostgreSQL URL, or a path (``~`` expanded), given
    by ``source`` (a setting's source: "option", "$INVOICECTL_JOURNAL", "config file ...")."""
    if isinstance(text, (Path, JournalURL)):
        return text
    if is_database_url(text):
        return JournalURL(text.strip())
    return expand_user(text, *setting_named("journal", source))


def setting_named(name: str, source: str) -> tuple[str, type[InvoicectlError]]:
    """How a path's error names the setting ``name`` given by ``source``, and the error's
    kind: a usage error for an option, a configuration error (exit 1) for the rest."""
    if source in ("option", "default"):
        return f"the {name.replace('_', ' ')}", UsageError
    return f"{name} ({source})", ConfigError


def expand_user(
    path: str | Path,
    named: str,
    error: type[InvoicectlError] = UsageError,
    *,
    shown: bool = True,
) -> Path:
    """``path`` with a leading ``~`` or ``~user`` expanded; ``error``, one line saying what
    ``named`` it, when no user here has that name or a home directory (``expanduser``
    raises). ``shown=False``: the line names the setting alone, never the path (an API key
    file's setting may hold the key itself, typed in the wrong place)."""
    try:
        return Path(path).expanduser()
    except RuntimeError:
        user = str(path).split("/", 1)[0]
        what = f"{named} {str(path)!r} begins with {user}" if shown else f"{named} begins with ~"
        raise error(
            f"{what}, and no user here has that name or a home directory to expand it to: "
            "give the path in full"
        ) from None


def _secrets(url: str) -> set[str]:
    """Every password ``url`` holds (the userinfo's, ``password=`` parameters), raw and
    percent-decoded."""
    from urllib.parse import unquote

    found: set[str] = set()
    head = url.split("?", 1)[0].split("/", 3)
    netloc = head[2] if len(head) > 2 else ""
    if "@" in netloc and ":" in (userinfo := netloc.rpartition("@")[0]):
        found.add(userinfo.split(":", 1)[1])
    query = url.split("?", 1)[1] if "?" in url else ""
    found.update(match.group(2) for match in re.finditer(r"(?i)(password=)([^&]*)", query))
    found |= {unquote(secret) for secret in found}
    return {secret for secret in found if secret}


def redacted(url: str, mask: str = "***") -> str:
    """``url`` without any password: ``postgresql://user:***@host/db``; with ``mask`` "",
    no trace of one (``postgresql://user@host/db``), a URL libpq completes from
    ``PGPASSWORD`` or ``~/.pgpass``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "postgresql://(unreadable URL)"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:{mask}@{hostport}" if ":" in userinfo and mask else f"{user}@{hostport}"
    query = _PASSWORD_PARAMETER.sub(rf"\g<1>{mask}", parts.query)
    if not mask:
        query = "&".join(part for part in query.split("&") if part.lower() != "password=")
    # Spelt out: urlunsplit drops the "//" of a URL with no host (postgresql:///db?host=...).
    return (
        f"{parts.scheme}://{netloc}{parts.path}"
        + (f"?{query}" if query else "")
        + (f"#{parts.fragment}" if parts.fragment else "")
    )


def sqlite_file(location: Location, command: str, instead: str) -> Path:
    """``location`` for a command that reads the SQLite file itself; for a PostgreSQL
    journal a ``UsageError`` saying what to do instead (exit 2, nothing done)."""
    if isinstance(location, Path):
        return location
    from invoicectl.errors import UsageError

    raise UsageError(f"{command} works on a SQLite journal, not {location}: {instead}")
