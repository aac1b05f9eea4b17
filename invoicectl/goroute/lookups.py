"""Reading a participant lookup's answer (goroute-api.md B), in either documented shape.

    A  GET /api/v1/participants/lookup?peppol_id=   {"found", "participant_id",
                                                     "capabilities": [{"document_type", ...}]}
    B  GET /participants/lookup?identifier=         {"registered", "participant_id",
                                                     "document_types": [{"document_type_id", ...}]}

Either shape may come at either route, as a 200 or (not registered) a 404. "Not registered" is
believed only from a well-formed answer about the participant asked: a misread answer would
hold an invoice that could have gone, so anything doubtful is a failed lookup (``Transient``),
which does not block a send.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from invoicectl.goroute.answers import Answer, unexpected_shape
from invoicectl.goroute.jsontext import text_of
from invoicectl.goroute.outcomes import Outcome, Transient
from invoicectl.goroute.participants import Participant
from invoicectl.text import folded_line

# A lookup answer lists a handful of document types; anything near this size is not one.
MAX_LOOKUP_BYTES = 256 * 1024

# SMPs write participants with their identifier scheme in front; the lookup answers may too.
_ACTOR_SCHEME = "iso6523-actorid-upis::"
_MAX_SHOWN = 80


def checked_peppol_id(peppol_id: str) -> str:
    """``peppol_id`` trimmed; ValueError unless it reads ``scheme:identifier``."""
    value = peppol_id.strip()
    scheme, sep, identifier = value.partition(":")
    if not sep or not scheme or not identifier.strip() or not value.isprintable():
        raise ValueError(f"peppol_id must be written scheme:identifier, not {value[:80]!r}")
    return value


def is_lookup_document(data: Any) -> bool:
    """Whether a body claims to be a lookup answer of either shape (it may still be wrong)."""
    return isinstance(data, dict) and ("found" in data or "registered" in data)


def route_missing(answer: Answer) -> bool:
    """A 404 or 405 that is not a lookup answer: the server has no such route."""
    missing = (HTTPStatus.NOT_FOUND, HTTPStatus.METHOD_NOT_ALLOWED)
    return answer.status in missing and not is_lookup_document(answer.data)


def lookup_outcome(
    answer: Answer | Transient, asked: str, failure: Callable[[Answer], Outcome]
) -> Outcome:
    """What one lookup answer comes to; ``failure`` reads a non-2xx that is no lookup answer."""
    if isinstance(answer, Transient):
        return answer
    if is_lookup_document(answer.data) and (answer.ok or answer.status == HTTPStatus.NOT_FOUND):
        return read_participant(answer, asked)
    if not answer.ok:
        return failure(answer)
    return unexpected_shape(answer, "a participant lookup answer")


def read_participant(answer: Answer, asked: str) -> Participant | Transient:
    """A 2xx or 404 lookup document about ``asked``, read strictly."""
    data: dict[str, Any] = answer.data
    if "found" in data:
        flag_name, list_name, type_name = "found", "capabilities", "document_type"
    else:
        flag_name, list_name, type_name = "registered", "document_types", "document_type_id"
    flag = data[flag_name]
    if not isinstance(flag, bool):
        return _failed(answer, f'"{flag_name}" is {_shown(json.dumps(flag))}, not true or false')
    about = text_of(data.get("participant_id"))
    if about is None:
        return _failed(answer, "it does not say which participant it is about")
    if not _same_participant(about, asked, text_of(data.get("scheme"))):
        return _failed(answer, f"it is about {_shown(about)}, not {asked}")
    if not flag:
        raw_body = None if answer.ok else answer.raw_body
        return Participant(
            participant_id=asked, registered=False, raw_body=raw_body, **answer.common()
        )
    if not answer.ok:
        return _failed(answer, f'it says "{flag_name}": true')
    document_types = _document_types(data.get(list_name), type_name)
    if document_types is None:
        return _failed(answer, f'"{list_name}" is not a list of document types')
    return Participant(
        participant_id=asked, registered=True, document_types=document_types, **answer.common()
    )


def _same_participant(about: str, asked: str, scheme: str | None) -> bool:
    # Peppol participant identifiers are case-insensitive; an answer may give the scheme apart.
    candidates = {about} if ":" in about or scheme is None else {about, f"{scheme}:{about}"}
    return _canonical(asked) in {_canonical(candidate) for candidate in candidates}


def _canonical(participant: str) -> str:
    value = participant.strip().lower()
    return value.removeprefix(_ACTOR_SCHEME)


def _document_types(value: Any, type_name: str) -> tuple[str, ...] | None:
    """Identifiers from ``[{type_name: ...}]`` (or plain strings); None if any entry is unreadable.

    An entry skipped would make ``accepts`` say no to a type the receiver declared.
    """
    if value is None:
        return ()
    if not isinstance(value, list):
        return None
    found = []
    for item in value:
        identifier = item.get(type_name) if isinstance(item, dict) else item
        if not isinstance(identifier, str) or not _printable(identifier.strip()):
            return None
        found.append(identifier.strip())
    return tuple(found)


# A document type identifier is a URN of a few hundred characters at most.
_MAX_DOCUMENT_TYPE = 1024


def _printable(identifier: str) -> bool:
    """Whether ``identifier`` can be one: not empty, not huge, and printable text (no
    control character, which a terminal or a log would act on, and no lone surrogate, which
    no UTF-8 output can hold): the journal keeps it, and ``receivers`` shows it."""
    return 0 < len(identifier) <= _MAX_DOCUMENT_TYPE and identifier.isprintable()


def _failed(answer: Answer, why: str) -> Transient:
    return Transient(
        reason=f"participant lookup failed: GoRoute answered {answer.status}, but {why}",
        raw_body=answer.raw_body,
        **answer.common(),
    )


def _shown(text: str) -> str:
    text = folded_line(text)
    return text if len(text) <= _MAX_SHOWN else text[:_MAX_SHOWN] + "…"
