"""The config file's bytes, read with the care a path from the environment needs."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from invoicectl.errors import ConfigError

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
    return data.decode("utf-8")
