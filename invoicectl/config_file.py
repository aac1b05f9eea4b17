"""Where the config file is (``config_path``), and its bytes, read with the care a path from
the environment needs (``config_text``); where the journal is when nothing names one
(``default_journal``, and ``default_journal_path``, beside which the sandbox's goes)."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping
from pathlib import Path

from invoicectl.errors import ConfigError
from invoicectl.locations import Location, expand_user, is_database_url, journal_location
from invoicectl.text import one_line

# A config file is a few hundred bytes; one of a megabyte is something else named by mistake.
_MAX_CONFIG_BYTES = 1024 * 1024


def config_text(path: Path) -> str:
    """The config file's text: a regular file of at most ``_MAX_CONFIG_BYTES``. Opened
    without blocking, so a FIFO is refused rather than waited on, and read no further than
    the cap, so ``/dev/zero`` is refused rather than read forever."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"the config file {path} is not a regular file")
        _warn_if_others_can_write(path, info)
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


# The config files already warned about in this process: once a run, however often it is read.
_WARNED: set[Path] = set()
# Where a warning goes (``warn_with``), and those found before anyone said where.
_SINK: list[Callable[[str], None]] = []
_PENDING: list[str] = []


def warn_with(say: Callable[[str], None]) -> None:
    """Say this module's warnings with ``say`` from now on, those already found first: the
    CLI's, once its log lines are in place (the config file is first read to learn their
    format). Until then, and for a library caller, they wait: this module never prints."""
    _SINK[:] = [say]
    while _PENDING:
        say(_PENDING.pop(0))


def _warn_if_others_can_write(path: Path, info: os.stat_result) -> None:
    """One line on stderr, once a run, when someone other than its owner can change the
    config file, or the directory holding it (and so replace it): it says where invoices go,
    with which key, and into which journal, so whoever can write it can redirect sends. A
    warning, not a refusal: nothing is refused for being read by others either (the key file
    is, ``apikey``). A group that is the owner's alone (a user private group: umask 002)
    counts as the owner."""
    if os.name == "nt" or path in _WARNED:
        return
    _WARNED.add(path)
    shown = one_line(str(path))  # a file name may hold a line break
    places = [(f"the config file {shown}", shown, info)]
    try:
        held = os.stat(path.parent)
    except OSError:
        held = None
    if held is not None and not held.st_mode & stat.S_ISVTX:  # sticky (/tmp): not replaced
        folder = one_line(str(path.parent))
        places.append((f"the directory {folder} holding the config file", folder, held))
    for what, place, facts in places:
        if (writers := _other_writers(facts)) is not None:
            line = (
                f"invoicectl: warning: {what} is writable by {writers} (mode "
                f"{stat.S_IMODE(facts.st_mode):04o}): whoever can change it can redirect "
                f"sends; run chmod go-w {place}"
            )
            if _SINK:
                _SINK[0](line)
            else:
                _PENDING.append(line)
            return


def _other_writers(info: os.stat_result) -> str | None:
    """Who, besides the owner, may write what ``info`` describes: "others", "its group"
    (named), or None."""
    if info.st_mode & stat.S_IWOTH:
        return "others"
    if not info.st_mode & stat.S_IWGRP or _private_group(info):
        return None
    import grp

    try:
        return f"its group {grp.getgrgid(info.st_gid).gr_name}"
    except KeyError:
        return f"its group {info.st_gid}"


def _private_group(info: os.stat_result) -> bool:
    """Whether the group is its owner's alone: the owner's primary group, named as the owner,
    with no other member."""
    import grp
    import pwd

    try:
        owner, group = pwd.getpwuid(info.st_uid), grp.getgrgid(info.st_gid)
    except KeyError:
        return False
    return (
        owner.pw_gid == info.st_gid
        and group.gr_name == owner.pw_name
        and set(group.gr_mem) <= {owner.pw_name}
    )


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
