"""ApiKey: the secret is readable only through reveal(), and loading refuses unsafe sources."""

from __future__ import annotations

import copy
import hashlib
import os
import pickle
from pathlib import Path

import pytest

from invoicectl.errors import ConfigError
from invoicectl.goroute.apikey import ApiKey

SECRET = "sk_test_9fQ2xLr7SECRETkeyValue"


def write_key(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)
    return path


def test_reveal_returns_the_key() -> None:
    assert ApiKey(SECRET).reveal() == SECRET


def test_fingerprint_is_first_12_hex_of_sha256() -> None:
    expected = hashlib.sha256(SECRET.encode()).hexdigest()[:12]
    assert ApiKey(SECRET).fingerprint == expected


def test_repr_and_str_show_only_the_fingerprint() -> None:
    key = ApiKey(SECRET)
    expected = f"ApiKey(fingerprint='{key.fingerprint}')"
    assert repr(key) == expected
    assert str(key) == expected
    assert f"{key}" == expected
    assert SECRET not in repr([key, {"k": key}])
    key.redact("the forms a redaction makes once, kept inside the key")
    assert SECRET not in repr(key._forms) and repr(key) == expected
    with pytest.raises(TypeError):
        pickle.dumps(key._forms)


def test_equality_and_hash_by_value() -> None:
    assert ApiKey(SECRET) == ApiKey(SECRET)
    assert ApiKey(SECRET) != ApiKey(SECRET + "x")
    assert ApiKey(SECRET) != SECRET
    assert len({ApiKey(SECRET), ApiKey(SECRET)}) == 1


def test_cannot_be_pickled() -> None:
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        with pytest.raises(TypeError, match="cannot be pickled") as raised:
            pickle.dumps(ApiKey(SECRET), protocol=protocol)
        assert SECRET not in str(raised.value)


def test_copy_returns_the_same_immutable_object() -> None:
    key = ApiKey(SECRET)
    assert copy.copy(key) is key
    assert copy.deepcopy({"key": key})["key"] is key


def test_is_immutable_and_has_no_dict() -> None:
    key = ApiKey(SECRET)
    with pytest.raises(AttributeError):
        key._secret = "other"
    assert not hasattr(key, "__dict__")


def test_surrounding_whitespace_is_dropped() -> None:
    assert ApiKey(f"  {SECRET}\n").reveal() == SECRET


@pytest.mark.parametrize("bad", ["", "   ", "sk test", "sk_\ttest", "sk_test\r\nX-Evil: 1", "clé"])
def test_keys_that_cannot_travel_in_a_header_are_refused(bad: str) -> None:
    with pytest.raises(ConfigError) as raised:
        ApiKey(bad)
    if bad.strip():
        assert bad.strip() not in str(raised.value)


def test_from_env() -> None:
    assert ApiKey.from_env({"GOROUTE_API_KEY": SECRET + "\n"}).reveal() == SECRET


@pytest.mark.parametrize(
    ("environ", "said"),
    [
        ({}, "is not set"),
        ({"GOROUTE_API_KEY": ""}, "is not set"),
        ({"GOROUTE_API_KEY": " \n"}, "is only white space"),
    ],
)
def test_from_env_missing_names_the_variable_and_the_file_option(
    environ: dict[str, str], said: str
) -> None:
    with pytest.raises(ConfigError, match=f"GOROUTE_API_KEY {said}.*--api-key-file"):
        ApiKey.from_env(environ)


def test_from_env_bad_value_does_not_echo_it() -> None:
    with pytest.raises(ConfigError, match="^GOROUTE_API_KEY: ") as raised:
        ApiKey.from_env({"GOROUTE_API_KEY": "sk_test_ab cd"})
    assert "sk_test_ab" not in str(raised.value)


@pytest.mark.parametrize("mode", [0o600, 0o400])
def test_from_file_strips_the_trailing_newline(tmp_path: Path, mode: int) -> None:
    path = write_key(tmp_path / "key", SECRET + "\n", mode)
    assert ApiKey.from_file(path).reveal() == SECRET
    assert ApiKey.from_file(str(path)).reveal() == SECRET


