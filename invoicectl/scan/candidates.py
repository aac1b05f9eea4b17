"""Listing an outbox: the names of the files a scan considers (``find_candidates``), and the
walk of a tree that a recursive run reads (``walk``)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

from invoicectl.scan.scanned import ScannedFile, as_text


def find_candidates(
    root: Path, recursive: bool = False, unlisted: list[ScannedFile] | None = None
) -> list[str]:
    """The name, relative to ``root``, of every entry named ``*.xml`` (any case), sorted,
    including directories and broken links, which then get a reason of their own instead of
    vanishing (``recursive``: but the directories it descends into, however deep). Symbolic
    links to directories are not descended into. A subdirectory that
    cannot be listed is answered in ``unlisted``: its files cannot be, so it must be."""
    if not recursive:
        names = [name for name in os.listdir(root) if _is_xml(name)]
        names.sort()
        return names

    def cannot_list(error: OSError) -> None:
        if unlisted is not None and error.filename is not None:
            path = os.fsdecode(error.filename)
            # (Not a matter of permissions when deeper than the system can name.)
            advice = ": fix its permissions" if isinstance(error, PermissionError) else ""
            reason = (
                f"cannot list this directory ({error.strerror}); the invoices in it were not "
                f"scanned{advice}"
            )
            name = os.path.relpath(path, root)
            unlisted.append(ScannedFile(as_text(path), as_text(name), reason=reason))

    found: list[str] = []
    for directory, subdirs, files in walk(os.fspath(root), cannot_list):
        relative = os.path.relpath(directory, root)
        prefix = "" if relative == os.curdir else relative + os.sep
        found.extend(prefix + name for name in files if _is_xml(name))
        # A directory named *.xml is descended into like any other: only a link to one,
        # which is not, is a candidate (to be told it is no file).
        found.extend(
            prefix + name
            for name in subdirs
            if _is_xml(name) and os.path.islink(os.path.join(directory, name))
        )
    # Component by component, as paths sort: a/x.xml before a-b/x.xml.
    return sorted(found, key=lambda name: name.split(os.sep))


def walk(
    top: str, onerror: Callable[[OSError], None] | None = None
) -> Iterator[tuple[str, list[str], list[str]]]:
    """``os.walk(top, onerror=onerror)``: each directory's path, subdirectories and other
    names, top down, links to directories among the subdirectories but not descended into.
    A stack where os.walk recurses: a tree about 1,000 directories deep stopped it, and the
    whole run, with RecursionError. (Deeper than the system can name, a directory cannot be
    listed: ``onerror``.)"""
    stack = [top]
    while stack:
        directory = stack.pop()
        subdirs: list[str] = []
        files: list[str] = []
        below: list[str] = []
        try:
            with os.scandir(directory) as listing:
                for entry in listing:
                    if _is_directory(entry):
                        subdirs.append(entry.name)
                        if not _is_link(entry):
                            below.append(entry.path)
                    else:
                        files.append(entry.name)
        except OSError as error:
            if onerror is not None:
                onerror(error)
            continue
        yield directory, subdirs, files
        stack.extend(reversed(below))


# An entry that cannot be stat'ed is neither, as os.walk takes it.
def _is_directory(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _is_link(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_symlink()
    except OSError:
        return False


def _is_xml(name: str) -> bool:
    return name.endswith(".xml") or name.lower().endswith(".xml")
