"""The GoRoute API key: the one secret invoicectl holds, and the only place it is readable.

``ApiKey`` wraps the key so that nothing which prints, logs, formats, pickles or copies an
object can leak it by accident: ``repr``/``str`` show a fingerprint (12 hex characters of the
key's SHA-256, safe to log and to store in the journal's audit trail), pickling is refused, and
the text is handed out only by an explicit ``reveal()`` at the moment a request is signed.

Loading: ``ApiKey.from_env`` (``GOROUTE_API_KEY``) or ``ApiKey.from_file`` (a file only its
owner may read, mode 0600 or stricter). Every failure is a ``ConfigError`` whose message names
the source and never contains any character of the key.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import stat
from collections.abc import Mapping
from typing import Any, NoReturn

from invoicectl.errors import ConfigError
from invoicectl.goroute import redaction

ENV_VAR = "GOROUTE_API_KEY"

# Far above any real API key; stops a mistyped path (a log, a PDF) from being read whole, and
# a variable holding something else (a file's content) from being taken for a key: the
# redaction's pattern grows with the key (20 KB took seconds and hundreds of MB to build).
_MAX_KEY_BYTES = 4096


class ApiKey:
    """An API key whose text never shows up in a repr, a log line or a pickle."""

    __slots__ = ("_secret", "_fingerprint", "_forms")

    _secret: str
    _fingerprint: str
    # Spells the key out: never handed out either. Compiled at the first redaction (a few
    # ms of every command's start otherwise, and a run that gets no answer needs none).
    _forms: redaction.KeyForms | None

    def __init__(self, secret: str) -> None:
        secret = secret.strip()
        _check_secret(secret)
        object.__setattr__(self, "_secret", secret)
        object.__setattr__(self, "_fingerprint", _fingerprint_of(secret))
        object.__setattr__(self, "_forms", None)

    @classmethod
    def from_env(cls, environ: Mapping[str, str], name: str = ENV_VAR) -> ApiKey:
        """The key from ``environ[name]``; ConfigError when it is unset or blank."""
        value = environ.get(name, "")
        if not value.strip():
            raise ConfigError(
                f"{name} is {'only white space' if value else 'not set'}: export the GoRoute "
                f"API key in {name} or pass --api-key-file PATH (a file with mode 0600)"
            )
        if len(value.encode("utf-8", "surrogateescape")) > _MAX_KEY_BYTES:
            raise ConfigError(
                f"{name} is too large to hold an API key (over {_MAX_KEY_BYTES} bytes); "
                "check it holds the key and nothing else"
            )
        try:
            return cls(value)
        except ConfigError as exc:
            raise ConfigError(f"{name}: {exc}") from None

    @classmethod
    def from_file(
        cls, path: str | os.PathLike[str], named_by: str = "the API key file setting"
    ) -> ApiKey:
        """The key from a file only its owner can read; the trailing newline is dropped.

        ``named_by`` says where the path came from (``--api-key-file``): until the file is
        known to exist, errors name that, never the path, which may be the key typed in the
        wrong place.
        """
        text = _read_private_file(os.fspath(path), named_by)
        lines = text.strip().splitlines()
        if len(lines) != 1:
            raise ConfigError(
                f"API key file {os.fspath(path)} must hold the key on one line "
                f"(found {len(lines)} non-blank lines)"
            )
        try:
            return cls(lines[0])
        except ConfigError as exc:
            raise ConfigError(f"API key file {os.fspath(path)}: {exc}") from None

    def reveal(self) -> str:
        """The key itself. Call it only where a request header is built."""
        return self._secret

    def redact(self, text: str) -> str:
        """``text`` with every echo of the key, plain or encoded, replaced by a marker
        (``redaction``: JSON escapes, percent-encoding, HTML references, mixed)."""
        forms = self._forms
        if forms is None:
            forms = redaction.KeyForms(self._secret)
            object.__setattr__(self, "_forms", forms)
        return redaction.redact(text, forms)

    @property
    def fingerprint(self) -> str:
        """First 12 hex characters of the key's SHA-256: identifies the key, reveals nothing."""
        return self._fingerprint

    def __repr__(self) -> str:
        return f"ApiKey(fingerprint='{self._fingerprint}')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ApiKey):
            return NotImplemented
        # Constant-time, so equality checks cannot be used as a timing oracle.
        return hmac.compare_digest(self._secret.encode(), other._secret.encode())

    def __hash__(self) -> int:
        return hash(self._fingerprint)

    def __setattr__(self, name: str, value: Any) -> NoReturn:
        raise AttributeError("ApiKey is immutable")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError("ApiKey is immutable")

    # pickle, copy and multiprocessing all go through __reduce_ex__; refusing it keeps the key
    # out of any byte stream. copy/deepcopy are served directly since the object is immutable.
    def __reduce_ex__(self, protocol: object) -> NoReturn:
        raise TypeError("ApiKey cannot be pickled: the key must not be written anywhere")

    def __reduce__(self) -> NoReturn:
        raise TypeError("ApiKey cannot be pickled: the key must not be written anywhere")

    def __getstate__(self) -> NoReturn:
        raise TypeError("ApiKey cannot be pickled: the key must not be written anywhere")

    def __copy__(self) -> ApiKey:
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> ApiKey:
        return self


def _fingerprint_of(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()[:12]


def _check_secret(secret: str) -> None:
    """Refuse keys that could not travel in an HTTP header; messages never quote the key."""
    if not secret:
        raise ConfigError("the API key is empty")
    # Visible ASCII only: a control character would corrupt the header (or inject one), and
    # non-ASCII text is almost always a copy-paste accident (smart quotes, a BOM).
    if not all("\x21" <= char <= "\x7e" for char in secret):
        raise ConfigError(
            "the API key contains spaces, control or non-ASCII characters; "
            "check it was copied exactly"
        )


def _read_private_file(path: str, named_by: str) -> str:
    """The text of ``path``, once the open file is known to be readable by its owner only."""
    unshown = "(the value is not repeated here, in case it is the key itself)"
    try:
        # O_NONBLOCK: a FIFO named by mistake must be refused below, not hang the open.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise ConfigError(
            f"the API key file given by {named_by} does not exist {unshown}; give the path "
            "of a file holding the key, or set GOROUTE_API_KEY"
        ) from None
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or "not a usable path"
        raise ConfigError(
            f"cannot open the API key file given by {named_by}: {reason} {unshown}"
        ) from None
    # fstat on the descriptor, not stat on the path: the file checked is the file read.
    try:
        _check_private(path, os.fstat(fd))
        data = os.read(fd, _MAX_KEY_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read API key file {path}: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > _MAX_KEY_BYTES:
        raise ConfigError(f"API key file {path} is too large to hold an API key")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"API key file {path} is not UTF-8 text") from None


def _check_private(path: str, info: os.stat_result) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"API key file {path} is not a regular file")
    # Windows has no POSIX permission bits worth checking; there the ACLs are the user's job.
    if os.name == "nt":
        return
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        raise ConfigError(
            f"API key file {path} is accessible by group or others (mode {mode:04o}); "
            f"it must be 0600 or stricter: run chmod 600 {path}"
        )
