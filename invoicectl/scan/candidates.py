"""Listing an outbox: the names of the files a scan considers (``find_candidates``)."""

from __future__ import annotations

import os
from pathlib import Path

from invoicectl.scan.scanned import ScannedFile, as_text


def find_candidates(
    root: Path, recursive: bool = False, unlisted: list[ScannedFile] | None = None
) -> list[str]:
    """The name, relative to ``root``, of every entry named ``*.xml`` (any case), sorted,
    including directories and broken links, which then get a reason of their own instead of
    vanishing (``recursive``: but the directories it descends into). Symbolic links to
    directories are not descended into. A subdirectory that
    cannot be listed is answered in ``unlisted``: its files cannot be, so it must be."""
    if not recursive:
        names = [name for name in os.listdir(root) if _is_xml(name)]
        names.sort()
        return names

    def cannot_list(error: OSError) -> None:
        if unlisted is not None and error.filename is not None:
            path = os.fsdecode(error.filename)
            reason = (
                f"cannot list this directory ({error.strerror}); the invoices in it were not "
                "scanned: fix its permissions"
            )
            name = os.path.relpath(path, root)
            unlisted.append(ScannedFile(as_text(path), as_text(name), reason=reason))

    found: list[str] = []
    for directory, subdirs, files in os.walk(root, onerror=cannot_list):
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


def _is_xml(name: str) -> bool:
    return name.endswith(".xml") or name.lower().endswith(".xml")
