"""``invoicectl verify-export DEST``: an export checked with nothing but what it holds.

For each part (``manifest``): the signature of ``manifest.json`` by ``signing-key.pub``, whose
key id must be the one the manifest names (and, with ``trusted``, one of those keys); every
listed file's size and sha256; no file there that the manifest does not list; the chain
segment in ``events.jsonl`` event by event from its previous hash to the manifest's head;
and each part's segment following on from the part before. No journal is read.
"""

from __future__ import annotations

import json
import os
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, NamedTuple

from invoicectl.audit.findings import Finding
from invoicectl.audit.manifest import PART_NAME, SIGNED, file_sha256, parts
from invoicectl.audit.signing import key_id, public_key_from_pem, signature_holds
from invoicectl.journal.chain import link
from invoicectl.journal.runlock import alive
from invoicectl.text import decimal, one_line


def verify_export(
    dest: Path, trusted: set[str] | None = None, keys: list[str] | None = None
) -> tuple[list[Finding], int]:
    """(every problem found, how many parts were checked); ``keys``, when given, gets each
    signed part's key id in turn: a part re-signed with a key of its own verifies by itself,
    so which keys signed is for the auditor to see (and pin with ``trusted``)."""
    found: list[Finding] = [*_strays(dest)]
    checked = parts(dest)
    if not checked:
        found.append(Finding(str(dest), "holds no export (no part directory 0001, 0002, ...)"))
    previous_head: str | None = None
    for number, part in enumerate(checked, start=1):
        if int(part.name) != number:  # parts are numbered from 0001 without a gap
            found.append(Finding(part.name, f"part {number:04d} is missing before it"))
        manifest = _manifest(part, found, trusted)
        if manifest is None:
            previous_head = None
            continue
        if manifest.get("part") != int(part.name):  # signed: a part renamed to hide a gap
            found.append(
                Finding(part.name, f"its signed manifest names part {manifest.get('part')!r}")
            )
        if keys is not None:
            keys.append(one_line(str(manifest.get("key_id"))))  # printed on the summary line
        _files(part, manifest, found)
        chain = manifest.get("chain")
        chain = chain if isinstance(chain, dict) else {}
        head = _events(part, chain, found)
        if previous_head is not None and chain.get("previous_hash") != previous_head:
            found.append(Finding(part.name, "its chain segment does not follow the part before"))
        previous_head = head
    return found, len(checked)


def _strays(dest: Path) -> list[Finding]:
    """What DEST holds beside its parts that says something went wrong: an export's work
    directory left by one killed midway (not one still running), and a part's name on
    something not a directory, which the next export cannot write over. Both went unsaid
    (helper-87)."""
    strays = []
    for child in sorted(dest.iterdir()) if dest.is_dir() else ():
        pid = child.name.rpartition(".partial-")[2]
        if child.name.startswith(".") and decimal(pid):
            if alive(int(pid)):  # an export writing its part now (helper-88): not a fault
                continue
            why = "left by an export that was interrupted; not part of the export (the next "
            strays.append(Finding(child.name, why + "export removes it)"))
        elif PART_NAME.match(child.name) and not child.is_dir():
            strays.append(Finding(child.name, "is named as a part but is not a directory"))
    return strays


def _manifest(part: Path, found: list[Finding], trusted: set[str] | None) -> dict[str, Any] | None:
    try:
        data = (part / "manifest.json").read_bytes()
        signature = (part / "manifest.sig").read_bytes()
        public = public_key_from_pem((part / "signing-key.pub").read_bytes())
    except OSError as error:
        found.append(
            Finding(part.name, f"cannot read {Path(str(error.filename)).name}: {error.strerror}")
        )
        return None
    if public is None:
        found.append(Finding(f"{part.name}/signing-key.pub", "holds no Ed25519 public key"))
        return None
    if not signature_holds(public, signature, data):
        found.append(
            Finding(
                f"{part.name}/manifest.sig",
                "is not a valid signature of manifest.json by signing-key.pub",
            )
        )
        return None
    try:
        text = data.decode("utf-8")
        del data  # a part's manifest may be tens of megabytes: one copy at a time
        manifest = json.loads(text, object_hook=_compact)
    except ValueError:
        found.append(Finding(f"{part.name}/manifest.json", "is not JSON"))
        return None
    except RecursionError:  # signed, yet only by whoever holds the key it carries
        found.append(Finding(f"{part.name}/manifest.json", "is JSON nested too deeply to read"))
        return None
    if not isinstance(manifest, dict):
        found.append(Finding(f"{part.name}/manifest.json", "is not a JSON object"))
        return None
    if manifest.get("key_id") != key_id(public):
        found.append(
            Finding(
                f"{part.name}/manifest.json",
                f"names key {manifest.get('key_id')}, but signing-key.pub is {key_id(public)}",
            )
        )
    if trusted is not None and key_id(public) not in trusted:
        found.append(
            Finding(
                f"{part.name}/signing-key.pub",
                f"key {key_id(public)} is not one of the trusted keys",
            )
        )
    return dict(manifest)


