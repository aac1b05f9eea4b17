"""Reading a file's bytes: whether a path may be read at all, then reading it.

Only a regular file inside the scanned directory, not empty and not over twice the API's 15 MB
limit, is read; links are followed only inside that directory. The limit itself applies to the
document as sent, in UTF-8 (``ubl.facts``): a UTF-16 file is about twice that size on disk.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from invoicectl.text import one_line
from invoicectl.ubl.errors import InvalidDocument

MAX_DOCUMENT_BYTES = 15 * 1024 * 1024
# A file this large is over the limit in any encoding: UTF-8 takes at least half the bytes of
# UTF-16 for the same characters.
MAX_FILE_BYTES = 2 * MAX_DOCUMENT_BYTES
_GONE = "the file no longer exists (moved or deleted during the scan)"

# O_NOFOLLOW: a path is opened only once resolved (or known to sit right in the scanned
# directory), so a link met here was swapped in after the check. O_NONBLOCK: opening a named
# pipe must not hang the scan.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


def read_document(path: str | Path, root: str | Path) -> bytes:
    """The bytes of ``path``, a file inside ``root``; InvalidDocument for anything else.

    Symbolic links are followed only when they resolve inside ``root``, and nothing outside
    it is ever opened or stat'ed. Size is checked on the open file before reading it. (Paths
    may be strings: a scan reads thousands of files, and Path objects cost more to build
    than a small invoice takes to read.)
    """
    try:
        size, data = _read_checked(path, root)
    except OSError as exc:
        # Anything the system refuses on the way (a directory that cannot be searched, a
        # link's target too long to name, a failing disk or mount) is this file's answer:
        # no file stops the others.
        raise InvalidDocument(_cannot_read(exc)) from None
    # The file may have changed between fstat and read; judge what was actually read.
    if len(data) > MAX_FILE_BYTES:
        raise InvalidDocument(_too_large(max(size, len(data))))
    if not data:
        raise InvalidDocument("the file is empty (0 bytes)")
    return data


def _read_checked(path: str | Path, root: str | Path) -> tuple[int, bytes]:
    """The size ``fstat`` gave and the bytes read (``read_document``)."""
    fd = _open_plain_file_in(os.fspath(path), os.fspath(root))
    if fd is None:
        fd = _open_regular(_resolve_inside(Path(path), Path(root)))
        _check_still_inside(fd, root)
    try:
        size = _checked_size(os.fstat(fd))
        return size, _read_at_most(fd, MAX_FILE_BYTES + 1, size)
    finally:
        os.close(fd)


def _open_plain_file_in(path: str, root: str) -> int | None:
    """``path`` opened as is when it sits right in ``root`` and is no symbolic link.

    The common case, and resolving costs more than reading a small invoice. Anything else,
    an error included, takes the careful way, which gives every other case its reason.
    """
    if os.path.dirname(path) != root:
        return None
    try:
        return os.open(path, _OPEN_FLAGS)
    except OSError:
        return None


def _resolve_inside(path: Path, root: Path) -> Path:
    try:
        real_root = root.resolve()
        real = path.resolve()
    except (OSError, RuntimeError):
        raise InvalidDocument("a symbolic link that loops back on itself") from None
    if not real.is_relative_to(real_root):
        raise InvalidDocument(
            f"a symbolic link to {one_line(str(real))}, outside the scanned directory "
            f"{one_line(str(real_root))}; "
            "links are followed only inside it"
        )
    if not real.exists():
        if path.is_symlink():
            raise InvalidDocument(
                f"a broken symbolic link: its target {one_line(os.readlink(path))} does not exist"
            )
        raise InvalidDocument(_GONE)
    return real


def _check_still_inside(fd: int, root: str | Path) -> None:
    """A directory on the way may have been swapped for a link between resolving and
    opening: judge the file actually opened (Linux: /proc/self/fd)."""
    try:
        opened = Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return  # no /proc: nothing more to check
    if not opened.is_relative_to(Path(root).resolve()):
        os.close(fd)
        raise InvalidDocument(
            "a directory on the file's path was replaced by a link out of the scanned "
            "directory during the scan; scan again"
        )


def _open_regular(real: Path) -> int:
    try:
        return os.open(real, _OPEN_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # O_NOFOLLOW met a link that was not there when checked
            raise InvalidDocument(
                "the file was replaced by a symbolic link during the scan; scan again"
            ) from None
        # A socket cannot be opened at all ("No such device or address"), nor a directory of
        # mode 000 ("permission denied", though its mode is not what is wrong): say what it is.
        kind = _what_it_is(real)
        if kind is not None:
            raise InvalidDocument(kind) from None
        raise


def _cannot_read(exc: OSError) -> str:
    if isinstance(exc, PermissionError):
        return "cannot read the file: permission denied (check its owner and mode)"
    if isinstance(exc, FileNotFoundError):
        return _GONE
    detail = exc.strerror or (os.strerror(exc.errno) if exc.errno else "refused by the system")
    return f"cannot read the file: {one_line(detail)}"


_NOT_FILES = {
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


def _not_a_file(mode: int) -> str | None:
    """What is there instead of a regular file, as a reason; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory, not a file, although its name ends in .xml"
    kind = _NOT_FILES.get(stat.S_IFMT(mode))
    what = f"{kind}, not a file" if kind else "not a regular file"
    return f"{what}; invoicectl reads regular files only"


def _what_it_is(real: Path) -> str | None:
    """``_not_a_file`` of what ``real`` (resolved inside the scanned directory) names; None
    when it is a regular file or cannot be looked at either."""
    try:
        return _not_a_file(os.stat(real).st_mode)
    except OSError:
        return None


def _checked_size(st: os.stat_result) -> int:
    kind = _not_a_file(st.st_mode)
    if kind is not None:
        raise InvalidDocument(kind)
    if st.st_size > MAX_FILE_BYTES:
        raise InvalidDocument(_too_large(st.st_size))
    if st.st_size == 0:
        raise InvalidDocument("the file is empty (0 bytes)")
    return st.st_size


def _read_at_most(fd: int, limit: int, expected: int) -> bytes:
    """Up to ``limit`` bytes of ``fd``, whatever ``fstat`` said. The first read asks for
    the ``expected`` size and one byte more (to see that the file grew): asking a small
    file for a megabyte costs a megabyte's allocation, which doubles the cost of reading."""
    first = os.read(fd, min(limit, expected + 1))
    if len(first) == expected:  # what fstat said and not a byte more: the end
        return first
    chunks = [first]
    remaining = limit - len(first)
    while remaining > 0 and chunks[-1]:
        chunks.append(os.read(fd, min(remaining, 1024 * 1024)))
        remaining -= len(chunks[-1])
    return b"".join(chunks)


def _too_large(size: int) -> str:
    return (
        f"the file is {size:,} bytes: over the API's limit of 15 MB ({MAX_DOCUMENT_BYTES:,} "
        "bytes) in any encoding"
    )
