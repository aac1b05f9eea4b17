"""``invoicectl export`` and ``verify-export`` (issue 14, items 3 and 4).

A real journal sends to the emulator; its export is checked by ``verify-export``, by plain
``openssl`` and ``sha256sum`` in subprocesses, byte for byte against the files that were
sent, topped up without rewriting, signed again after a key rotation, and refused when the
key file is loose or DEST unwritable.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from auditkit import sent_journal, sent_on
from logkit import output_of, said
from sendkit import emulator, send, settings_for
from typer.testing import CliRunner
from ublfactory import write_invoice

from invoicectl.audit.manifest import safe_name
from invoicectl.audit.signing import load_or_create
from invoicectl.cli import app

IDS = ["E-001", "E-002", "E/3 ü"]


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, output_of(args, result)


@pytest.fixture
def sent(tmp_path: Path, outbox: Path) -> Path:
    return sent_journal(tmp_path, outbox, IDS)


def test_an_export_verifies_and_holds_the_exact_bytes_sent(
    sent: Path, outbox: Path, tmp_path: Path
):
    dest = tmp_path / "archive"
    code, output = run("export", str(dest), "--journal", str(sent))
    assert code == 0, output
    assert output.startswith("exported 3 invoice(s)")
    key = sent.parent / "signing-key.pem"
    assert key.stat().st_mode & 0o777 == 0o600
    part = dest / "0001"
    manifest = json.loads((part / "manifest.json").read_text())
    assert manifest["invoices"] == {safe_name(i): i for i in IDS}
    assert safe_name("E/3 ü") == "E%2F3%20%C3%BC"
    # the round trip: every sent file's bytes, exactly
    sent_files = {path.read_bytes() for path in outbox.iterdir() if path.suffix == ".xml"}
    exported = {path.read_bytes() for path in part.glob("*/*.xml")}
    assert exported == sent_files and len(exported) == 3
    evidence = json.loads((part / "E-001" / "evidence.json").read_text())
    assert evidence["current"]["state"] == "accepted"
    assert evidence["attempts"][0]["http_status"] == 202
    # the answer as kept, and the row's content and hold fields (helper-87: only events had them)
    assert {"raw_body", "duration", "retry_after"} <= set(evidence["attempts"][0])
    assert evidence["current"]["current_sha256"] == evidence["current"]["key_sha256"]
    assert {"held_by", "held_at", "due_date", "key_version"} <= set(evidence["current"])
    assert [change["state"] for change in evidence["history"]] == ["pending", "accepted"]
    code, output = run("verify-export", str(dest))
    assert code == 0, output
    key = json.loads((dest / "0001" / "manifest.json").read_text())["key_id"]
    assert output.strip() == f"ok: 1 part(s) checked; signed by {key}"


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")
def test_plain_openssl_and_sha256sum_verify_an_export(sent: Path, tmp_path: Path):
    dest = tmp_path / "archive"
    assert run("export", str(dest), "--journal", str(sent))[0] == 0
    part = dest / "0001"
    checked = subprocess.run(
        ["openssl", "pkeyutl", "-verify", "-pubin", "-inkey", "signing-key.pub", "-rawin",
         "-in", "manifest.json", "-sigfile", "manifest.sig"],
        cwd=part, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stderr
    assert "Signature Verified Successfully" in checked.stdout
    if shutil.which("sha256sum"):
        sums = subprocess.run(
            ["sha256sum", "-c", "SHA256SUMS"], cwd=part, capture_output=True, text=True, check=False
        )
        assert sums.returncode == 0, sums.stdout + sums.stderr
    (part / "manifest.json").write_bytes(
        (part / "manifest.json").read_bytes().replace(b"E-001", b"E-00X")
    )
    tampered = subprocess.run(
        ["openssl", "pkeyutl", "-verify", "-pubin", "-inkey", "signing-key.pub", "-rawin",
         "-in", "manifest.json", "-sigfile", "manifest.sig"],
        cwd=part, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert tampered.returncode != 0


def test_verify_export_names_each_damage(sent: Path, tmp_path: Path):
    dest = tmp_path / "archive"
    assert run("export", str(dest), "--journal", str(sent))[0] == 0
    part = dest / "0001"
    xml = next((part / "E-002").glob("*.xml"))
    data = bytearray(xml.read_bytes())
    data[10] ^= 1
    xml.write_bytes(bytes(data))
    (part / "E-001" / "extra.txt").write_text("x")
    code, output = run("verify-export", str(dest))
    assert code == 1
    assert output.splitlines()[:2] == [
        f"0001/E-002/{xml.name}: does not match its sha256 in the manifest",
        "0001/E-001/extra.txt: is not in the manifest",
    ]
    (part / "manifest.json").write_bytes((part / "manifest.json").read_bytes() + b" ")
    code, output = run("verify-export", str(dest))
    assert output.splitlines()[0] == (
        "0001/manifest.sig: is not a valid signature of manifest.json by signing-key.pub"
    )


def test_a_top_up_adds_a_part_and_rewrites_nothing(sent: Path, outbox: Path, tmp_path: Path):
    dest = tmp_path / "archive"
    assert run("export", str(dest), "--journal", str(sent))[0] == 0
    before = {path: path.read_bytes() for path in dest.rglob("*") if path.is_file()}
    code, output = run("export", str(dest), "--journal", str(sent))
    assert code == 0 and output.startswith("nothing new to export"), output
    write_invoice(outbox, "E-004")
    send(settings_for(sent), outbox, emulator().transport())
    code, output = run("export", str(dest), "--journal", str(sent), "--rotate-key")
    assert code == 0, output
    assert output.startswith("retired signing key ed25519:")
    assert {path: path.read_bytes() for path in before} == before  # untouched
    manifest = json.loads((dest / "0002" / "manifest.json").read_text())
    assert list(manifest["invoices"]) == ["E-004"]
    first = json.loads((dest / "0001" / "manifest.json").read_text())
    assert manifest["chain"]["previous_hash"] == first["chain"]["head_hash"]
    assert manifest["key_id"] != first["key_id"]  # rotated; the old part still verifies
    code, output = run("verify-export", str(dest))
    assert code == 0, output
    # Both keys shown, and the auditor told to confirm them: a part re-signed with a key of
    # its own verifies by itself (found by a review for auditors).
    assert output.splitlines() == [
        f"ok: 2 part(s) checked; signed by {first['key_id']}, {manifest['key_id']}",
        "note: 2 keys signed these parts (a --rotate-key, or a part signed again by someone "
        "else): confirm each with --trusted-key",
    ]
    code, output = run("verify-export", str(dest), "--trusted-key", manifest["key_id"])
    assert code == 1 and "is not one of the trusted keys" in output


def test_an_export_never_signs_a_row_its_chain_does_not_record(sent: Path, tmp_path: Path):
    """An accepted invoice edited back to pending by hand used to be exported, signed, with
    evidence saying pending while its own history ended accepted."""
    import sqlite3

    conn = sqlite3.connect(sent)
    with conn:
        conn.execute(
            "UPDATE invoices SET state = 'pending', transaction_id = NULL WHERE invoice_id = ?",
            ("E-002",),
        )
    conn.close()
    dest = tmp_path / "archive"

    code, output = run("export", str(dest), "--journal", str(sent))

    assert code == 1, output
    assert "invoice E-002: its row in the journal is not what the hash chain recorded" in output
    assert not dest.exists() or list(dest.iterdir()) == []


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (
            "UPDATE attempts SET transaction_id = 'txn_FORGED' WHERE id = "
            "(SELECT max(id) FROM attempts WHERE invoice_id = 'E-002')",
            "attempt ",
        ),
        ("DELETE FROM events WHERE invoice_id = 'E-002'", "(its row is gone)"),
        (
            "UPDATE revisions SET source_path = '/elsewhere.xml' WHERE invoice_id = 'E-002'",
            "revision ",
        ),
        (
            "INSERT INTO events (invoice_id, at, kind, detail) VALUES "
            "('E-002', '2026-01-01T00:00:00+00:00', 'release', 'forged')",
            "event ",
        ),
        (
            "UPDATE blobs SET data = CAST('<Invoice>forged</Invoice>' AS BLOB), codec = NULL "
            "WHERE sha256 = (SELECT current_sha256 FROM invoices WHERE invoice_id = 'E-002')",
            "no longer match their sha256",
        ),
        (  # helper-52: the part held evidence.json alone, "sent": true, verify-export ok
            "DELETE FROM blobs "
            "WHERE sha256 = (SELECT current_sha256 FROM invoices WHERE invoice_id = 'E-002')",
            "which it sent, are missing from the journal",
        ),
        (  # helper-52: text where bytes belong made export fail with a traceback
            "UPDATE blobs SET data = 'not the invoice', size = 'many' "
            "WHERE sha256 = (SELECT current_sha256 FROM invoices WHERE invoice_id = 'E-002')",
            "no longer match their sha256",
        ),
    ],
    ids=[
        "attempt edited",
        "event deleted",
        "revision edited",
        "event forged",
        "bytes",
        "bytes gone",
        "bytes as text",
    ],
)
def test_an_export_never_signs_evidence_the_journal_does_not_vouch_for(
    sent: Path, tmp_path: Path, edit: str, named: str
):
    """Attempts, revisions, audit-trail entries and stored bytes edited by hand were signed
    into the evidence, and verify-export said ok (found by a review for auditors)."""
    import sqlite3

    from invoicectl.journal import Journal

    with Journal(sent) as journal:  # an audit-trail entry, chained as invoicectl writes it
        journal.add_event("E-002", "hold", "by clerk: asking the customer")
    conn = sqlite3.connect(sent)
    with conn:
        conn.execute(edit)
    conn.close()
    dest = tmp_path / "archive"

    code, output = run("export", str(dest), "--journal", str(sent))

    assert code == 1, output
    assert "invoice E-002:" in output and named in output
    assert not dest.exists() or list(dest.iterdir()) == []


def test_verify_export_names_a_part_missing_at_the_start(sent: Path, outbox: Path, tmp_path: Path):
    dest = tmp_path / "archive"
    assert run("export", str(dest), "--journal", str(sent))[0] == 0
    write_invoice(outbox, "E-004")
    send(settings_for(sent), outbox, emulator().transport())
    assert run("export", str(dest), "--journal", str(sent))[0] == 0
    import shutil

    shutil.rmtree(dest / "0001")
    code, output = run("verify-export", str(dest))
    assert code == 1 and "0002: part 0001 is missing before it" in output, output

    (dest / "0002").rename(dest / "0001")  # renamed to hide the gap: its manifest says 2
    code, output = run("verify-export", str(dest))
    assert code == 1 and "0001: its signed manifest names part 2" in output, output


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_a_loose_signing_key_is_refused(sent: Path, tmp_path: Path, mode: int):
    assert run("export", str(tmp_path / "a"), "--journal", str(sent))[0] == 0
    key = sent.parent / "signing-key.pem"
    key.chmod(mode)
    code, output = run("export", str(tmp_path / "b"), "--journal", str(sent))
    assert code == 1
    assert f"signing key file {key} is accessible by group or others (mode {mode:04o})" in output
    assert not (tmp_path / "b").exists()


def test_a_signing_key_named_and_not_there_is_made_with_a_warning(sent: Path, tmp_path: Path):
    """A mistyped --signing-key signed, unnoticed, with a new key no one had pinned."""
    key = tmp_path / "keys" / "typo.pem"
    code, output = run(
        "export", str(tmp_path / "a"), "--journal", str(sent), "--signing-key", str(key)
    )
    assert code == 0, output
    key_id = load_or_create(key)[0].key_id
    assert (
        f"invoicectl: warning: made a new signing key {key_id} at {key} (there was none)" in output
    )
    code, output = run(
        "export", str(tmp_path / "b"), "--journal", str(sent), "--signing-key", str(key)
    )
    assert code == 0 and "warning" not in output, output  # the key there now: no warning


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory")
def test_an_unwritable_destination_leaves_nothing(sent: Path, tmp_path: Path):
    dest = tmp_path / "ro"
    dest.mkdir()
    dest.chmod(0o500)
    code, output = run("export", str(dest), "--journal", str(sent))
    assert code == 1
    assert output.strip().startswith(f"invoicectl: error: cannot write the export to {dest}")
    assert list(dest.iterdir()) == []


def test_retention_years_from_the_config_is_recorded(
    sent: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    config = tmp_path / "config.toml"
    config.write_text("retention_years = 8\n")
    monkeypatch.setenv("INVOICECTL_CONFIG", str(config))
    assert run("export", str(tmp_path / "a"), "--journal", str(sent))[0] == 0
    manifest = json.loads((tmp_path / "a" / "0001" / "manifest.json").read_text())
    assert manifest["retention_years"] == 8
    config.write_text("retention_years = 0\n")
    code, output = run("export", str(tmp_path / "b"), "--journal", str(sent))
    assert code != 0 and "retention_years" in output and "from 1 to 100" in output
    monkeypatch.delenv("INVOICECTL_CONFIG")
    assert run("export", str(tmp_path / "c"), "--journal", str(sent))[0] == 0
    default = json.loads((tmp_path / "c" / "0001" / "manifest.json").read_text())
    assert default["retention_years"] == 10


def test_a_bad_retention_is_refused_before_a_signing_key_is_made(
    sent: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    config = tmp_path / "config.toml"
    config.write_text("retention_years = 1000\n")
    monkeypatch.setenv("INVOICECTL_CONFIG", str(config))
    code, output = run("export", str(tmp_path / "a"), "--journal", str(sent))
    assert code == 1 and "retention_years" in output
    assert not (sent.parent / "signing-key.pem").exists()


@pytest.fixture
def sent_over_days(tmp_path: Path, outbox: Path) -> Path:
    """D-1 sent on 10 January, D-2 at noon on 31 January, D-3 half an hour into February
    (UTC): the times its attempts started."""
    return sent_on(
        tmp_path / "state" / "journal.db",
        outbox,
        (
            ("D-1", datetime(2026, 1, 10, 9, 0, tzinfo=UTC)),
            ("D-2", datetime(2026, 1, 31, 12, 0, tzinfo=UTC)),
            ("D-3", datetime(2026, 2, 1, 0, 30, tzinfo=UTC)),
        ),
    )


@pytest.mark.parametrize(
    ("since", "until", "chosen"),
    [
        ("2026-01-01", "2026-01-31", ["D-1", "D-2"]),  # a date: the whole (UTC) day
        ("2026-01-31", None, ["D-2", "D-3"]),
        ("2026-01-31T12:00:00+00:00", "2026-02-01T00:30:00Z", ["D-2"]),  # a time: exclusive
        ("2026-01-31T13:00+01:00", "2026-02-01T01:00+01:00", ["D-2"]),  # offsets honoured
        (None, "2026-01-10T09:00", []),  # a time without an offset is UTC
        ("2026-02-01", "2026-02-01", ["D-3"]),
        ("20260101", "20260131", ["D-1", "D-2"]),  # a basic ISO date is a whole day too
        ("2026-01-31", "9999-12-31", ["D-2", "D-3"]),  # a script's "no end": was OverflowError
    ],
)
def test_since_and_until_choose_by_when_the_requests_were_sent(
    sent_over_days: Path, tmp_path: Path, since: str | None, until: str | None, chosen: list[str]
):
    dest = tmp_path / "archive"
    options = [*(["--since", since] if since else []), *(["--until", until] if until else [])]
    code, output = run("export", str(dest), "--journal", str(sent_over_days), *options)
    assert code == 0, output
    if not chosen:
        assert output.startswith("nothing new to export"), output
        return
    manifest = json.loads((dest / "0001" / "manifest.json").read_text())
    assert sorted(manifest["invoices"].values()) == chosen


def test_a_range_that_ends_before_it_starts_is_refused(sent_over_days: Path, tmp_path: Path):
    code, output = run(
        "export", str(tmp_path / "a"), "--journal", str(sent_over_days),
        "--since", "2026-02-01", "--until", "2026-01-01",
    )  # fmt: skip
    assert code == 2, output
    assert output.strip() == (
        "invoicectl: error: --until 2026-01-01 is not after --since 2026-02-01:"
        " no request can be in that range"
    )
    assert not (tmp_path / "a").exists()


def test_a_time_past_the_last_utc_moment_is_refused_in_one_line(sent: Path, tmp_path: Path):
    """It was an OverflowError traceback."""
    code, output = run(
        "export", str(tmp_path / "a"), "--journal", str(sent), "--until", "9999-12-31T23:00-05:00"
    )
    assert code == 2, output
    assert output.strip() == (
        "invoicectl: error: --until '9999-12-31T23:00-05:00' falls outside the years 1 to 9999"
        " in UTC"
    )


def test_a_destination_that_is_a_file_is_refused_in_one_line(sent: Path, tmp_path: Path):
    dest = tmp_path / "archive"
    dest.write_text("not a directory")
    code, output = run("export", str(dest), "--journal", str(sent))
    assert code == 1
    assert output.splitlines() == [
        f"invoicectl: error: cannot write the export to {dest}: Not a directory;"
        " nothing was left behind"
    ]
    assert dest.read_text() == "not a directory"


def _private_mounts() -> list[str] | None:
    """``unshare`` arguments for a mount namespace of our own (root, or a user namespace),
    where a small or read-only tmpfs can be mounted for one command; None where it cannot."""
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return None
    prefix = ["unshare", "--mount"] if os.geteuid() == 0 else ["unshare", "--mount", "-r"]
    probe = [*prefix, "sh", "-c", "mount -t tmpfs -o size=16k tmpfs /mnt 2>/dev/null || exit 1"]
    if subprocess.run(probe, capture_output=True, check=False).returncode != 0:
        return None
    return prefix


PRIVATE_MOUNTS = _private_mounts()
needs_mounts = pytest.mark.skipif(
    PRIVATE_MOUNTS is None, reason="cannot mount a tmpfs in a private mount namespace here"
)


def export_onto_tmpfs(sent: Path, mountpoint: Path, options: str) -> tuple[int, list[str], str]:
    """``invoicectl export`` into a tmpfs mounted (``options``) at ``mountpoint`` in a private
    mount namespace: (exit code, its output lines, what the tmpfs holds afterwards)."""
    assert PRIVATE_MOUNTS is not None
    mountpoint.mkdir()
    script = (
        'mount -t tmpfs -o "$1" tmpfs "$2" || exit 99\n'
        '"$3" -m invoicectl export "$2/archive" --journal "$4" >"$5" 2>&1\n'
        "code=$?\n"
        'ls -A "$2"; ls -A "$2/archive" 2>/dev/null\n'
        "exit $code\n"
    )
    out = mountpoint.parent / "export-output.txt"
    done = subprocess.run(
        [*PRIVATE_MOUNTS, "sh", "-c", script, "sh", options, str(mountpoint), sys.executable,
         str(sent), str(out)],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode != 99, done.stderr
    return done.returncode, said(out.read_text(), done.returncode).splitlines(), done.stdout


@needs_mounts
def test_a_full_disk_leaves_no_export_behind_and_says_so_in_one_line(sent: Path, tmp_path: Path):
    """A real full disk: a tmpfs of 16 KB, which the first files of the part fill."""
    mountpoint = tmp_path / "small"
    code, output, left = export_onto_tmpfs(sent, mountpoint, "size=16k")
    assert code == 1, output
    assert output == [
        f"invoicectl: error: cannot write the export to {mountpoint}/archive:"
        " No space left on device; nothing was left behind"
    ]
    assert left == ""  # not even the archive directory it made


@needs_mounts
def test_a_read_only_destination_leaves_nothing_and_says_so_in_one_line(sent: Path, tmp_path: Path):
    """Read-only for root too (the unwritable-directory test above skips under root)."""
    mountpoint = tmp_path / "readonly"
    code, output, left = export_onto_tmpfs(sent, mountpoint, "ro")
    assert code == 1, output
    assert output == [
        f"invoicectl: error: cannot write the export to {mountpoint}/archive:"
        " Read-only file system; nothing was left behind"
    ]
    assert left == ""


def test_verify_export_names_a_signed_manifest_with_bad_entries(sent: Path, tmp_path: Path):
    """A manifest signed by the key it carries can still list nonsense: a path outside the
    part, an entry that is no entry. Named, never followed, never a crash."""
    dest = tmp_path / "archive"
    assert run("export", str(dest), "--journal", str(sent))[0] == 0
    part = dest / "0001"
    manifest = json.loads((part / "manifest.json").read_text())
    (tmp_path / "outside.txt").write_text("x")
    manifest["files"].append({"path": "../../outside.txt", "size": 1, "sha256": "0" * 64})
    manifest["files"].append({"nonsense": True})
    data = json.dumps(manifest, indent=1, sort_keys=True).encode() + b"\n"
    key, _ = load_or_create(sent.parent / "signing-key.pem")
    (part / "manifest.json").write_bytes(data)
    (part / "manifest.sig").write_bytes(key.sign(data))
    result = CliRunner().invoke(app, ["verify-export", str(dest)])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    count = len(manifest["files"])
    assert result.output.splitlines()[:2] == [
        f"0001/manifest.json: file entry {count - 1} names ../../outside.txt, which is not a"
        " path inside the part",
        f"0001/manifest.json: file entry {count} is not a path, a size and a sha256",
    ]


def test_verify_export_names_a_document_whose_bytes_are_not_its_name(sent: Path, tmp_path: Path):
    """A sent document is named by its sha256: one replaced, with its manifest entry and
    SHA256SUMS rewritten and the part signed again with the same key, is still named."""
    import hashlib

    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    dest = tmp_path / "archive"
    assert run("export", str(dest), "--journal", str(sent))[0] == 0
    part = dest / "0001"
    document = next(part.glob("E-002/*.xml"))
    forged = b"<Invoice>forged</Invoice>"
    document.write_bytes(forged)
    relative = document.relative_to(part).as_posix()
    manifest = json.loads((part / "manifest.json").read_text(encoding="utf-8"))
    for entry in manifest["files"]:
        if entry["path"] == relative:
            entry.update(size=len(forged), sha256=hashlib.sha256(forged).hexdigest())
    sums = (part / "SHA256SUMS").read_text(encoding="utf-8").splitlines()
    sums = [f"{hashlib.sha256(forged).hexdigest()}  {relative}" if line.endswith(relative)
            else line for line in sums]  # fmt: skip
    (part / "SHA256SUMS").write_text("\n".join(sums) + "\n", encoding="utf-8")
    data = json.dumps(manifest, indent=1, sort_keys=True).encode("utf-8")
    (part / "manifest.json").write_bytes(data)
    key = load_pem_private_key((sent.parent / "signing-key.pem").read_bytes(), password=None)
    (part / "manifest.sig").write_bytes(key.sign(data))  # type: ignore[call-arg, union-attr]

    code, output = run("verify-export", str(dest))

    assert code == 1, output
    assert f"0001/{relative}: does not hash to the sha256 it is named by" in output


@pytest.mark.parametrize("invoice_id", ["events.jsonl", "SHA256SUMS", "sha256sums", "manifest.sig"])
def test_an_invoice_named_like_a_part_s_own_file_is_exported(
    tmp_path: Path, outbox: Path, invoice_id: str
):
    """An invoice whose ID is 'events.jsonl' or 'SHA256SUMS' made every export that held it
    fail with 'File exists' (found by a review for auditors)."""
    path = tmp_path / "state" / "journal.db"
    write_invoice(outbox, invoice_id, name="the-one.xml")
    send(settings_for(path), outbox, emulator().transport())
    dest = tmp_path / "archive"

    code, output = run("export", str(dest), "--journal", str(path))

    assert code == 0, output
    assert safe_name(invoice_id) != invoice_id
    assert (dest / "0001" / safe_name(invoice_id) / "evidence.json").is_file()
    assert run("verify-export", str(dest))[0] == 0


def test_a_top_up_never_leaves_out_an_invoice_asked_for_without_a_word(sent: Path, tmp_path: Path):
    """--invoice A into a new DEST, then --invoice B into the same: 'nothing new to export',
    exit 0, and B in no part (found by a review for auditors)."""
    dest = tmp_path / "archive"
    assert run("export", str(dest), "--journal", str(sent), "--invoice", "E-002")[0] == 0

    code, output = run("export", str(dest), "--journal", str(sent), "--invoice", "E-001")

    assert code == 2, output
    assert "(the first: E-001) are in no part of this export" in output
    assert "export them to a new DEST" in output
    assert [part.name for part in dest.iterdir() if not part.name.startswith(".")] == ["0001"]


@pytest.mark.parametrize("damage", ["rolled back", "rewritten"])
def test_a_top_up_from_a_journal_that_no_longer_holds_its_chain_is_refused(
    sent: Path, tmp_path: Path, damage: str
):
    """The parts handed out are a record a journal rolled back or rewritten cannot change: a
    top-up said 'nothing new to export', or added a part that no longer followed (found by a
    review for auditors)."""
    import sqlite3

    dest = tmp_path / "archive"
    assert run("export", str(dest), "--journal", str(sent))[0] == 0
    conn = sqlite3.connect(sent)
    with conn:
        if damage == "rolled back":
            conn.execute("DELETE FROM chain WHERE seq > (SELECT max(seq) - 3 FROM chain)")
        else:
            conn.execute("UPDATE chain SET hash = ? WHERE seq = (SELECT max(seq) FROM chain)",
                         ("f" * 64,))  # fmt: skip
    conn.close()

    code, output = run("export", str(dest), "--journal", str(sent))

    assert code == 1, output
    expected = "lost events" if damage == "rolled back" else "was rewritten"
    assert expected in output and "nothing was exported" in output
    assert [part.name for part in dest.iterdir() if not part.name.startswith(".")] == ["0001"]


def test_an_export_leaves_a_live_export_s_work_alone(sent: Path, tmp_path: Path):
    """Two exports into one DEST at once: each cleared the other's work directory as a killed
    export's, and one exited 0 with its part gone (found by a review for auditors)."""
    import subprocess
    import sys

    dest = tmp_path / "archive"
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        theirs = dest / f".0001.partial-{other.pid}"
        theirs.mkdir(parents=True)
        (theirs / "events.jsonl").write_bytes(b"{}\n")
        dead = dest / ".0001.partial-999999999"  # a pid no process has: a killed export's
        dead.mkdir()

        code, output = run("export", str(dest), "--journal", str(sent))

        assert code == 0, output
        assert (theirs / "events.jsonl").is_file() and not dead.exists()
    finally:
        other.kill()
        other.wait()


