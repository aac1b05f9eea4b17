"""Where the config file is (``config_path``), and its bytes, read with the care a path from
the environment needs (``config_text``); where the journal is when nothing names one
(``default_journal``, and ``default_journal_path``, beside which the sandbox's goes)."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

from invoicectl.errors import ConfigError
from invoicectl.locations import Location, expand_user, is_database_url, journal_location

# A config file is a few hundred bytes; one of a megabyte is something else named by mistake.
_MAX_CONFIG_BYTES = 1024 * 1024


def config_text(path: Path) -> str:
    """The config file's text: a regular file of at most ``_MAX_CONFIG_BYTES``. Opened
    without blocking, so a FIFO is refused rather than waited on, and read no further than
    the cap, so ``/dev/zero`` is refused rather than read forever."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ConfigError(f"the config file {path} is not a regular file")
        with os.fdopen(os.dup(fd), "rb") as stream:
            data = stream.read(_MAX_CONFIG_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > _MAX_CONFIG_BYTES:
        raise ConfigError(
            f"the config file {path} is over {_MAX_CONFIG_BYTES // 1024} KB: not a config file?"
        )
    # A byte-order mark (Windows Notepad writes one) is no TOML statement: read past it.
    return data.decode("utf-8").removeprefix("\ufeff")


def config_path(environ: Mapping[str, str]) -> Path | None:
    """The config file's path; None when nothing names one and there is no home to look in."""
    if explicit := environ.get("INVOICECTL_CONFIG"):
        return expand_user(explicit, "INVOICECTL_CONFIG", ConfigError)
    if configs := environ.get("XDG_CONFIG_HOME"):
        return Path(configs) / "invoicectl" / "config.toml"
    try:
        return home_directory() / ".config" / "invoicectl" / "config.toml"
    except ConfigError:
        return None


def config_label(environ: Mapping[str, str]) -> str:  # the config file, as messages name it
    return str(config_path(environ) or "(none: no home directory to look in)")


def home_directory() -> Path:
    """The home directory; ConfigError when nothing tells it (no HOME, no passwd entry)."""
    try:
        return Path.home()
    except (RuntimeError, KeyError):
        raise ConfigError(
            "cannot tell the home directory (HOME is unset and this user has no passwd entry): "
            "set HOME, or INVOICECTL_JOURNAL (and INVOICECTL_CONFIG for a config file)"
        ) from None


def default_journal(environ: Mapping[str, str] | None = None) -> Location:
    """``$INVOICECTL_JOURNAL`` (a file or a PostgreSQL URL), else the default file."""
    environ = os.environ if environ is None else environ
    explicit = environ.get("INVOICECTL_JOURNAL")
    if explicit and is_database_url(explicit):
        return journal_location(explicit)
    return default_journal_path(environ)


def default_journal_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$INVOICECTL_JOURNAL`` when it names a file, else the user's state directory (XDG on
    Linux). A PostgreSQL URL there is no file: the sandbox's journal, beside this path, was
    made under a directory named by the URL, its password and all."""
    environ = os.environ if environ is None else environ
    explicit = environ.get("INVOICECTL_JOURNAL")
    if explicit and not is_database_url(explicit):
        return expand_user(explicit, "INVOICECTL_JOURNAL", ConfigError)
    state_home = environ.get("XDG_STATE_HOME") or str(home_directory() / ".local" / "state")
    return Path(state_home) / "invoicectl" / "journal.db"
