"""The emulator's SMP: who is on the Peppol network, what each declares, how a lookup answers.

The emulator accepts a send to any ``scheme:identifier``, so every participant is registered,
for Invoice and CreditNote, except the test receivers that say otherwise:

    9915:not-registered   not in the SMP: a lookup finds nothing, a send answers 404
    9915:invoices-only    registered for Invoice only (a send is accepted, as by
                          9915:phase4-test-receiver)
    9915:invalid-cert     registered; its certificate (in the plain lookup's answer) has expired

``Registry.stage`` overrides that for one participant: not registered, other document types,
or a lookup that answers 5xx. Participants are compared case-insensitively, as Peppol's are,
and answered in lower case, as SMPs write them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from invoicectl.sandbox.clock import iso

# Peppol BIS Billing 3.0 document type identifiers (busdox-docid-qns) and its process.
INVOICE = (
    "urn:oasis:names:specification:ubl:schema:xsd:Invoice-2::Invoice"
    "##urn:cen.eu:en16931:2017#compliant#urn:fdc:peppol.eu:2017:poacc:billing:3.0::2.1"
)
CREDIT_NOTE = (
    "urn:oasis:names:specification:ubl:schema:xsd:CreditNote-2::CreditNote"
    "##urn:cen.eu:en16931:2017#compliant#urn:fdc:peppol.eu:2017:poacc:billing:3.0::2.1"
)
BILLING_PROCESS = "urn:fdc:peppol.eu:2017:poacc:billing:01:1.0"
DOCUMENT_TYPE_IDS = {"Invoice": INVOICE, "CreditNote": CREDIT_NOTE}
BOTH = ("Invoice", "CreditNote")

NOT_REGISTERED = "9915:not-registered"
INVOICES_ONLY = "9915:invoices-only"
INVALID_CERT = "9915:invalid-cert"
LOOKUP_ERRORS = (408, 500, 502, 503)
NOT_FOUND_MESSAGE = "Participant not registered on the Peppol network"
_YEAR = 365 * 86_400.0


@dataclass(frozen=True)
class Registration:
    """What the SMP knows of one participant."""

    participant: str  # lower case, trimmed
    registered: bool
    # Short names ("Invoice", "CreditNote") or any identifier, written as given.
    document_types: tuple[str, ...] = BOTH
    # A status every lookup of this participant answers instead (a staged fault).
    lookup_error: int | None = None

    @property
    def scheme(self) -> str:
        return self.participant.partition(":")[0]

    def as_json(self) -> dict[str, Any]:
        return {
            "participant_id": self.participant,
            "registered": self.registered,
            "document_types": list(self.document_types),
            "lookup_error": self.lookup_error,
        }


def canonical(participant: str) -> str:
    """``scheme:identifier`` trimmed and in lower case; ValueError for anything else."""
    value = participant.strip().lower()
    scheme, sep, identifier = value.partition(":")
    if not sep or not scheme.strip() or not identifier.strip():
        raise ValueError(f"participant {participant[:80]!r} must be written scheme:identifier")
    return value


class Registry:
    """Every participant's registration: the defaults above, and what a test staged."""

    def __init__(self) -> None:
        self._staged: dict[str, Registration] = {}

    def find(self, participant: str) -> Registration:
        name = canonical(participant)
        staged = self._staged.get(name)
        if staged is not None:
            return staged
        if name == NOT_REGISTERED:
            return Registration(name, registered=False, document_types=())
        if name == INVOICES_ONLY:
            return Registration(name, registered=True, document_types=("Invoice",))
        return Registration(name, registered=True)

    def takes_sends(self, participant: str) -> bool:
        """Whether a send to ``participant`` is delivered (False: 404, not in the SMP).

        A receiver not written ``scheme:identifier`` (a blank schemeID) can be neither a test
        receiver nor staged, so it is registered, as every participant is by default.
        """
        try:
            return self.find(participant).registered
        except ValueError:
            return True

    def stage(
        self,
        participant: str,
        *,
        registered: bool = True,
        document_types: tuple[str, ...] = BOTH,
        lookup_error: int | None = None,
    ) -> Registration:
        if not isinstance(registered, bool):
            raise ValueError("registered must be true or false")
        if lookup_error is not None and lookup_error not in LOOKUP_ERRORS:
            raise ValueError(f"lookup_error must be one of {', '.join(map(str, LOOKUP_ERRORS))}")
        if not all(isinstance(name, str) and name for name in document_types):
            raise ValueError("document_types must be non-empty strings")
        types = tuple(document_types) if registered else ()
        registration = Registration(canonical(participant), registered, types, lookup_error)
        self._staged[registration.participant] = registration
        return registration


def peppol_id_answer(registration: Registration) -> dict[str, Any]:
    """``GET /api/v1/participants/lookup?peppol_id=``: the ``found`` shape of goroute-api.md B."""
    if not registration.registered:
        return {
            "found": False,
            "participant_id": registration.participant,
            "message": NOT_FOUND_MESSAGE,
        }
    return {
        "found": True,
        "participant_id": registration.participant,
        "scheme": registration.scheme,
        "name": f"Sandbox participant {registration.participant}",
        "country": None,
        "capabilities": [
            {"document_type": _identifier(name), "process_id": BILLING_PROCESS}
            for name in registration.document_types
        ],
        "smp_endpoint": "https://smp.sandbox.goroute.invalid",
    }


def identifier_answer(registration: Registration, now: float) -> dict[str, Any]:
    """``GET /participants/lookup?identifier=``: the ``registered`` shape of goroute-api.md B."""
    if not registration.registered:
        return {
            "participant_id": registration.participant,
            "registered": False,
            "message": NOT_FOUND_MESSAGE,
        }
    expired = registration.participant == INVALID_CERT
    return {
        "participant_id": registration.participant,
        "registered": True,
        "access_point": {"name": "GoRoute sandbox", "url": "https://ap.sandbox.goroute.invalid"},
        "document_types": [
            {"document_type_id": _identifier(name), "process_id": BILLING_PROCESS}
            for name in registration.document_types
        ],
        "certificate": {
            "subject": "CN=PSB000000, O=GoRoute Sandbox, C=NO",
            "valid_until": iso(now - 86_400.0 if expired else now + _YEAR),
        },
    }


def _identifier(name: str) -> str:
    return DOCUMENT_TYPE_IDS.get(name, name)
