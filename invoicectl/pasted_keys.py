"""The API keys found where keys are kept, and the settings refused for holding one.

``known_keys`` hides those keys in any text; this module finds them in a config file already
read (``found_keys``) and refuses, as ``settings.resolve`` ends, a setting that would carry a
key into ordinary output, the outbox's marker or the journal (``refuse_pasted``). It reads
no config file itself, so that ``settings`` can use it (``config_file`` is above it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from invoicectl.goroute.apikey import ApiKey
    from invoicectl.locations import Location


UNCHECKED = "[withheld: it could not be checked for the API key; INVOICECTL_DEBUG=1 shows it]"


class Resolved(Protocol):
    """What ``refuse_pasted`` looks at of ``settings.Settings`` (not imported: it imports
    this module)."""

    @property
    def profile(self) -> str | None: ...
    @property
    def base_url(self) -> str: ...
    @property
    def journal(self) -> Location: ...
    @property
    def sources(self) -> Mapping[str, str]: ...


def refuse_pasted(
    settings: Resolved,
    api_key_file: Path | str | None,
    environ: Mapping[str, str],
    config: Mapping[str, Any],
    in_config: str,
) -> None:
    """Refuse settings whose profile name, base URL or journal holds a key found in
    ``environ``, ``api_key_file`` or ``config`` (its ``api_key_file``, each profile's
    ``api_key_env`` and ``api_key_file``): accepted, such a value would be printed in ordinary
    lines, written in the outbox's marker and bound in the journal. One line naming the
    setting and where it came from, never the value: exit 2 from the command line, else 1."""
    from invoicectl.errors import ConfigError, UsageError
    from invoicectl.locations import JournalURL

    secrets = _pastable(
        found_keys(environ, None if api_key_file is None else str(api_key_file), config)
    )
    journal = settings.journal
    values = {
        "profile": settings.profile or "",
        "base_url": settings.base_url,
        "journal": journal.connection_url() if isinstance(journal, JournalURL) else str(journal),
    }
    for name, value in values.items():
        if name != "profile" and settings.sources.get(name) == "default":
            continue  # nobody gave it: a default holds no key
        if not any(_holds(value, secret) for secret in secrets):
            continue
        if name == "profile":  # a profile of the config file (another is unknown): a bad one
            raise ConfigError(
                f"the name of a profile ({in_config}) holds an API key (not repeated "
                "here): a key goes only in $GOROUTE_API_KEY or a key file; rename the profile"
            )
        source = settings.sources.get(name, "")
        where = {"option": f"--{name}", "config file": in_config}.get(source, source)
        raise (UsageError if source == "option" else ConfigError)(
            f"{name} ({where}) holds an API key (not repeated here): a key goes only in "
            f"$GOROUTE_API_KEY or a key file (--api-key-file); give the {name} without it"
        )


# A key shorter than this, or the emulator's published key, is no secret a setting could
# carry by mistake: a word or a number (a placeholder "App", a key "1") that any path or
# URL may hold. Longer keys are refused only whole, as typed or percent-encoded: a run of a
# key's characters (a journal under ~/invoicectl_sandbox/ beside the sandbox's key,
# "sk_test_invoicectl_sandbox") is no key.
_SHORTEST_PASTED = 12


def _pastable(keys: Iterable[ApiKey]) -> list[str]:
    from invoicectl.defaults import SANDBOX_API_KEY

    try:
        secrets = {key.reveal() for key in keys}
    except Exception:  # a key that could not be read is that place's own error
        return []
    return [s for s in secrets if len(s) >= _SHORTEST_PASTED and s != SANDBOX_API_KEY]


def _holds(value: str, secret: str) -> bool:
    from urllib.parse import unquote

    return secret in value or secret in unquote(value)


def hider(keys: Iterable[ApiKey]) -> Callable[[str], str]:
    """A text with each of ``keys`` redacted (``[redacted]``), or ``UNCHECKED`` where one
    could not be looked for. Never raises."""
    try:
        found = set(keys)
    except Exception:
        return lambda text: UNCHECKED

    def hide(text: str) -> str:
        try:
            for key in found:
                text = key.redact(text)
        except Exception:
            return UNCHECKED
        return text

    return hide


def found_keys(
    environ: Mapping[str, str], api_key_file: str | None, config: Mapping[str, Any]
) -> Iterator[ApiKey]:
    """Each usable key of ``$GOROUTE_API_KEY``, ``api_key_file`` and ``config`` (the config
    file's tables as parsed); a place that gives no usable key is skipped."""
    from invoicectl.goroute.apikey import ENV_VAR, ApiKey

    yield from _usable(ApiKey.from_env, environ, ENV_VAR)
    if api_key_file:
        yield from _usable(_from_file, api_key_file)
    tables = config.get("profiles")
    profiles = list(tables.values()) if isinstance(tables, Mapping) else []
    for table in (config, *profiles):
        if not isinstance(table, Mapping):
            continue
        name, path = table.get("api_key_env"), table.get("api_key_file")
        if isinstance(name, str):
            yield from _usable(ApiKey.from_env, environ, name)
        if isinstance(path, str):
            yield from _usable(_from_file, path)


def _from_file(path: str) -> ApiKey:
    """The key in the file at ``path`` (``~`` expanded); an error when there is none."""
    from invoicectl.goroute.apikey import ApiKey

    return ApiKey.from_file(Path(path).expanduser())


def _usable(load: Callable[..., ApiKey], *where: Any) -> Iterator[ApiKey]:
    """The key ``load(*where)`` gives, if it gives one."""
    try:
        yield load(*where)
    except Exception:  # no key there: that place's own error says why
        return
