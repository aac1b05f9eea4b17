"""A file the system will not read is that file's answer, never the end of the scan.

design.md, "Bad input": every file gets an answer; no file stops the others. Before, an
``OSError`` met while resolving or reading one file (a directory on its path that cannot be
searched, a link's target too long to name, a failing disk) left the scan: exit 1 blaming
the journal when the files were few, a worker's traceback when a pool read them.
"""

from __future__ import annotations

import errno
import os
import shutil
import socket
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from ublfactory import write_invoice

from invoicectl.journal import Journal
from invoicectl.scan.ingest import scan_directory

DENIED = "cannot read the file: permission denied (check its owner and mode)"


def answers(journal: Journal, outbox: Path, workers: int, recursive: bool = False) -> str:
    """What a scan said: each invalid subject and reason, then the new invoice IDs."""
    report = scan_directory(journal, outbox, recursive=recursive, workers=workers)
    lines = sorted(f"{p.subject}\t{p.reason}" for p in report.invalid)
    return "\n".join([*lines, f"NEW\t{','.join(sorted(report.new))}"])


def unprivileged(work: Callable[[], str]) -> str:
    """``work()``'s answer as a user file modes bind: root reads anything, so as root it
    runs in a forked child that becomes 'nobody' first."""
    if os.geteuid() != 0:
        return work()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            answer = work()
        except BaseException as error:  # noqa: BLE001 - anything goes back to the parent
            answer = f"child failed: {error!r}"
        os.write(write_end, answer.encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        answer = pipe.read().decode()
    os.waitpid(pid, 0)
    return answer


@pytest.fixture
def shared_outbox(tmp_path: Path, outbox: Path) -> Iterator[Path]:
    """An outbox 'nobody' may write in (a test's own tmp_path is root's, mode 0700).

    Nor may 'nobody' read root's Python (/root is 0700): what a scan imports is imported
    first, by a scan here."""
    write_invoice(outbox, "WARM-1")
    with Journal(tmp_path / "warm.db") as journal:
        scan_directory(journal, outbox, workers=2)
    outbox = Path(tempfile.mkdtemp(prefix="invoicectl-unreadable-"))
    outbox.chmod(0o777)
    try:
        yield outbox
    finally:
        for directory, _subdirs, _files in os.walk(outbox):
            os.chmod(directory, 0o755)
        shutil.rmtree(outbox, ignore_errors=True)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_directory_on_the_way_that_cannot_be_searched(shared_outbox: Path, workers: int):
    """A link into a directory of mode 000, and (``--recursive``) a file in a directory
    that can be listed but not searched (``chmod -R 644``): Path.exists() raised EACCES."""
    write_invoice(shared_outbox, "OK-1")
    (shared_outbox / "sub" / "deny").mkdir(parents=True)
    write_invoice(shared_outbox / "sub" / "deny", "HIDDEN-1", name="x.xml")
    (shared_outbox / "via.xml").symlink_to("sub/deny/x.xml")
    (shared_outbox / "rnox").mkdir()
    write_invoice(shared_outbox / "rnox", "R-IN", name="in.xml")
    (shared_outbox / "sub" / "deny").chmod(0)
    (shared_outbox / "rnox").chmod(0o644)

    def scan(recursive: bool) -> str:
        with Journal(shared_outbox / f"journal-{recursive}.db") as journal:
            return answers(journal, shared_outbox, workers, recursive)

    assert unprivileged(lambda: scan(False)) == f"via.xml\t{DENIED}\nNEW\tOK-1"
    recursive = unprivileged(lambda: scan(True))
    assert f"rnox/in.xml\t{DENIED}" in recursive, recursive
    assert f"via.xml\t{DENIED}" in recursive, recursive
    assert recursive.endswith("NEW\tOK-1"), recursive


@pytest.mark.parametrize("workers", [1, 2])
def test_a_broken_link_whose_target_is_too_long_to_name(tmp_path: Path, outbox: Path, workers: int):
    """Resolved under the outbox, the target is over PATH_MAX: ENAMETOOLONG."""
    write_invoice(outbox, "OK-1")
    target = "/".join(["a" * 250] * 16)
    (outbox / "long.xml").symlink_to(target + "/" + "b" * (4094 - len(target) - 1))
    with Journal(tmp_path / "journal.db") as journal:
        assert answers(journal, outbox, workers) == (
            "long.xml\tcannot read the file: File name too long\nNEW\tOK-1"
        )


@pytest.mark.parametrize("call", ["read", "fstat"])
@pytest.mark.parametrize("workers", [1, 2])
def test_a_file_the_disk_fails_to_read(
    tmp_path: Path, outbox: Path, monkeypatch: pytest.MonkeyPatch, workers: int, call: str
):
    """A failing disk or a dropped network mount answers EIO. No file here does, so the
    system call fails for that one file alone; workers are forked and inherit it."""
    write_invoice(outbox, "OK-1")
    write_invoice(outbox, "EIO-1", name="eio.xml")
    real = getattr(os, call)

    def failing(fd: int, *args: int) -> object:
        if os.readlink(f"/proc/self/fd/{fd}").endswith("/eio.xml"):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real(fd, *args)

    monkeypatch.setattr(os, call, failing)
    with Journal(tmp_path / "journal.db") as journal:
        assert answers(journal, outbox, workers) == (
            "eio.xml\tcannot read the file: Input/output error\nNEW\tOK-1"
        )


SOCKET = "a socket, not a file; invoicectl reads regular files only"
FIFO = "a named pipe (FIFO), not a file; invoicectl reads regular files only"
DIRECTORY = "a directory, not a file, although its name ends in .xml"


def unix_socket(path: Path) -> None:
    """A UNIX socket bound at ``path``: it stays there once closed, as a server's would."""
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))


