"""The export signing key: Ed25519 (the ``cryptography`` package), created on first use.

The private key is a PKCS#8 PEM file, 0600, by default ``signing-key.pem`` beside the
journal (the state directory), else the config file's ``signing_key``. A key file that group
or others can read is refused, as the API key file is. The key id is ``ed25519:`` and the
first 16 hex digits of the sha256 of the raw 32-byte public key: every export names the key
that signed it and carries its public half, so rotating the key (``--rotate-key``: the old
file is kept as ``<path>.<key id>.retired``, a new one made) leaves every old export
verifiable with what it holds.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from invoicectl.errors import ConfigError


@dataclass(frozen=True)
class SigningKey:
    path: Path
    private: Ed25519PrivateKey

    @property
    def key_id(self) -> str:
        return key_id(self.private.public_key())

    def public_pem(self) -> bytes:
        return self.private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def sign(self, data: bytes) -> bytes:
        return self.private.sign(data)

    def __repr__(self) -> str:  # never the key itself
        return f"SigningKey({self.path}, {self.key_id})"


def key_id(public: Ed25519PublicKey) -> str:
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return "ed25519:" + hashlib.sha256(raw).hexdigest()[:16]


def load_or_create(path: Path, *, rotate: bool = False) -> tuple[SigningKey, str | None]:
    """The key at ``path``, made (0600) if there is none; ``rotate``: the old one retired
    first. Returns the key, and the retired key's id when one was retired."""
    retired = None
    if rotate and path.exists():
        old = _load(path)
        retired = old.key_id
        path.rename(path.with_name(f"{path.name}.{retired.replace(':', '-')}.retired"))
    if not path.exists():
        _create(path)
    return _load(path), retired


def _create(path: Path) -> None:
    private = Ed25519PrivateKey.generate()
    pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        with os.fdopen(descriptor, "wb") as file:
            file.write(pem)
            file.flush()
            os.fsync(file.fileno())
    except FileExistsError:
        return  # another export made it a moment ago: use that one
    except OSError as error:
        raise ConfigError(f"cannot create the signing key {path}: {error.strerror}") from None


def _load(path: Path) -> SigningKey:
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"signing key file {path} is not a regular file")
        mode = stat.S_IMODE(info.st_mode)
        if os.name != "nt" and mode & 0o077:
            raise ConfigError(
                f"signing key file {path} is accessible by group or others (mode {mode:04o});"
                f" it must be 0600 or stricter: run chmod 600 {path}"
            )
        data = path.read_bytes()
    except OSError as error:
        raise ConfigError(f"cannot read the signing key {path}: {error.strerror}") from None
    try:
        private = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError):
        raise ConfigError(
            f"signing key file {path} is not an unencrypted PEM private key"
        ) from None
    if not isinstance(private, Ed25519PrivateKey):
        raise ConfigError(f"signing key file {path} holds no Ed25519 key")
    return SigningKey(path, private)


def public_key_from_pem(data: bytes) -> Ed25519PublicKey | None:
    """The Ed25519 public key of a PEM file; None when it holds none."""
    try:
        public = serialization.load_pem_public_key(data)
    except (ValueError, TypeError):
        return None
    return public if isinstance(public, Ed25519PublicKey) else None


def signature_holds(public: Ed25519PublicKey, signature: bytes, data: bytes) -> bool:
    try:
        public.verify(signature, data)
    except InvalidSignature:
        return False
    return True
