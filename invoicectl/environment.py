"""Which GoRoute, and which account of it, a journal belongs to (design.md, "an environment
binding").

Keys and transactions of one environment mean nothing in another: a journal used against one
base URL refuses another unless told explicitly. Nor does one journal serve two profiles (two
accounts at one base URL): a send from the second would take the first one's unanswered sends
for its own and replay them through its own account, where GoRoute holds no key of them, and
deliver them twice. So the binding names the profile too (``bound_to``). A journal bound with
no profile is another configuration's, named twice, unless its last run used the same API key
as this profile (a journal of one account that started to use profiles): that one is bound
anew; any other needs ``--allow-environment-change``.
"""

from __future__ import annotations

from typing import Any

from invoicectl.errors import EnvironmentMismatch
from invoicectl.journal.interface import JournalBackend


def binding_of(settings: Any) -> dict[str, Any]:
    """A run's words to ``check_environment`` and ``bind_environment``, from its ``Settings``:
    the base URL, the profile and the API key's fingerprint."""
    key = settings.api_key
    return {
        "base_url": settings.base_url,
        "profile": settings.profile,
        "account": None if key is None else key.fingerprint,
    }


def bound_to(base_url: str, profile: str | None) -> str:
    """What a journal sending to ``base_url`` for ``profile`` is bound to, as it records it."""
    return base_url if profile is None else f"{base_url} (profile {profile})"


def check_environment(
    journal: JournalBackend,
    base_url: str,
    *,
    allow_change: bool,
    profile: str | None = None,
    account: str | None = None,
) -> str | None:
    """The binding the journal holds (None: not yet); another is refused unless allowed.
    ``account``: this run's API key fingerprint."""
    bound, wanted = journal.bound_base_url(), bound_to(base_url, profile)
    same_account = account is not None and journal.last_key_fingerprint() == account
    if bound == base_url and profile is not None and same_account:
        return bound  # one account's journal, sent from by its profile now
    if bound is None and not allow_change and (other := journal.sent_elsewhere_than(base_url)):
        raise EnvironmentMismatch(
            f"the journal {journal.path} has no environment binding, yet it sent requests to "
            f"{other} that GoRoute may have taken: either no answer there came from GoRoute's "
            "API (a redirect, a timeout), or its binding was lost (edited or damaged; "
            "`invoicectl verify` names it). Keys and transactions of one environment mean "
            f"nothing in another; --allow-environment-change if sending to {base_url} from it "
            "is intended (unanswered invoices are then replayed there under their keys)."
        )
    if bound is not None and bound != wanted and not allow_change:
        before = (
            f" If it is profile {profile}'s own, bound before bindings named a profile, run once "
            "with --allow-environment-change."
            if bound == base_url
            else ""
        )
        raise EnvironmentMismatch(
            f"the journal {journal.path} is bound to {bound}, not {wanted}; keys and "
            "transactions of one environment or account mean nothing in another. Use another "
            "--journal (each profile its own), or --allow-environment-change if this is intended."
            + before
        )
    return bound


def bind_environment(
    journal: JournalBackend,
    base_url: str,
    *,
    allow_change: bool,
    profile: str | None = None,
    account: str | None = None,
) -> None:
    """A journal sends to one base URL, for one profile; another is refused unless allowed."""
    wanted = bound_to(base_url, profile)
    bound = check_environment(
        journal, base_url, allow_change=allow_change, profile=profile, account=account
    )
    if bound != wanted:
        journal.bind_base_url(wanted)