def test_a_top_up_holds_what_changed_and_no_stored_bytes_twice(
    sent: Path, outbox: Path, tmp_path: Path
):
    """E-001 has an audit-trail entry after the first part (its bytes did not change) and
    E-004 is sent: the top-up holds both, E-001's evidence anew but its bytes only in the part
    before."""
    dest = tmp_path / "archive"
    assert run("export", str(dest), "--journal", str(sent))[0] == 0
    note(sent, "E-001")
    write_invoice(outbox, "E-004")
    send(settings_for(sent), outbox, emulator().transport())

    code, output = run("export", str(dest), "--journal", str(sent))

    assert code == 0, output
    manifest = json.loads((dest / "0002" / "manifest.json").read_text())
    assert sorted(manifest["invoices"]) == ["E-001", "E-004"]
    assert [path.name for path in (dest / "0002" / "E-001").iterdir()] == ["evidence.json"]
    assert len(list((dest / "0001" / "E-001").glob("*.xml"))) == 1
    assert len(list((dest / "0002" / "E-004").glob("*.xml"))) == 1
    evidence = json.loads((dest / "0002" / "E-001" / "evidence.json").read_text())
    assert evidence["decisions"][-1]["detail"] == "by clerk: asked again"
    code, output = run("verify-export", str(dest))
    assert code == 0, output


