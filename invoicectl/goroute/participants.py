"""A participant lookup's answer, as plain data: is a receiver on the Peppol network, and
does it take this kind of document?

GoRoute documents two lookups (goroute-api.md, B): ``GET /api/v1/participants/lookup
?peppol_id=`` answering ``found`` and ``capabilities``, and ``GET /participants/lookup
?identifier=`` answering ``registered`` and ``document_types``. The client reads either into a
``Participant``; any other answer (a 5xx, a timeout, a body of neither shape, an answer about
another participant) is a failed lookup, never "not registered".
"""

from __future__ import annotations

from dataclasses import dataclass

from invoicectl.goroute.outcomes import Outcome


@dataclass(frozen=True)
class Participant(Outcome):
    participant_id: str = ""  # scheme:id, as asked
    registered: bool = False
    # The document type identifiers it declares (Peppol's long form, e.g.
    # "urn:oasis:...:Invoice-2::Invoice##urn:cen.eu:en16931:2017#...::2.1"); empty when the
    # answer lists none.
    document_types: tuple[str, ...] = ()

    def accepts(self, document_type: str) -> bool:
        return takes(self.document_types, document_type)


def takes(document_types: tuple[str, ...], document_type: str) -> bool:
    """Whether a participant declaring ``document_types`` takes ``document_type``
    ("Invoice" or "CreditNote"). An answer that lists no document type identifier (Peppol's
    ``<root namespace>::<root>##<customization>::<version>``) cannot say no."""
    if not any("::" in declared for declared in document_types):
        return True
    marker = f"{document_type}-2::{document_type}"
    return any(marker in declared for declared in document_types)
