"""``invoicectl verify-export`` on a hostile export (helper-61's review): whatever the export
holds, each problem is one line of the auditor's terminal, and nothing it holds ends the check
in a traceback. An export is checked by people who did not make it; its file names, its
manifest and its events are the maker's, and only what the signature covers is vouched for."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from logkit import unstamped
from sendkit import emulator, send, settings_for
from typer.testing import CliRunner
from ublfactory import write_invoice

from invoicectl.audit.signing import load_or_create
from invoicectl.cli import app

# What a terminal makes of it: move up a line, clear it (the real line before is gone).
ERASE = "\x1b[1A\x1b[2K"


@pytest.fixture
def exported(tmp_path: Path, outbox: Path) -> Path:
    """An export of a journal that sent two invoices; the signing key beside the journal."""
    journal = tmp_path / "state" / "journal.db"
    for number in range(2):
        write_invoice(outbox, f"VX-{number}")
    send(settings_for(journal), outbox, emulator().transport())
    dest = tmp_path / "archive"
    result = CliRunner().invoke(app, ["export", str(dest), "--journal", str(journal)])
    assert result.exit_code == 0, result.output
    return dest


def signed_again(part: Path, manifest: bytes, key_file: Path) -> None:
    """``manifest`` as the part's, signed with the key at ``key_file`` (the maker's)."""
    key, _ = load_or_create(key_file)
    (part / "manifest.json").write_bytes(manifest)
    (part / "manifest.sig").write_bytes(key.sign(manifest))


def verify_export(dest: Path) -> tuple[int, list[str]]:
    """A real process, as an auditor runs it: (exit code, stdout's lines unstamped; a line
    without its timestamp, one a file name printed, fails the test)."""
    done = subprocess.run(
        [sys.executable, "-m", "invoicectl", "verify-export", str(dest)],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.stderr == "", done.stderr  # no traceback
    return done.returncode, unstamped(done.stdout).splitlines()


def test_a_file_name_with_a_line_break_and_escapes_cannot_print_an_ok_line(exported: Path):
    part = exported / "0001"
    manifest = json.loads((part / "manifest.json").read_text(encoding="utf-8"))
    forged = f"notes\nok: 1 part(s) checked; signed by {manifest['key_id']}\n{ERASE}"
    (part / forged).write_bytes(b"x")

    code, lines = verify_export(exported)

    assert code == 1, lines
    assert lines == [
        f"0001/notes\\nok: 1 part(s) checked; signed by {manifest['key_id']}\\n"
        "\\x1b[1A\\x1b[2K: is not in the manifest",
        f"1 problem(s): 1 part(s) checked; signed by {manifest['key_id']}",
    ]


def test_a_key_id_with_escapes_in_a_manifest_signed_again_stays_on_its_line(
    exported: Path, tmp_path: Path
):
    """The key id the summary names is the manifest's, and a part signed again by whoever
    holds a key says what it likes there."""
    part = exported / "0001"
    manifest = json.loads((part / "manifest.json").read_text(encoding="utf-8"))
    real = manifest["key_id"]
    manifest["key_id"] = f"ed25519:0\n{ERASE}ok: 1 part(s) checked"
    data = json.dumps(manifest, indent=1, sort_keys=True).encode("utf-8")
    signed_again(part, data, tmp_path / "state" / "signing-key.pem")

    code, lines = verify_export(exported)

    assert code == 1, lines
    forged = "ed25519:0\\n\\x1b[1A\\x1b[2Kok: 1 part(s) checked"
    assert lines == [
        f"0001/manifest.json: names key {forged}, but signing-key.pub is {real}",
        f"1 problem(s): 1 part(s) checked; signed by {forged}",
    ]


def test_a_deeply_nested_event_line_is_one_finding_not_a_traceback(exported: Path):
    events = exported / "0001" / "events.jsonl"
    lines = events.read_bytes().split(b"\n")
    lines[2] = b"[" * 100_000 + b"]" * 100_000
    events.write_bytes(b"\n".join(lines))

    code, output = verify_export(exported)

    assert code == 1, output
    assert output[:2] == [
        "0001/events.jsonl: does not match its sha256 in the manifest",
        "0001/events.jsonl: cannot be read as a chain segment (JSON nested too deeply)",
    ]
    assert output[-1].startswith("2 problem(s): 1 part(s) checked; signed by ed25519:")


def test_a_deeply_nested_manifest_signed_again_is_one_finding_not_a_traceback(
    exported: Path, tmp_path: Path
):
    part = exported / "0001"
    signed_again(part, b"[" * 100_000 + b"]" * 100_000, tmp_path / "state" / "signing-key.pem")

    code, lines = verify_export(exported)

    assert code == 1, lines
    assert lines == [
        "0001/manifest.json: is JSON nested too deeply to read",
        "1 problem(s): 1 part(s) checked",
    ]


def test_an_event_line_that_is_not_utf8_is_named_in_a_short_line(exported: Path):
    """A UnicodeDecodeError quotes the whole line it could not read: cut short."""
    events = exported / "0001" / "events.jsonl"
    lines = events.read_bytes().split(b"\n")
    lines[2] = b'{"seq": "\xff' + b"x" * 100_000 + b'"}'
    events.write_bytes(b"\n".join(lines))

    code, output = verify_export(exported)

    assert code == 1, output
    assert output[1].startswith("0001/events.jsonl: cannot be read as a chain segment (")
    assert len(output[1]) < 300, output[1]


def test_what_an_interrupted_export_left_and_a_file_named_as_a_part_are_named(exported: Path):
    """helper-87: verify-export said ok over both; the next export removes the first, and
    cannot write its part over the second."""
    (exported / ".0002.partial-999999").mkdir()
    (exported / "0002").write_text("not a part")
    (exported / f".0003.partial-{os.getpid()}").mkdir()  # an export running: not a fault

    code, lines = verify_export(exported)

    assert code != 0 and not any(".0003.partial" in line for line in lines), lines
    assert any(".0002.partial-999999" in line and "interrupted" in line for line in lines), lines
    assert any("0002" in line and "not a directory" in line for line in lines), lines


def test_a_work_directory_named_with_digits_of_another_kind_is_no_traceback(
    exported: Path, tmp_path: Path
):
    """``str.isdigit`` takes "²" (which ``int()`` refuses) and "٤" (which it reads as 4):
    verify-export and the next export met a traceback, or took a stranger's directory for
    an export's work. Neither names a process: each is a stray, left as it is."""
    for name in (".0002.partial-\u00b2", ".0003.partial-\u0664\u0665"):
        (exported / name).mkdir()

    code, _lines = verify_export(exported)
    again = CliRunner().invoke(
        app, ["export", str(exported), "--journal", str(tmp_path / "state" / "journal.db")]
    )

    assert code == 0  # only a work directory an export named by its pid is a finding
    assert again.exit_code == 0, again.output
    assert (exported / ".0002.partial-\u00b2").is_dir()
    assert (exported / ".0003.partial-\u0664\u0665").is_dir()
