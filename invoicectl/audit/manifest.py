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

import hashlib
import json
import re
from pathlib import Path

from invoicectl.errors import ExportError

FORMAT = "invoicectl-export/1"
PART_NAME = re.compile(r"^[0-9]{4,}$")
SIGNED = ("manifest.json", "manifest.sig", "signing-key.pub")  # not listed in the manifest
_PLAIN = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


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
    try:
        manifest = json.loads((part / "manifest.json").read_text(encoding="utf-8"))
        chain = manifest["chain"]
        return int(chain["head_seq"]), str(chain["head_hash"]), manifest.get("journal_id")
    except (OSError, ValueError, KeyError, TypeError):
        raise ExportError(
            f"{part}/manifest.json cannot be read; run invoicectl verify-export {part.parent}"
        ) from None


def listed_in(earlier: list[Path]) -> set[str]:
    """The invoice IDs the parts before hold (each manifest read in turn)."""
    listed: set[str] = set()
    for part in earlier:
        manifest = json.loads((part / "manifest.json").read_text(encoding="utf-8"))
        listed.update(manifest.get("invoices", {}).values())
    return listed


def held_before(earlier: list[Path], chosen: list[str]) -> set[str]:
    """``<safe-id>/<sha256>.xml`` of the revisions of ``chosen`` an earlier part holds (each
    manifest read in turn: memory for one part, not for all of DEST)."""
    held: set[str] = set()
    folders = {safe_name(invoice_id) for invoice_id in chosen} if earlier else set()
    for part in earlier:
        manifest = json.loads((part / "manifest.json").read_text(encoding="utf-8"))
        held.update(
            entry["path"]
            for entry in manifest["files"]
            if entry["path"].endswith(".xml") and entry["path"].split("/", 1)[0] in folders
        )
    return held
