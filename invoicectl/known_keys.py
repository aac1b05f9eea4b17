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
from collections.abc import Callable, Mapping
from typing import Any

from invoicectl.pasted_keys import UNCHECKED, found_keys, hider

__all__ = ["UNCHECKED", "hide_keys", "hide_keys_in", "key_hider"]


def hide_keys(
    text: str, environ: Mapping[str, str] | None = None, api_key_file: str | None = None
) -> str:
    """``text`` with every API key this process can find redacted (``[redacted]``), or
    withheld whole where one hides in it. Never raises: a text it could not check is not
    shown."""
    return key_hider(environ, api_key_file)(text)


def hide_keys_in(document: Any, hide: Callable[[str], str] | None = None) -> Any:
    """``document`` (JSON's dicts, lists and scalars) with ``hide_keys`` applied to every
    text in it, keys of dicts too: a path a person typed may be a key pasted there."""
    hide = key_hider() if hide is None else hide
    if isinstance(document, str):
        return hide(document)
    if isinstance(document, dict):
        return {hide(str(key)): hide_keys_in(value, hide) for key, value in document.items()}
    if isinstance(document, list):
        return [hide_keys_in(value, hide) for value in document]
    return document


def key_hider(
    environ: Mapping[str, str] | None = None, api_key_file: str | None = None
) -> Callable[[str], str]:
    """``hide_keys`` with the keys looked for once, for a command that hides them in many
    texts (``doctor``'s every message and detail). Never raises, as ``hide_keys``."""
    environ = os.environ if environ is None else environ
    return hider(found_keys(environ, api_key_file, _config_as_written(environ)))


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
