"""``invoicectl export`` and ``verify-export`` (issue 14, items 3 and 4).

A real journal sends to the emulator; its export is checked by ``verify-export``, by plain
``openssl`` and ``sha256sum`` in subprocesses, byte for byte against the files that were
sent, topped up without rewriting, signed again after a key rotation, and refused when the
key file is loose or DEST unwritable.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from sendkit import emulator, send, settings_for
from typer.testing import CliRunner
from ublfactory import write_invoice

from invoicectl.audit.manifest import safe_name
from invoicectl.cli import app

IDS = ["E-001", "E-002", "E/3 ü"]


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


@pytest.fixture
def sent(tmp_path: Path, outbox: Path) -> Path:
    path = tmp_path / "state" / "journal.db"
    for number, invoice_id in enumerate(IDS):
        write_invoice(outbox, invoice_id, name=f"file-{number}.xml")
    send(settings_for(path), outbox, emulator().transport())
    return path


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
    assert [change["state"] for change in evidence["history"]] == ["pending", "accepted"]
    code, output = run("verify-export", str(dest))
    assert code == 0, output
    assert output.strip() == "ok: 1 part(s) checked"


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
    assert output.strip() == "ok: 2 part(s) checked"
    code, output = run("verify-export", str(dest), "--trusted-key", manifest["key_id"])
    assert code == 1 and "is not one of the trusted keys" in output


def test_a_loose_signing_key_is_refused(sent: Path, tmp_path: Path):
    assert run("export", str(tmp_path / "a"), "--journal", str(sent))[0] == 0
    key = sent.parent / "signing-key.pem"
    key.chmod(0o644)
    code, output = run("export", str(tmp_path / "b"), "--journal", str(sent))
    assert code == 1
    assert f"signing key file {key} is accessible by group or others (mode 0644)" in output
    assert not (tmp_path / "b").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory")
def test_an_unwritable_destination_leaves_nothing(sent: Path, tmp_path: Path):
    dest = tmp_path / "ro"
    dest.mkdir()
    dest.chmod(0o500)
    code, output = run("export", str(dest), "--journal", str(sent))
    assert code == 1
    assert output.strip().startswith(f"invoicectl: cannot write the export to {dest}")
    assert list(dest.iterdir()) == []


def test_a_failure_midway_leaves_no_part(
    sent: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The disk fills while the manifest is written: no part, no partial directory."""
    import invoicectl.audit.export as export_module

    real = export_module._write

    def full(path: Path, data: bytes) -> None:
        if path.name == "manifest.json":
            raise OSError(28, "No space left on device")
        real(path, data)

    monkeypatch.setattr(export_module, "_write", full)
    dest = tmp_path / "archive"
    code, output = run("export", str(dest), "--journal", str(sent))
    assert code == 1
    assert "No space left on device; nothing was left behind" in output
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