def test_a_top_up_of_a_range_holds_only_the_invoices_sent_in_it(
    sent_over_days: Path, tmp_path: Path
):
    """D-1 (sent before the range) changes after the first part: a top-up of the same range
    leaves it out, as the first part did; one with no range after it refuses, D-1 being in
    no part."""
    dest = tmp_path / "archive"
    journal = ["--journal", str(sent_over_days)]
    assert run("export", str(dest), *journal, "--since", "2026-01-31")[0] == 0
    for invoice_id in ("D-1", "D-3"):
        note(sent_over_days, invoice_id)

    code, output = run("export", str(dest), *journal, "--since", "2026-01-31")

    assert code == 0, output
    manifest = json.loads((dest / "0002" / "manifest.json").read_text())
    assert list(manifest["invoices"].values()) == ["D-3"]
    code, output = run("export", str(dest), *journal)
    assert code == 2, output
    assert "1 invoice(s) asked for (the first: D-1) are in no part of this export" in output
    assert sorted(part.name for part in dest.iterdir()) == ["0001", "0002"]


def test_a_top_up_after_a_range_that_covers_it_needs_no_list_of_what_the_parts_hold(
    sent_over_days: Path, tmp_path: Path
):
    """Parts made with no range hold every invoice sent: a top-up reads their ranges, not
    their invoice lists (shown here by lists no one could read)."""
    dest = tmp_path / "archive"
    journal = ["--journal", str(sent_over_days)]
    assert run("export", str(dest), *journal)[0] == 0
    manifest = dest / "0001" / "manifest.json"
    text = manifest.read_text()
    opening = text.index('\n, "invoices": {') + len('\n, "invoices": {')
    padding = " " * 20_000  # long enough to be read at its ends
    manifest.write_text(text[:opening] + "\n  <damaged>," + padding + text[opening:])
    signed_as_is(dest / "0001", sent_over_days)
    note(sent_over_days, "D-2")

    code, output = run("export", str(dest), *journal)

    assert code == 0, output
    assert list(json.loads((dest / "0002" / "manifest.json").read_text())["invoices"]) == ["D-2"]
    code, output = run("export", str(dest), *journal, "--invoice", "D-1")
    assert code == 1, output  # an invoice asked for, unchanged: the list is read, and is bad
    assert output.strip() == (
        f"invoicectl: error: {dest / '0001'}/manifest.json cannot be read; run invoicectl"
        f" verify-export {dest}"
    )


