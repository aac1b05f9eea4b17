"""Reading, hashing and parsing one file (``scan_one``): in a forked worker process
(``init_worker``, ``scan_chunk``), or in this one when the files are few.

Content the journal already knows (by sha256) is hashed but not parsed again. Workers are
forked: they inherit this module and what it imports, and import nothing of their own.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Container
from pathlib import Path
from typing import Any, NamedTuple

from invoicectl.journal.packing import pack
from invoicectl.journal.records import fact_columns
from invoicectl.scan.scanned import ScannedFile, StatKey, Wire, as_text, to_wire
from invoicectl.ubl.errors import InvalidDocument
from invoicectl.ubl.facts import Endpoint, InvoiceFacts, parse_document
from invoicectl.ubl.reading import read_document


class Place(NamedTuple):
    """Where a process finds the files: ``directory`` (absolute) names them in answers, and
    ``read_root`` is what ``ubl.read_document`` opens them under and checks them against.
    Both also end in a separator, for names to be appended (``at``: a join a file cost more
    than its sha256)."""

    directory: str
    read_root: str
    directory_prefix: str  # as text
    read_prefix: str

    @classmethod
    def at(cls, directory: str, read_root: str) -> Place:
        return cls(directory, read_root, as_text(_ending(directory)), _ending(read_root))


def _ending(directory: str) -> str:
    return directory if directory.endswith(os.sep) else directory + os.sep


def scan_one(
    name: str, key: StatKey | None, place: Place, known_sha256: Container[str]
) -> ScannedFile:
    return scan_many([(name, key)], place, known_sha256)[0]


class _Read(NamedTuple):
    """A file read and hashed, its answer still to make."""

    path: str
    name: str
    data: bytes
    sha256: str
    key: StatKey | None


def scan_many(
    files: list[tuple[str, StatKey | None]], place: Place, known_sha256: Container[str]
) -> list[ScannedFile]:
    """Each file's answer, in order. All are read and hashed first, then the journal is
    asked once which of those contents it holds (``among``, when it can answer for many
    at once: a query a file cost a worker about 20 µs): those are not parsed again."""
    read = [_read(name, key, place) for name, key in files]
    hashes = [item.sha256 for item in read if isinstance(item, _Read)]
    among = getattr(known_sha256, "among", None)
    known = among(hashes) if among is not None and hashes else known_sha256
    return [_answer(item, known) if isinstance(item, _Read) else item for item in read]


def _read(name: str, key: StatKey | None, place: Place) -> _Read | ScannedFile:
    data_path = place.read_prefix + name
    if not name.isascii():  # a name that is not UTF-8 keeps its odd bytes as \xNN
        name = as_text(name)
    path = place.directory_prefix + name
    try:
        data = read_document(data_path, place.read_root)
    except InvalidDocument as error:
        return ScannedFile(path, name, reason=error.reason)
    return _Read(path, name, data, hashlib.sha256(data).hexdigest(), key)


def _answer(read: _Read, known_sha256: Container[str]) -> ScannedFile:
    path, name, data, sha256, key = read
    if sha256 in known_sha256:
        return ScannedFile(path, name, sha256, len(data), stat=key)
    try:
        facts = parse_document(data)
    except InvalidDocument as error:
        return ScannedFile(path, name, sha256, len(data), reason=error.reason)
    codec, stored = pack(data)
    record = facts_record(facts)
    return ScannedFile(
        path,
        name,
        sha256,
        len(data),
        invoice_id=facts.invoice_id,
        facts_json=json.dumps(record),
        columns=fact_columns(record),
        stored=stored,
        codec=codec,
        stat=key,
    )


_worker_state: dict[str, Any] = {}


def init_worker(root: Path, known_sha256: Container[str]) -> None:
    # A worker runs inside the scanned directory: ubl.read_document then resolves a name
    # with one lstat instead of one per component of the directory's path, and the answer
    # is the same, since "." resolves to the directory's real path. The worker is a process
    # of its own, so its working directory is nobody else's.
    try:
        os.chdir(root)
        read_root = os.curdir
    except OSError:
        read_root = str(root)
    _worker_state["place"] = Place.at(str(root), read_root)
    _worker_state["known"] = known_sha256


def scan_chunk(chunk: list[tuple[str, StatKey | None]]) -> list[Wire]:
    """A worker's answers to ``chunk``, as they cross back (``scanned.to_wire``)."""
    return [
        to_wire(answer)
        for answer in scan_many(chunk, _worker_state["place"], _worker_state["known"])
    ]


def facts_record(facts: InvoiceFacts) -> dict[str, Any]:
    """The facts as the journal keeps them (a revision's ``facts`` JSON)."""
    return {
        "document_type": facts.document_type,
        "invoice_id": facts.invoice_id,
        "issue_date": facts.issue_date,
        "currency": facts.currency,
        "payable_amount": facts.payable_amount,
        "supplier_endpoint": _endpoint_record(facts.supplier_endpoint),
        "customer_endpoint": _endpoint_record(facts.customer_endpoint),
        "problem": facts.problem,
        "due_date": facts.due_date,
    }


def _endpoint_record(endpoint: Endpoint | None) -> dict[str, str] | None:
    return None if endpoint is None else {"scheme": endpoint.scheme, "id": endpoint.id}