@pytest.mark.parametrize("workers", [1, 2])
def test_a_socket_a_fifo_and_a_locked_directory_named_xml_say_what_they_are(
    shared_outbox: Path, workers: int
):
    """A socket cannot be opened at all (it said "No such device or address"), a FIFO said
    "a pipe, socket or device", and a directory of mode 000 "permission denied": fixing its
    mode only led to "a directory". Each now says what it is, the user or root alike."""
    write_invoice(shared_outbox, "OK-1")
    unix_socket(shared_outbox / "x.xml")
    os.mkfifo(shared_outbox / "y.xml")
    (shared_outbox / "z.xml").mkdir(mode=0)
    (shared_outbox / "to-socket.xml").symlink_to("x.xml")

    def scan(name: str) -> str:
        with Journal(shared_outbox / f"journal-{name}.db") as journal:
            return answers(journal, shared_outbox, workers)

    expected = "\n".join(
        [
            f"to-socket.xml\t{SOCKET}",
            f"x.xml\t{SOCKET}",
            f"y.xml\t{FIFO}",
            f"z.xml\t{DIRECTORY}",
            "NEW\tOK-1",
        ]
    )
    assert unprivileged(lambda: scan("user")) == expected
    assert scan("own") == expected


@pytest.mark.parametrize("workers", [1, 2])
def test_a_recursive_scan_says_the_same_below_and_that_a_locked_directory_cannot_be_listed(
    shared_outbox: Path, workers: int
):
    """A directory named .xml is descended into like any other; one of mode 000 cannot be,
    and says so (it is not an unreadable file)."""
    (shared_outbox / ".xml").mkdir()
    write_invoice(shared_outbox / ".xml", "DEEP-1")
    unix_socket(shared_outbox / ".xml" / "s.xml")
    os.mkfifo(shared_outbox / ".xml" / "f.xml")
    (shared_outbox / "locked.xml").mkdir(mode=0)

    def scan() -> str:
        with Journal(shared_outbox / "journal.db") as journal:
            return answers(journal, shared_outbox, workers, recursive=True)

    assert unprivileged(scan) == "\n".join(
        [
            f".xml/f.xml\t{FIFO}",
            f".xml/s.xml\t{SOCKET}",
            "locked.xml\tcannot list this directory (Permission denied); the invoices in it "
            "were not scanned: fix its permissions",
            "NEW\tDEEP-1",
        ]
    )