def signed_as_is(part: Path, journal: Path) -> None:
    """``part``'s manifest, edited by hand, signed again with the journal's key: a manifest
    export wrote oddly (an older invoicectl, say). One not as signed is refused before it is
    read (``tests/test_export_top_up_checks.py``)."""
    key, _ = load_or_create(journal.parent / "signing-key.pem")
    (part / "manifest.sig").write_bytes(key.sign((part / "manifest.json").read_bytes()))


def note(journal: Path, invoice_id: str) -> None:
    """An audit-trail entry for the invoice, chained as invoicectl writes one."""
    from invoicectl.journal import Journal

    with Journal(journal) as opened:
        opened.add_event(invoice_id, "note", "by clerk: asked again")


@pytest.mark.parametrize("padding", [0, 20_000], ids=["read whole", "read at its ends"])
def test_a_top_up_over_a_manifest_no_one_can_read_says_so_in_one_line(
    sent: Path, tmp_path: Path, padding: int
):
    dest = tmp_path / "archive"
    assert run("export", str(dest), "--journal", str(sent))[0] == 0
    manifest = dest / "0001" / "manifest.json"
    text = manifest.read_text().replace('"head_seq"', '"head_', 1)
    manifest.write_text(text.replace('"files": [', '"files": [' + " " * padding, 1))
    signed_as_is(dest / "0001", sent)

    code, output = run("export", str(dest), "--journal", str(sent))

    assert code == 1, output
    assert output.strip() == (
        f"invoicectl: error: {dest / '0001'}/manifest.json cannot be read; run invoicectl"
        f" verify-export {dest}"
    )


