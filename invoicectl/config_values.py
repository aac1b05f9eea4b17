"""Every setting's value checked once, whatever its source, before anything changes.

A value reaches ``settings.resolve`` from an option (already typed by the CLI), an environment
variable (always text) or the TOML config file (any TOML type: ``rate = "fast"``, ``true``,
``1.5``, ``inf``, ``[1]``). Each check here turns one value into the type the run needs or
raises one line naming the setting, where the value came from and what is allowed:

    rate (config file /etc/invoicectl.toml) must be a whole number from 1 to 100000
    (requests per minute), not 'fast'

A bad value from the command line is a usage error (exit 2, like the CLI's own checks); from
the environment or the config file it is a configuration error (exit 1).
"""

from __future__ import annotations

import math
import re
from typing import Any, NamedTuple
from urllib.parse import urlsplit, urlunsplit

from invoicectl.defaults import WHOLE_SETTINGS
from invoicectl.errors import ConfigError, InvoicectlError, UsageError
from invoicectl.locations import is_database_url, redacted
from invoicectl.text import CONTROL, decimal, not_ascii_digits


class Seconds(NamedTuple):
    low: float
    high: float


SECONDS_SETTINGS = {
    "max_wait": Seconds(0.0, 86_400.0),
    "deadline": Seconds(0.0, 31 * 86_400.0),
    "request_timeout": Seconds(0.1, 3_600.0),
}
# A DNS name, an IPv4 address or an IPv6 literal (urlsplit drops the brackets); anything else
# in the host ("exa mple", "exa%41mple") can only be a typo.
_HOST = re.compile(r"[a-z0-9._-]+|[0-9a-f:.]+", re.ASCII | re.IGNORECASE)
# A bad value is quoted in the message, up to this length.
_MAX_SHOWN = 60


def refusal(
    name: str, source: str, must: str, value: Any, why: str | None = None
) -> InvoicectlError:
    """The one line for a bad value, and ``why`` after it; from the command line a usage
    error, else configuration."""
    shown = repr(value)
    if isinstance(value, str) and is_database_url(value):
        # Without its password (a CRLF env file's journal URL, say); what it holds, named.
        held = sorted({f"U+{ord(char):04X}" for char in CONTROL.findall(value)})
        shown = repr(redacted(value)) + (f" (holding {', '.join(held)})" if held else "")
    if len(shown) > _MAX_SHOWN:
        shown = shown[:_MAX_SHOWN] + "…"
    error_type = UsageError if source == "option" else ConfigError
    where = "the command line" if source == "option" else source
    return error_type(f"{name} ({where}) must be {must}, not {shown}{f': {why}' if why else ''}")


def specificity(source: str) -> int:
    """How specific a setting's source is (``settings.resolve``'s labels): the command line
    over the environment over a profile over the config file's top level over the default."""
    order = ("option", "$", "profile", "config file")
    return next(
        (len(order) - rank for rank, kind in enumerate(order) if source.startswith(kind)), 0
    )


def whole(name: str, value: Any, source: str) -> int:
    """An integer setting in its range; text from the environment is read as decimal."""
    low, high, unit = WHOLE_SETTINGS[name]
    must = f"a whole number from {low} to {high} ({unit})"
    number = _whole_number(value)
    if number is None or not low <= number <= high:
        raise refusal(name, source, must, value, _foreign_digits(value))
    return number


def seconds(name: str, value: Any, source: str) -> float:
    """A finite duration in seconds, in its range (no ``nan``, ``inf`` or negatives)."""
    low, high = SECONDS_SETTINGS[name]
    must = f"a number of seconds from {low:,.10g} to {high:,.10g}"  # 2,678,400, not 2.6784e+06
    number = _number(value)
    if number is None or not math.isfinite(number) or not low <= number <= high:
        raise refusal(name, source, must, value, _foreign_digits(value))
    return number


def text(name: str, value: Any, source: str) -> str:
    """A non-empty string (a path, a name) on one line: no control character, no line or
    paragraph separator (a file name's undecodable bytes, as surrogates, are fine)."""
    if not isinstance(value, str) or not value.strip() or CONTROL.search(value):
        raise refusal(name, source, "a non-empty text without control characters", value)
    return value


LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


def refuse_plain_http(url: str) -> None:
    """ConfigError for a normalised base URL that is plain http to a host other than this
    machine: the API key would cross the network in clear text."""
    parts = urlsplit(url)
    if parts.scheme == "http" and (parts.hostname or "") not in LOOPBACK_HOSTS:
        raise ConfigError(
            f"base URL {url!r} is plain http to a remote host; the API key would be sent "
            "unencrypted. Use https://"
        )


def base_url(value: Any, source: str) -> str:
    """The base URL, normalised: scheme and host lower-cased, the default port and trailing
    slashes dropped, so one environment has one spelling (and one journal binding).

    Refused: no http(s) scheme or no host, a port outside 1-65535, credentials in the URL
    (they would be stored in the journal and printed), a query string or fragment (the API's
    paths are appended to the base URL), white space.
    """
    raw = text("base_url", value, source)
    must = "an http(s) URL with a host, such as https://app.goroute.ai/peppol-api"
    if any(char.isspace() for char in raw.strip()):
        raise refusal("base_url", source, must, value)
    try:
        parts = urlsplit(raw.strip())
        port = parts.port
    except ValueError:
        raise refusal("base_url", source, must + " and a port from 1 to 65535", value) from None
    if parts.scheme.lower() not in ("http", "https") or not _HOST.fullmatch(parts.hostname or ""):
        raise refusal("base_url", source, must, value)
    if parts.username is not None or parts.password is not None:
        # The credentials are not shown either: they are a secret.
        error_type = UsageError if source == "option" else ConfigError
        raise error_type(
            f"base_url ({source}) must not carry a user name or password (user:password@): "
            "they would be stored in the journal and printed; GoRoute takes the API key only"
        )
    if parts.query or parts.fragment or raw.strip().endswith(("?", "#")):
        raise refusal("base_url", source, must + ", without a query string or fragment", value)
    if port == 0:
        raise refusal("base_url", source, must + " and a port from 1 to 65535", value)
    scheme = parts.scheme.lower()
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    default_port = {"http": 80, "https": 443}[scheme]
    netloc = host if port in (None, default_port) else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path.rstrip("/"), "", ""))


def ping_url(value: Any, source: str) -> str:
    """A health-check URL (http or https, with a host), its path's trailing slashes dropped so
    that ``/start`` and ``/0`` append cleanly (``pings.ping``, ahead of a query string). It
    is a secret (whoever holds it can report the job healthy), so a refusal never quotes it:
    it says "the ping URL"."""
    error_type = UsageError if source == "option" else ConfigError
    where = "the command line" if source == "option" else source
    unshown = "(the value is not shown: it is a secret)"
    refused = error_type(f"ping_url ({where}) must be an http(s) URL with a host {unshown}")
    if not isinstance(value, str) or not value.strip() or any(c.isspace() for c in value.strip()):
        raise refused
    raw = value.strip()
    try:
        parts = urlsplit(raw)
    except ValueError:  # an IPv6 literal's bracket left open
        raise refused from None
    try:
        port = parts.port
    except ValueError:  # not a number (nor digits 0-9), or past 65535
        port = 0
    if port == 0:  # port 0 reaches no server: every ping would fail, run after run
        raise error_type(
            f"ping_url ({where}) must be an http(s) URL with a host and a port from 1 to 65535 "
            + unshown
        )
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise refused
    if parts.fragment or raw.endswith("#"):  # never sent: a paste of the page's address?
        raise error_type(f"ping_url ({where}) must have no fragment (#...) {unshown}")
    # /start and the exit code go on its path, ahead of a query (healthchecks.io's ?create=1)
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), parts.query, ""))


def _foreign_digits(value: Any) -> str | None:
    return not_ascii_digits(value) if isinstance(value, str) else None


def _whole_number(value: Any) -> int | None:
    if isinstance(value, bool):  # TOML true is not 1
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and decimal(value.strip()) and len(value.strip()) <= 12:
        return int(value.strip())
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str) and not _foreign_digits(value):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None
