"""The form of an export, shared by the writer (``export``) and the checker (``verify_export``).

An export directory DEST holds one or more parts, ``DEST/0001``, ``DEST/0002``, ...: the
first export writes ``0001``, each top-up the next number, and no part is ever written again.
A part holds:

    <safe-id>/<sha256>.xml   the exact bytes of every revision sent (first exported here)
    <safe-id>/evidence.json  revisions, keys, attempts, verdicts, delivery status history
    events.jsonl             the chain segment: a first line {"previous_hash": ...}, then
                             one {"seq", "payload", "hash"} line per event, in order
    SHA256SUMS               every file above, as ``sha256sum -c`` reads it
    manifest.json            every file's path, size and sha256; the chain head; the range;
                             the invoice IDs behind the safe names; the key id; the version
    manifest.sig             the raw 64-byte Ed25519 signature of manifest.json's bytes
    signing-key.pub          the public key (PEM) whose id manifest.json names
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from invoicectl.errors import ExportError

FORMAT = "invoicectl-export/1"
PART_NAME = re.compile(r"^[0-9]{4,}$")
SIGNED = ("manifest.json", "manifest.sig", "signing-key.pub")  # not listed in the manifest
_PLAIN = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_WINDOW = 8192  # what small_fields reads at each end of a manifest


# The files at the top of every part (casefolded: one file system may not tell case apart).
_PART_FILES = frozenset(
    ("events.jsonl", "sha256sums", "manifest.json", "manifest.sig", "signing-key.pub")
)


def safe_name(invoice_id: str) -> str:
    """A directory name for an invoice ID: the ID itself when it is plain (letters, digits,
    ``.``, ``_``, ``-``; not leading with a dot; at most 100; not a part's own file's name,
    whose first letter is then ``%XX``), else every other byte as
    ``%XX`` (its UTF-8), cut to 100 with the ID's sha256 prefix appended when longer. The
    manifest maps each name back to its ID."""
    if _SAFE.match(invoice_id) and invoice_id.casefold() not in _PART_FILES:
        return invoice_id
    if _SAFE.match(invoice_id):  # a part's own file's name: its first letter as %XX
        return f"%{ord(invoice_id[0]):02X}{invoice_id[1:]}"
    quoted = "".join(
        chr(byte) if chr(byte) in _PLAIN else f"%{byte:02X}" for byte in invoice_id.encode("utf-8")
    )
    if len(quoted) > 100:
        quoted = f"{quoted[:80]}~{hashlib.sha256(invoice_id.encode('utf-8')).hexdigest()[:16]}"
    return quoted


def file_sha256(path: Path) -> tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as file:
        while chunk := file.read(1 << 16):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def parts(dest: Path) -> list[Path]:
    """The parts of an export, in order."""
    if not dest.is_dir():
        return []
    return sorted(
        (child for child in dest.iterdir() if child.is_dir() and PART_NAME.match(child.name)),
        key=lambda child: int(child.name),
    )


def last_head(part: Path) -> tuple[int, str, str | None]:
    """(head seq, head hash, journal id) a part's manifest recorded: where the next begins."""
    with _unreadable(part):
        fields = small_fields(part)
        chain = fields["chain"]
        return int(chain["head_seq"]), str(chain["head_hash"]), fields.get("journal_id")


def part_range(part: Path) -> Any:
    """The range a part was made for (``since``, ``until``, ``invoices``), as recorded."""
    with _unreadable(part):
        return small_fields(part).get("range")


@contextlib.contextmanager
def _unreadable(part: Path) -> Iterator[None]:
    try:
        yield
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        raise ExportError(
            f"{part}/manifest.json cannot be read; run invoicectl verify-export {part.parent}"
        ) from None


def small_fields(part: Path) -> dict[str, Any]:
    """A part's manifest without its two long lists when it is laid out as ``export`` writes
    it (``chain`` and ``created_at`` before ``files``; ``journal_id`` to ``retention_years``
    after ``invoices``; one entry a line): read from its first and last 8 KB, so that what a
    top-up reads of the parts before does not grow with them. Read whole otherwise."""
    path = part / "manifest.json"
    with path.open("rb") as file:
        size = os.fstat(file.fileno()).st_size
        if size > 2 * _WINDOW:
            opening = file.read(_WINDOW)
            file.seek(size - _WINDOW)
            closing = file.read(_WINDOW)
            start, end = opening.find(b'\n, "files": ['), closing.rfind(b'\n, "journal_id": ')
            if start > 0 and end >= 0:
                with contextlib.suppress(ValueError):
                    fields = json.loads(opening[:start] + b"}")
                    return {**fields, **json.loads(b"{" + closing[end + 2 :])}
            file.seek(0)
        return dict(json.load(file))


def unlisted(earlier: list[Path], invoice_ids: set[str]) -> set[str]:
    """The ``invoice_ids`` no part of ``earlier`` holds, each manifest's invoice list read a
    line at a time (flat memory; its time follows the parts' size: only a top-up asked for
    invoices that did not change since the last part reads it)."""
    missing = set(invoice_ids)
    for part in earlier:
        if not missing:
            break
        with _unreadable(part):
            missing.difference_update(_listed(part / "manifest.json"))
    return missing


def _listed(path: Path) -> Iterator[str]:
    with path.open("rb") as file:
        for line in file:
            if line == b', "invoices": {\n':
                break
        else:  # not laid out as export writes it: read whole
            file.seek(0)
            yield from json.load(file).get("invoices", {}).values()
            return
        for line in file:
            if line.startswith(b" }"):
                return
            yield from json.loads(b"{" + line.rstrip(b",\n") + b"}").values()


def held(earlier: list[Path], invoice_id: str) -> Callable[[str], bool]:
    """Whether a part of ``earlier`` holds a file of ``invoice_id`` (``<safe-id>/...``): a
    look at the parts that have its folder, not a read of their manifests."""
    holding = [part for part in earlier if _plain(part / safe_name(invoice_id), Path.is_dir)]
    return lambda relative: any(_plain(part / relative, Path.is_file) for part in holding)


def _plain(path: Path, kind: Callable[[Path], bool]) -> bool:
    """Whether ``path`` is of ``kind`` and no symbolic link: a link planted in a part (to
    a forged file) holds nothing an export may count on."""
    return kind(path) and not path.is_symlink() and not path.parent.is_symlink()
