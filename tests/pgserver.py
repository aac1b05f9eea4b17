"""A throwaway PostgreSQL server for the tests: a cluster made with ``initdb`` in a temporary
directory, started with ``pg_ctl`` on a free loopback port, stopped and removed at the end.

The server binaries come from the PATH or a Debian-style ``/usr/lib/postgresql/N/bin``.
Where none can be found the tests that need one are skipped, with the reason; CI sets
``INVOICECTL_REQUIRE_POSTGRES=1`` (``.ci/run`` installs the server), and there a missing
server fails instead. ``initdb`` refuses to run as root, so under root the cluster belongs to
the ``postgres`` user and its commands run as that user (``runuser``).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import count
from pathlib import Path

_REQUIRED = "INVOICECTL_REQUIRE_POSTGRES"


def server_binaries() -> Path | None:
    """The directory holding initdb and pg_ctl, or None."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(os.path.realpath(found)).parent
    for directory in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if Path(directory, "initdb").exists() and Path(directory, "pg_ctl").exists():
            return Path(directory)
    return None


def missing_reason() -> str | None:
    """Why no server can be had here, or None when one can."""
    if server_binaries() is None:
        return (
            "no PostgreSQL server binaries (initdb, pg_ctl) on the PATH or in /usr/lib/postgresql"
        )
    if os.geteuid() == 0 and not _has_user("postgres"):
        return "running as root, and initdb refuses root; no 'postgres' user to run it as"
    return None


def required() -> bool:
    return os.environ.get(_REQUIRED) == "1"


def _has_user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Server:
    port: int
    directory: Path
    _names: Iterator[int]

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """The URL of a new, empty database on this server."""
        import psycopg

        name = f"t{next(self._names)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)


def _as_owner(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", "postgres", "--", *command]


@contextmanager
def running_server(*, fsync: bool = False) -> Iterator[Server]:
    """A PostgreSQL server for the length of the block (``fsync``: as a real server syncs
    its commits, for a benchmark; the tests' server does not)."""
    binaries = server_binaries()
    assert binaries is not None, missing_reason()
    directory = Path(tempfile.mkdtemp(prefix="invoicectl-pg-"))
    data = directory / "data"
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")
        os.chown(directory, owner.pw_uid, owner.pw_gid)
    port = free_port()
    log = directory / "server.log"
    try:
        subprocess.run(
            _as_owner(
                [str(binaries / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"]
                + ["-E", "UTF8", "--no-sync", "--no-instructions"]
            ),
            check=True,
            capture_output=True,
        )
        # fsync off: the tests kill clients, never this server, and it runs on a busy disk.
        options = f"-p {port} -k {directory} -c listen_addresses=127.0.0.1 -c max_connections=200"
        if not fsync:
            options += " -c fsync=off -c full_page_writes=off"
        subprocess.run(
            _as_owner([str(binaries / "pg_ctl"), "-D", str(data), "-l", str(log)])
            + ["-o", options, "-w", "-t", "60", "start"],
            check=True,
            capture_output=True,
        )
        yield Server(port, directory, count(1))
    finally:
        subprocess.run(
            _as_owner([str(binaries / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]),
            capture_output=True,
        )
        shutil.rmtree(directory, ignore_errors=True)