def test_a_top_up_after_a_part_removed_by_hand_still_refuses_to_leave_its_invoice_out(
    sent: Path, outbox: Path, tmp_path: Path
):
    """Parts 0001 and 0003 left, 0002 (E-004 alone) removed: the ranges of the parts there
    cover the top-up, but E-004 is in none of them (found by review)."""
    dest = tmp_path / "archive"
    for invoice_id in ("E-004", "E-005", None):
        assert run("export", str(dest), "--journal", str(sent))[0] == 0
        if invoice_id:
            write_invoice(outbox, invoice_id)
            send(settings_for(sent), outbox, emulator(seed=len(invoice_id)).transport())
    shutil.rmtree(dest / "0002")

    code, output = run("export", str(dest), "--journal", str(sent))

    assert code == 2, output
    assert "1 invoice(s) asked for (the first: E-004) are in no part of this export" in output


def test_a_top_up_after_a_part_whose_range_is_not_as_export_records_it(
    sent_over_days: Path, tmp_path: Path
):
    """A range bound that is not text was a TypeError traceback (found by review): the
    invoice lists are read instead."""
    dest = tmp_path / "archive"
    journal = ["--journal", str(sent_over_days)]
    assert run("export", str(dest), *journal, "--since", "2026-01-31")[0] == 0
    manifest = dest / "0001" / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"since": "2026-01-31T00:00:00+00:00"',
                                                     '"since": 5'))  # fmt: skip
    signed_as_is(dest / "0001", sent_over_days)
    note(sent_over_days, "D-3")

    code, output = run("export", str(dest), *journal, "--since", "2026-02-01")

    assert code == 0, output
    assert list(json.loads((dest / "0002" / "manifest.json").read_text())["invoices"]) == ["D-3"]


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        ("UPDATE chain SET payload = payload || ' ' WHERE seq = 3", "chain is broken at event 3"),
        ("UPDATE chain SET hash = printf('%064d', 0) WHERE seq = 5", "chain is broken at event"),
        ("DELETE FROM chain WHERE seq = 7", "chain is broken at event 7"),
        ("DELETE FROM attempts WHERE invoice_id = 'E-001'", "attempt "),
        ("DELETE FROM runs", "run "),
        ("DELETE FROM environment", "environment"),
        ("DELETE FROM identity", "identity"),
        (
            "UPDATE blobs SET data = X'00112233445566778899', codec = 'lz4' "
            "WHERE sha256 = (SELECT current_sha256 FROM invoices WHERE invoice_id = 'E-002')",
            "cannot be unpacked",
        ),
        ("DROP TABLE runs", "its schema lacks runs"),
        ("DROP TABLE environment", "its schema lacks environment"),
    ],
    ids=[
        "chain payload edited",
        "chain hash edited",
        "chain event deleted",
        "attempts deleted",
        "runs deleted",
        "environment deleted",
        "identity deleted",
        "packed bytes damaged",
        "runs dropped",
        "environment dropped",
    ],  # fmt: skip
)
def test_an_export_never_signs_a_journal_that_lost_or_broke_what_its_chain_holds(
    sent: Path, tmp_path: Path, edit: str, named: str
):
    """A broken hash chain was signed (exit 0), an invoice whose attempts were deleted was
    left out without a word, deleted runs, environment or identity went unremarked, and a
    damaged packed copy ended in a traceback (found by a probing review)."""
    import sqlite3

    conn = sqlite3.connect(sent)
    with conn:
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'"):
            conn.execute(f'DROP TRIGGER "{name}"')  # as someone editing the file would
        conn.execute(edit)
    conn.close()
    dest = tmp_path / "archive"

    code, output = run("export", str(dest), "--journal", str(sent))

    assert code == 1, output
    assert named in output and "nothing was exported" in output, output
    assert "Traceback" not in output and len(output.strip().splitlines()) == 1, output
    assert not dest.exists() or list(dest.iterdir()) == []


