"""GoRoute transactions as plain data, whichever documented shape the server answered in.

``goroute-api.md`` describes a transaction twice: the list shape (``transaction_id``,
``invoice_number``, flat ``receiver_id``) and the single shape (``id``, ``document_id``, nested
``receiver``). This module owns reading both (and mixes of them) into one ``Transaction``, the
``TransactionPage`` a list answer is read into, and the two outcomes of looking one up by id.
Fields are kept only when usable: an id by ``identifiers``' rules, text as one printable line
(the invoice number as written, which is matched, not shown).
Plain data below the client: reading an HTTP answer into a page is ``goroute.client``'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from invoicectl.goroute.identifiers import checked_id
from invoicectl.goroute.jsontext import first_text, text_of
from invoicectl.goroute.outcomes import Outcome

FINAL_STATUSES = frozenset({"delivered", "failed"})
_PARTICIPANT_PREFIX = "iso6523-actorid-upis::"
_MAX_FIELD = 256


@dataclass(frozen=True)
class Transaction:
    """One GoRoute transaction, normalised from either documented shape (see ``from_json``)."""

    transaction_id: str | None = None
    invoice_number: str | None = None
    document_type: str | None = None
    receiver: str | None = None
    receiver_scheme: str | None = None
    receiver_id: str | None = None
    sender_id: str | None = None
    status: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    delivered_at: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict, hash=False)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, hash=False)

    @property
    def is_final(self) -> bool:
        """Delivered or failed: the only statuses that will not change any more."""
        return self.status in FINAL_STATUSES

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Transaction:
        """Read the list shape (``transaction_id``, ``invoice_number``, flat ``receiver_id``)
        or the single shape (``id``, ``document_id``, nested ``receiver``), or a mix."""
        scheme, identifier = _receiver_of(data)
        scheme, identifier = _short(scheme), _short(identifier)
        metadata = data.get("metadata")
        status = _short(text_of(data.get("status")))
        return cls(
            # An unusable id is not kept (``identifiers``): such a transaction can be matched
            # and reported, never asked for or adopted by its id.
            transaction_id=checked_id(first_text(data, "transaction_id", "id")),
            # The number as GoRoute wrote it, however long, whatever its characters: it is
            # matched against the journal's invoice IDs, which may be as long or hold an
            # invisible character; dropped, it could never match, and its invoice would be
            # sent again. Quoted to a person, it is escaped (``text.one_line``).
            invoice_number=first_text(data, "invoice_number", "document_id"),
            document_type=_short(text_of(data.get("document_type"))),
            receiver=f"{scheme}:{identifier}" if scheme and identifier else None,
            receiver_scheme=scheme,
            receiver_id=identifier,
            sender_id=_short(_sender_of(data)),
            # Status words are compared against the documented lower-case set.
            status=status.lower() if status else None,
            created_at=_short(text_of(data.get("created_at"))),
            updated_at=_short(text_of(data.get("updated_at"))),
            delivered_at=_short(text_of(data.get("delivered_at"))),
            metadata=dict(metadata) if isinstance(metadata, Mapping) else {},
            raw=dict(data),
        )


@dataclass(frozen=True)
class TransactionPage:
    """One page of GET /api/v1/transactions. ``has_more`` without a cursor cannot be followed."""

    transactions: tuple[Transaction, ...]
    next_cursor: str | None = None
    has_more: bool = False
    # Whether the API said anything of paging (``has_more``, or a cursor): a list that says
    # nothing may have stopped at a page size of its own, well short of the ``limit`` asked.
    pages_told: bool = False


@dataclass(frozen=True, kw_only=True)
class Found(Outcome):
    """GET /api/v1/transactions/{id} answered with the transaction."""

    transaction: Transaction


@dataclass(frozen=True)
class NotFound(Outcome):
    """GET /api/v1/transactions/{id} answered 404: GoRoute does not know the id."""


def _short(value: str | None) -> str | None:
    """A field kept only as one printable line of sensible length: these reach the journal
    (the remote status), the report and the terminal."""
    if value is None or len(value) > _MAX_FIELD or not value.isprintable():
        return None
    return value


def _receiver_of(data: Mapping[str, Any]) -> tuple[str | None, str | None]:
    nested = data.get("receiver")
    if isinstance(nested, Mapping):
        return _participant_of(nested)
    if isinstance(nested, str):
        return _flat_participant(None, nested)
    return _flat_participant(data.get("receiver_scheme"), data.get("receiver_id"))


def _sender_of(data: Mapping[str, Any]) -> str | None:
    nested = data.get("sender")
    if isinstance(nested, Mapping):
        scheme, identifier = _participant_of(nested)
        return f"{scheme}:{identifier}" if scheme and identifier else identifier
    return text_of(data.get("sender_id"))


def _participant_of(nested: Mapping[str, Any]) -> tuple[str | None, str | None]:
    return _flat_participant(
        first_text(nested, "scheme", "scheme_id", "schemeID"),
        first_text(nested, "identifier", "id", "value"),
    )


def _flat_participant(scheme_value: Any, id_value: Any) -> tuple[str | None, str | None]:
    """(scheme, id) from a scheme field (may be absent) and an id that may be "scheme:id"."""
    scheme, identifier = text_of(scheme_value), text_of(id_value)
    if identifier is None:
        return scheme, None
    if identifier.lower().startswith(_PARTICIPANT_PREFIX):
        identifier = identifier[len(_PARTICIPANT_PREFIX) :]
    if scheme is not None and f"{scheme.lower()}::" == _PARTICIPANT_PREFIX:
        scheme = None  # Peppol's identifier scheme: the address's own is in the id ("0088:579")
    if scheme is not None:
        # With the scheme given, the id is taken verbatim (ids may contain ':'), minus a
        # repeated "scheme:" prefix.
        prefix = f"{scheme}:"
        return scheme, identifier[len(prefix) :] if identifier.startswith(prefix) else identifier
    head, sep, tail = identifier.partition(":")
    if sep and head and tail:
        return head, tail
    return None, identifier
