"""How the journal keeps the exact bytes of each content: as read, or as an LZ4 frame.

UBL is verbose XML: an LZ4 frame holds a 10 KB invoice in about a fifth of its size and costs
about 7 µs to make, far less than what SQLite spends writing the bytes it saves (WAL mode
writes every stored byte twice: to the log, then to the database at the checkpoint). Content
that LZ4 barely shrinks (a large embedded PDF is base64, nearly random to LZ4) is kept as
read. The frame format is LZ4's standard one, so ``lz4 -d`` reads a stored blob.

Whatever the packing, the journal hands back the bytes only once they hash to their sha256
again (``Journal.content``).
"""

from __future__ import annotations

import lz4.frame

LZ4 = "lz4"
# Kept packed only when that saves at least a tenth; otherwise reading it back is not worth it.
_WORTH_KEEPING = 0.9


def pack(data: bytes) -> tuple[str | None, bytes]:
    """``data`` as the journal stores it: (codec, stored bytes); codec None means as read."""
    packed: bytes = lz4.frame.compress(data)
    if len(packed) <= len(data) * _WORTH_KEEPING:
        return LZ4, packed
    return None, data


def unpack(codec: str | None, stored: bytes) -> bytes:
    """The bytes ``pack`` was given. ValueError when ``codec`` is unknown."""
    if codec is None:
        return stored
    if codec == LZ4:
        data: bytes = lz4.frame.decompress(stored)
        return data
    raise ValueError(f"unknown packing {codec!r}")