def test_an_export_of_a_journal_cut_short_is_refused_in_one_line(sent: Path, tmp_path: Path):
    """A journal whose last byte is gone (a copy cut short): its last event's hash is read
    torn, and the export refuses it rather than signing a chain that does not follow."""
    os.truncate(sent, sent.stat().st_size - 1)
    dest = tmp_path / "archive"

    code, output = run("export", str(dest), "--journal", str(sent))

    assert code == 1 and "nothing was exported" in output, output
    assert "Traceback" not in output and len(output.strip().splitlines()) == 1, output
    assert not dest.exists() or list(dest.iterdir()) == []


def test_a_journal_of_an_older_invoicectl_is_upgraded_not_called_damaged(tmp_path: Path):
    """A healthy journal from before the hash chain: export said it was damaged and to
    restore a backup. It says to open it once, which upgrades it, and then exports."""
    from auditkit import fill

    journal = tmp_path / "old.db"
    fill(journal, 3)  # as at m008, before the chain
    dest = tmp_path / "archive"

    code, output = run("export", str(dest), "--journal", str(journal))

    assert code == 1 and "older invoicectl" in output and "damaged" not in output, output
    assert "Traceback" not in output and len(output.strip().splitlines()) == 1, output
    assert run("status", "--journal", str(journal))[0] == 0
    code, output = run("export", str(dest), "--journal", str(journal))
    assert code == 0 and "exported 3 invoice(s)" in output, output