def _files(part: Path, manifest: dict[str, Any], found: list[Finding]) -> None:
    """Every listed file against its size and sha256, and no file there unlisted. A signed
    manifest is still only what its key signed: an entry that is not a path inside the part
    is named and never followed."""
    listed = set()
    files = manifest.get("files")
    if not isinstance(files, list):
        found.append(Finding(f"{part.name}/manifest.json", "has no list of files"))
        files = []
    for number, entry in enumerate(files, 1):
        if not isinstance(entry, _Entry):
            found.append(
                Finding(
                    f"{part.name}/manifest.json",
                    f"file entry {number} is not a path, a size and a sha256",
                )
            )
            continue
        relative = entry.path
        if not _inside(relative):
            found.append(
                Finding(
                    f"{part.name}/manifest.json",
                    f"file entry {number} names {relative}, which is not a path inside the part",
                )
            )
            continue
        path = part / relative
        listed.add(relative)
        if not path.is_file():
            found.append(Finding(f"{part.name}/{relative}", "is missing"))
            continue
        size, sha256 = file_sha256(path)
        if sha256 != entry.sha256 or size != entry.size:
            found.append(
                Finding(f"{part.name}/{relative}", "does not match its sha256 in the manifest")
            )
        elif relative.endswith(".xml") and PurePosixPath(relative).stem != sha256:
            # A sent document is named by its own sha256: the name is the journal's record.
            found.append(
                Finding(f"{part.name}/{relative}", "does not hash to the sha256 it is named by")
            )
    unlisted, linked = [], []
    for root, directories, names in os.walk(part):
        inside = Path(root).relative_to(part).as_posix()
        for name in [*directories, *names]:  # a linked folder is named, never walked into
            relative = name if inside == "." else f"{inside}/{name}"
            if (Path(root) / name).is_symlink():
                linked.append(relative)
            elif name in names and relative not in listed and relative not in SIGNED:
                unlisted.append(relative)
    for relative in sorted(linked):
        found.append(Finding(f"{part.name}/{relative}", "is a symbolic link; a part holds none"))
    for relative in sorted(unlisted):
        found.append(Finding(f"{part.name}/{relative}", "is not in the manifest"))


class _Entry(NamedTuple):
    """A manifest's file entry, as it is read: a part of 200,000 files is checked without
    200,000 dicts."""

    path: str
    size: int
    sha256: str


def _compact(value: dict[str, Any]) -> Any:
    """``json.loads``' object hook: a well-formed file entry as an ``_Entry``."""
    path, size, sha256 = value.get("path"), value.get("size"), value.get("sha256")
    if (
        isinstance(path, str)
        and isinstance(sha256, str)
        and isinstance(size, int)
        and not isinstance(size, bool)
    ):
        return _Entry(path, size, sha256)
    return value


def _inside(relative: str) -> bool:
    """A relative path that stays inside the part (no ``..``, not absolute, not empty)."""
    path = PurePosixPath(relative)
    return (
        bool(relative)
        and "\\" not in relative
        and not path.is_absolute()
        and ".." not in path.parts
        and relative not in SIGNED
    )


def _events(part: Path, chain: dict[str, Any], found: list[Finding]) -> str | None:
    subject = f"{part.name}/events.jsonl"
    try:
        with (part / "events.jsonl").open("rb") as lines:
            previous, seq = _segment(lines, subject, chain, found)
    except RecursionError:  # a line nested a hundred thousand deep: one finding, no traceback
        found.append(Finding(subject, "cannot be read as a chain segment (JSON nested too deeply)"))
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError, StopIteration) as error:
        # cut short: a UnicodeDecodeError's repr quotes the whole line it could not read
        found.append(
            Finding(subject, f"cannot be read as a chain segment ({one_line(repr(error), 200)})")
        )
        return None
    if previous != chain.get("head_hash") or seq != chain.get("head_seq"):
        found.append(Finding(subject, "does not end at the manifest's chain head"))
    return str(previous)


def _segment(
    lines: BinaryIO, subject: str, chain: dict[str, Any], found: list[Finding]
) -> tuple[str, int | None]:
    """Read line by line, in flat memory: (the last hash, the last sequence number)."""
    previous = json.loads(next(lines))["previous_hash"]
    if previous != chain.get("previous_hash"):
        found.append(Finding(subject, "starts from another hash than the manifest's previous_hash"))
    seq = None
    for raw in lines:
        event = json.loads(raw)
        previous_seq, seq = seq, event["seq"]
        if previous_seq is None and seq != chain.get("first_seq"):
            found.append(
                Finding(
                    subject, f"starts at event {seq}, the manifest says {chain.get('first_seq')}"
                )
            )
        if previous_seq is not None and seq != previous_seq + 1:
            found.append(Finding(subject, f"event {previous_seq + 1} is missing"))
        if link(previous, event["payload"].encode("utf-8")) != event["hash"]:
            found.append(
                Finding(subject, f"event {seq}: its hash is not sha256(previous hash || payload)")
            )
        previous = event["hash"]
    return previous, seq
