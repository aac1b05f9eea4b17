"""The safe UBL reader: file-level checks, a hardened parse, the facts invoicectl needs.

This package owns everything invoicectl knows about a UBL file's bytes, one concern a module:

- ``reading``: whether a path may be read at all (inside the scanned directory, a regular
  file, not empty, not over the API's 15 MB limit), and ``read_document``, which reads it.
- ``encoding``: a document's encoding, and ``document_text``, the exact characters sent as
  the JSON ``document`` string (design.md, Idempotency rule 2).
- ``doctype``: the refusal of any DOCTYPE that could expand or fetch something.
- ``parsers``: parsers that never resolve entities, never load a DTD and never touch the
  network, and libxml2's errors as plain reasons.
- ``two_parts``: ``parse_in_two_parts``, which checks a large invoice's lines, most of its
  bytes, for well-formedness without building their tree.
- ``facts``: ``InvoiceFacts`` and ``Endpoint``, and ``parse_document``, which extracts them.
- ``dates``: ``due_day``, the day a due date names, as a send orders by it.
- ``errors``: ``InvalidDocument`` (its reasons quote text with ``invoicectl.text.one_line``).

Every refusal is an ``InvalidDocument`` whose ``reason`` is one line a finance clerk can act on.
This module re-exports the names the rest of invoicectl uses: ``from invoicectl import ubl``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from invoicectl.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from invoicectl.ubl.encoding import document_text
    from invoicectl.ubl.errors import InvalidDocument
    from invoicectl.ubl.facts import Endpoint, InvoiceFacts, parse_document
    from invoicectl.ubl.reading import MAX_DOCUMENT_BYTES, MAX_FILE_BYTES, read_document

__all__ = [
    "MAX_DOCUMENT_BYTES",
    "MAX_FILE_BYTES",
    "Endpoint",
    "InvalidDocument",
    "InvoiceFacts",
    "document_text",
    "parse_document",
    "read_document",
]

# Where each name lives. They are imported at their first use, not with the package: the
# parser (lxml) only when a file is parsed.
_HOMES = {
    "MAX_DOCUMENT_BYTES": "reading",
    "MAX_FILE_BYTES": "reading",
    "Endpoint": "facts",
    "InvalidDocument": "errors",
    "InvoiceFacts": "facts",
    "document_text": "encoding",
    "parse_document": "facts",
    "read_document": "reading",
}

__getattr__ = lazy_exports(__name__, _HOMES)