def test_an_event_filed_under_another_invoice_is_refused(sent: Path, tmp_path: Path):
    """helper-52: chain.invoice_id, which no hash covers, moved E-002's hold under E-001;
    the export signed that history for E-001 and none for E-002, and verify-export said ok."""
    import sqlite3

    from invoicectl.journal import Journal

    with Journal(sent) as journal:
        journal.add_event("E-002", "hold", "by clerk: asking the customer")
    with sqlite3.connect(sent) as conn:
        (seq,) = conn.execute(
            "SELECT max(seq) FROM chain WHERE invoice_id = 'E-002' AND kind = 'event'"
        ).fetchone()
        conn.execute("UPDATE chain SET invoice_id = 'E-001' WHERE seq = ?", (seq,))
    dest = tmp_path / "archive"

    code, output = run("export", str(dest), "--journal", str(sent))

    assert code == 1, output
    assert f"chain event {seq} is filed under another invoice than its payload names" in output
    assert not dest.exists() or list(dest.iterdir()) == []


def test_a_linked_folder_planted_in_a_part_is_named_and_held_nothing(
    sent: Path, outbox: Path, tmp_path: Path
):
    """helper-52: a folder of the first part made a link to one holding a forged copy of
    the next invoice's bytes: the top-up took them as held already and left them out, and
    verify-export, which never walked into the link, said ok."""
    import hashlib

    dest = tmp_path / "archive"
    assert run("export", str(dest), "--journal", str(sent))[0] == 0
    path = write_invoice(outbox, "E-004")
    sha256 = hashlib.sha256(path.read_bytes()).hexdigest()
    forged = tmp_path / "forged"
    forged.mkdir()
    (forged / f"{sha256}.xml").write_bytes(b"<Invoice>forged</Invoice>")
    (dest / "0001" / safe_name("E-004")).symlink_to(forged, target_is_directory=True)
    send(settings_for(sent), outbox, emulator().transport())

    assert run("export", str(dest), "--journal", str(sent))[0] == 0

    sent_copy = dest / "0002" / safe_name("E-004") / f"{sha256}.xml"
    assert sent_copy.read_bytes() == path.read_bytes()
    code, output = run("verify-export", str(dest))
    assert code == 1, output
    assert f"0001/{safe_name('E-004')}: is a symbolic link; a part holds none" in output