def test_from_file_accepts_crlf(tmp_path: Path) -> None:
    assert ApiKey.from_file(write_key(tmp_path / "key", SECRET + "\r\n")).reveal() == SECRET


@pytest.mark.skipif(os.name == "nt", reason="POSIX permission bits")
@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660, 0o620, 0o602, 0o610])
def test_from_file_refuses_group_or_other_access(tmp_path: Path, mode: int) -> None:
    path = write_key(tmp_path / "key", SECRET + "\n", mode)
    with pytest.raises(ConfigError) as raised:
        ApiKey.from_file(path)
    message = str(raised.value)
    assert message == (
        f"API key file {path} is accessible by group or others (mode {mode:04o}); "
        f"it must be 0600 or stricter: run chmod 600 {path}"
    )
    assert SECRET not in message


def test_from_file_missing(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        ApiKey.from_file(tmp_path / "absent")


def test_from_file_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a regular file"):
        ApiKey.from_file(tmp_path)


@pytest.mark.parametrize("text", ["", "\n\n", f"{SECRET}\nsecond-line\n"])
def test_from_file_needs_exactly_one_line(tmp_path: Path, text: str) -> None:
    with pytest.raises(ConfigError, match="on one line") as raised:
        ApiKey.from_file(write_key(tmp_path / "key", text))
    assert SECRET not in str(raised.value)


def test_from_file_refuses_huge_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="too large"):
        ApiKey.from_file(write_key(tmp_path / "key", "a" * 5000))


@pytest.mark.parametrize("size", [4097, 20_000, 1_000_000])
def test_from_env_refuses_a_value_over_the_key_file_cap(size: int) -> None:
    # The cap a key file has: a value that size took seconds and hundreds of MB to load.
    with pytest.raises(ConfigError) as raised:
        ApiKey.from_env({"GOROUTE_API_KEY": "k" * size})
    assert str(raised.value) == (
        "GOROUTE_API_KEY is too large to hold an API key (over 4096 bytes); "
        "check it holds the key and nothing else"
    )


def test_from_env_takes_a_value_at_the_cap() -> None:
    assert ApiKey.from_env({"GOROUTE_API_KEY": "k" * 4096}).reveal() == "k" * 4096


def test_a_profile_variable_over_the_cap_is_refused(tmp_path: Path) -> None:
    from invoicectl.settings import resolve

    config = tmp_path / "config.toml"
    config.write_text('[profiles.acme]\napi_key_env = "ACME_KEY"\n', encoding="utf-8")
    environ = {"INVOICECTL_CONFIG": str(config), "ACME_KEY": "k" * 20_000}
    with pytest.raises(ConfigError, match="^ACME_KEY is too large to hold an API key") as raised:
        resolve(environ=environ, profile="acme")
    assert "kkkk" not in str(raised.value)


def test_from_file_refuses_binary(tmp_path: Path) -> None:
    path = tmp_path / "key"
    path.write_bytes(b"\xff\xfe" + SECRET.encode("utf-16-le"))
    path.chmod(0o600)
    with pytest.raises(ConfigError, match="not UTF-8 text"):
        ApiKey.from_file(path)


def test_from_file_bad_characters_do_not_echo_the_content(tmp_path: Path) -> None:
    path = write_key(tmp_path / "key", "sk_test_ab cd\n")
    with pytest.raises(ConfigError, match=f"^API key file {path}: ") as raised:
        ApiKey.from_file(path)
    assert "sk_test_ab" not in str(raised.value)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
def test_from_file_refuses_a_fifo_without_blocking(tmp_path: Path) -> None:
    path = tmp_path / "key"
    os.mkfifo(path, 0o600)
    with pytest.raises(ConfigError, match="not a regular file"):
        ApiKey.from_file(path)
