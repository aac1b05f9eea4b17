"""The machine-readable forms every command writes: one JSON document, JSON Lines, or CSV rows;
written at once (``to_json``, ``to_csv``) or streamed as the records come (``write_*``)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import IO, Any, TypeVar

_Record = TypeVar("_Record")


def to_json(data: Any, indent: int | None = 2) -> str:
    """What invoicectl prints for ``--json`` (``indent=None``: on one line)."""
    return json.dumps(data, indent=indent, ensure_ascii=False, sort_keys=False)


def to_csv(records: Sequence[dict[str, Any]], fields: Sequence[str]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(fields), extrasaction="ignore")
    writer.writeheader()
    for record in records:
        writer.writerow({key: "" if record.get(key) is None else record[key] for key in fields})
    return buffer.getvalue()


# Records written out at once: one write per batch, not per record, however many there are.
_BATCH = 1000


def write_json_array(stream: IO[str], records: Iterable[dict[str, Any]]) -> int:
    """``records`` as one JSON array, written as they come: one record a line, encoded by
    the C encoder (``to_json``'s indent would need the pure-Python one, 40 times slower), so
    memory stays flat however many there are. The same document as ``to_json`` of the list,
    but for its white space. Returns how many were written."""
    encode = json.JSONEncoder(ensure_ascii=False).encode
    count = 0
    stream.write("[")
    for batch in _batches(stream, records):
        separator = "\n" if count == 0 else ",\n"
        stream.write(separator + ",\n".join(map(encode, batch)))
        count += len(batch)
    stream.write("\n]\n" if count else "]\n")
    return count


def write_json_lines(stream: IO[str], records: Iterable[dict[str, Any]]) -> int:
    """``records`` as JSON Lines: one JSON object a line, nothing around them."""
    encode = json.JSONEncoder(ensure_ascii=False).encode
    count = 0
    for batch in _batches(stream, records):
        lines = "".join(encode(record) + "\n" for record in batch)
        try:
            stream.write(lines)
        except KeyboardInterrupt:  # a signal while the pipe was full: the last line out may
            stream.write("\n")  # be cut; what follows (the error's line) starts its own
            raise
        count += len(batch)
    return count


def write_csv(stream: IO[str], records: Iterable[dict[str, Any]], fields: Sequence[str]) -> int:
    """``to_csv``, written as the records come."""
    writer = csv.writer(stream)
    writer.writerow(fields)
    count = 0
    for batch in _batches(stream, records):
        writer.writerows(
            ["" if (value := record.get(key)) is None else value for key in fields]
            for record in batch
        )
        count += len(batch)
    return count


def _batches(stream: IO[str], records: Iterable[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    iterator = iter(while_read(stream, records))
    while batch := list(islice(iterator, _BATCH)):
        yield batch


def while_read(stream: IO[str], records: Iterable[_Record]) -> Iterator[_Record]:
    """``records`` while someone reads ``stream``: once its reader has gone (``status |
    head``: stdout's ``ClosedPipeGuard`` drops what follows), the rest of the journal is not
    read only to be dropped."""
    for number, record in enumerate(records):
        if number % _BATCH == 0 and getattr(stream, "reader_gone", False):
            return
        yield record
