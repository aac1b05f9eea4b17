"""The verdict table: every verdict declared once, with its guidance, in display order.

``Verdict`` is the one structure; ``GUIDANCE`` and ``VERDICT_ORDER`` are read off it. These
tests pin what the data says today about who acts, the exit code and ``--apply``, and that the
table drawn in ``reconcile/verdicts.py``'s docstring says the same.
"""

from __future__ import annotations

import pytest

from invoicectl.errors import ExitCode
from invoicectl.goroute.outcomes import RateLimited, Rejected, Transient
from invoicectl.reconcile import GUIDANCE, VERDICT_ORDER, JournalSide, Verdict, verdicts
from invoicectl.reconcile.failed_lookups import lookup_failed
from invoicectl.reconcile.verdicts import build_case

SIDE = JournalSide(state="unknown", document_type="Invoice", receiver="9915:receiver")
ADOPTABLE = {Verdict.already_sent, Verdict.unknown_found}


def test_every_verdict_has_its_guidance() -> None:
    assert set(GUIDANCE) == set(Verdict)
    for verdict in Verdict:
        assert GUIDANCE[verdict] is verdict.guidance, verdict
        assert verdict.value == verdict.name, verdict
        assert Verdict(verdict.value) is verdict
        assert verdict.guidance.title and verdict.guidance.next_step, verdict


def test_the_order_lists_each_verdict_exactly_once() -> None:
    assert len(VERDICT_ORDER) == len(set(VERDICT_ORDER)) == len(Verdict)
    assert set(VERDICT_ORDER) == set(Verdict)
    assert tuple(Verdict) == VERDICT_ORDER  # the declaration order is the display order


def test_the_guidance_table_cannot_be_changed_in_place() -> None:
    with pytest.raises(TypeError):
        GUIDANCE[Verdict.delivered] = Verdict.amended.guidance  # type: ignore[index]


def test_needs_person_means_exit_4() -> None:
    for verdict in Verdict:
        if verdict.guidance.needs_person:
            assert verdict.guidance.exit_code is ExitCode.NEEDS_RECONCILE, verdict


def test_adoptable_needs_no_person_beyond_apply_and_exits_4_until_applied() -> None:
    assert {verdict for verdict in Verdict if verdict.guidance.adoptable} == ADOPTABLE
    for verdict in ADOPTABLE:
        assert not verdict.guidance.needs_person, verdict
        assert verdict.guidance.exit_code is ExitCode.NEEDS_RECONCILE, verdict
        assert "`invoicectl reconcile --apply` adopts" in verdict.guidance.next_step


def test_exit_4_only_for_a_person_or_an_adoption_else_0_or_75() -> None:
    for verdict in Verdict:
        guidance = verdict.guidance
        if guidance.needs_person or guidance.adoptable:
            assert guidance.exit_code is ExitCode.NEEDS_RECONCILE, verdict
        else:
            assert guidance.exit_code in (ExitCode.OK, ExitCode.INCOMPLETE), verdict


def test_the_order_shows_what_needs_a_person_first_and_delivered_last() -> None:
    people = [verdict.guidance.needs_person for verdict in VERDICT_ORDER]
    assert people == sorted(people, reverse=True)  # every True before every False
    assert VERDICT_ORDER[-1] is Verdict.delivered
    first_fine = min(
        i for i, verdict in enumerate(VERDICT_ORDER) if verdict.guidance.exit_code is ExitCode.OK
    )
    assert all(VERDICT_ORDER.index(verdict) < first_fine for verdict in ADOPTABLE)


def test_next_steps_use_ID_only_as_the_invoice_placeholder() -> None:
    # build_case replaces every "ID" in a next step with the invoice's id.
    for verdict in Verdict:
        step = verdict.guidance.next_step
        placeholders = step.count("--new-version ID") + step.count("release ID --force")
        assert step.count("ID") == placeholders, verdict


def _docstring_table() -> dict[str, tuple[str, str, str]]:
    """verdict -> (person, --apply, exit) from the table in verdicts.py's docstring."""
    lines = (verdicts.__doc__ or "").splitlines()
    borders = [i for i, line in enumerate(lines) if line.startswith("=====")]
    assert len(borders) == 3, "the docstring table lost its borders"
    spans: list[tuple[int, int]] = []
    start = 0
    for part in lines[borders[0]].split("  "):
        spans.append((start, start + len(part)))
        start += len(part) + 2
    rows: dict[str, tuple[str, str, str]] = {}
    order: list[str] = []
    for line in lines[borders[1] + 1 : borders[2]]:
        cells = [line[a:b].strip() for a, b in spans]
        if cells[0]:
            assert cells[0] not in rows, f"{cells[0]} drawn twice"
            rows[cells[0]] = (cells[2], cells[3], cells[4])
            order.append(cells[0])
    assert order == [str(verdict) for verdict in VERDICT_ORDER], "docstring order"
    return rows


def test_the_docstring_table_agrees_with_the_data() -> None:
    for name, (person, apply, code) in _docstring_table().items():
        guidance = Verdict(name).guidance
        assert person.startswith("yes" if guidance.needs_person else "no"), name
        assert (apply == "adopt it") is guidance.adoptable, name
        assert (apply == "hold it") is guidance.held, name
        expected = "4/0*" if guidance.adoptable else str(int(guidance.exit_code))
        assert code == expected, name


def test_a_case_takes_its_guidance_and_names_its_invoice() -> None:
    case = build_case("INV-7", Verdict.unknown_not_found_window_closed, SIDE)
    assert case.needs_person is True
    assert case.exit_code is ExitCode.NEEDS_RECONCILE
    assert case.action.endswith("`invoicectl send DIR --new-version INV-7`")
    assert build_case("INV-7", Verdict.delivered, SIDE).exit_code is ExitCode.OK


@pytest.mark.parametrize(
    ("outcome", "person", "code"),
    [
        (Transient(reason="timeout"), False, ExitCode.INCOMPLETE),
        (RateLimited(http_status=429), False, ExitCode.INCOMPLETE),
        (None, False, ExitCode.INCOMPLETE),
        (Rejected(http_status=400, message="bad id"), True, ExitCode.NEEDS_RECONCILE),
    ],
)
def test_a_failed_lookup_needs_a_person_only_when_refused(
    outcome: Transient | RateLimited | Rejected | None, person: bool, code: ExitCode
) -> None:
    case = lookup_failed("INV-7", SIDE, outcome, None)
    assert case.verdict is Verdict.lookup_failed
    assert case.needs_person is person
    assert case.exit_code is code
    # A person needed always means exit 4, whatever the verdict's own exit code.
    assert not case.needs_person or case.exit_code is ExitCode.NEEDS_RECONCILE