def test_the_readme_recipe_rebuilds_each_body_sha256_from_the_export(tmp_path: Path, outbox: Path):
    """helper-61: a file in ISO-8859-1 went out as UTF-8 text, and nothing told an auditor how
    to get from the exported bytes to the attempt's body_sha256. The README's recipe, done
    here with the standard library alone, does it for UTF-8 and ISO-8859-1 files."""
    journal = tmp_path / "journal.db"
    write_invoice(outbox, "U-1", name="utf8.xml", note="Lieferung für Åkerlund")
    latin = (outbox / "utf8.xml").read_text("utf-8").replace("U-1", "L-1")
    latin = latin.replace('encoding="UTF-8"', 'encoding="ISO-8859-1"', 1)
    (outbox / "latin.xml").write_bytes(latin.encode("iso-8859-1"))
    send(settings_for(journal), outbox, emulator().transport())
    dest = tmp_path / "archive"
    assert run("export", str(dest), "--journal", str(journal))[0] == 0

    for invoice_id in ("U-1", "L-1"):
        evidence = json.loads((dest / "0001" / invoice_id / "evidence.json").read_text())
        sha256 = evidence["revisions"][0]["sha256"]
        raw = (dest / "0001" / invoice_id / f"{sha256}.xml").read_bytes()
        declared = raw.split(b'encoding="', 1)[1].split(b'"', 1)[0].decode()
        text = raw.decode(declared).replace(f'encoding="{declared}"', 'encoding="UTF-8"', 1)
        body = {
            "document": text,
            "metadata": {"invoice_id": invoice_id, "sha256": sha256},
            "receiver_id": evidence["current"]["receiver_id"],
            "receiver_scheme": evidence["current"]["receiver_scheme"],
        }
        encoded = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        rebuilt = hashlib.sha256(encoded.encode()).hexdigest()
        assert rebuilt == evidence["attempts"][0]["body_sha256"], invoice_id
