"""The API keys this process can find, to hide them in the errors it writes.

A key pasted into the wrong setting (``$INVOICECTL_PROFILE``, ``--rate``, a config file's
``base_url``, a profile's ``sender``) comes back in the error that refuses the value.
``hide_keys`` redacts, in any text, every key found where keys are kept, the way a server's
answer is redacted (``ApiKey.redact``): ``$GOROUTE_API_KEY``, ``--api-key-file``, the config
file's ``api_key_file``, and each profile's ``api_key_env`` and ``api_key_file``.

Finding them never fails: the error being written may be about any of those places, so the
config file is read without its checks (``settings.load_config`` refuses a file with an
unknown key, which may be the key itself), and a place that gives no usable key is skipped.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from invoicectl.goroute.apikey import ApiKey


UNCHECKED = "[withheld: it could not be checked for the API key; INVOICECTL_DEBUG=1 shows it]"


def hide_keys(
    text: str, environ: Mapping[str, str] | None = None, api_key_file: str | None = None
) -> str:
    """``text`` with every API key this process can find redacted (``[redacted]``), or
    withheld whole where one hides in it. Never raises: a text it could not check is not
    shown."""
    try:
        for key in set(_found_keys(os.environ if environ is None else environ, api_key_file)):
            text = key.redact(text)
    except Exception:
        return UNCHECKED
    return text


def key_hider(
    environ: Mapping[str, str] | None = None, api_key_file: str | None = None
) -> Callable[[str], str]:
    """``hide_keys`` with the keys looked for once, for a command that hides them in many
    texts (``doctor``'s every message and detail). Never raises, as ``hide_keys``."""
    try:
        keys = set(_found_keys(os.environ if environ is None else environ, api_key_file))
    except Exception:
        return lambda text: UNCHECKED

    def hide(text: str) -> str:
        try:
            for key in keys:
                text = key.redact(text)
        except Exception:
            return UNCHECKED
        return text

    return hide


def _found_keys(environ: Mapping[str, str], api_key_file: str | None) -> Iterator[ApiKey]:
    from invoicectl.goroute.apikey import ENV_VAR, ApiKey

    yield from _usable(ApiKey.from_env, environ, ENV_VAR)
    if api_key_file:
        yield from _usable(_from_file, api_key_file)
    config = _config_as_written(environ)
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


def _config_as_written(environ: Mapping[str, str]) -> Mapping[str, Any]:
    """The config file's tables as parsed, unchecked; empty when there is none to parse."""
    try:
        import tomllib

        from invoicectl.config_file import config_path, config_text

        path = config_path(environ)
        if path is None or not path.is_file():
            return {}
        return tomllib.loads(config_text(path))
    except Exception:  # the command's own error says what is wrong with the file
        return {}
