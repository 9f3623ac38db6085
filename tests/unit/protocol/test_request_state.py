"""millimcp.protocol.request_state: sealed MRTR state is authentic, bound, and expires."""

from __future__ import annotations

import base64
import json
from typing import Any

import msgspec
import pytest

from millimcp.errors import InvalidParams
from millimcp.protocol import RequestStateSealer, SealedState

KEY = bytes(range(32))
OTHER_KEY = bytes(range(100, 132))
NOW = 1_700_000_000.0
BINDING = RequestStateSealer.binding("tools/call", "book_flight", b'{"to":"LIS"}')


def make_state(**overrides: object) -> SealedState:
    fields: dict[str, Any] = {
        "binding": BINDING,
        "expires": NOW + 600,
        "answers": {"confirm": msgspec.Raw(b'{"action":"accept","content":{"ok":true}}')},
        "user": {"phase": 2, "big": 2**70},
    }
    fields.update(overrides)
    return SealedState(**fields)


def rejected(sealer: RequestStateSealer, token: str, binding: str = BINDING) -> InvalidParams:
    with pytest.raises(InvalidParams) as info:
        sealer.open(token, binding, NOW)
    assert info.value.code == -32602
    return info.value


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def test_seal_then_open_round_trips() -> None:
    sealer = RequestStateSealer(KEY)
    token = sealer.seal(make_state())
    assert token.isascii()
    state = sealer.open(token, BINDING, NOW)
    assert state.binding == BINDING
    assert state.expires == NOW + 600
    assert bytes(state.answers["confirm"]) == b'{"action":"accept","content":{"ok":true}}'
    assert state.user == {"phase": 2, "big": 2**70}


def test_the_token_is_url_safe_and_has_three_parts() -> None:
    token = RequestStateSealer(KEY).seal(make_state(user="x" * 300 + "?/+"))
    version, payload, tag = token.split(".")
    assert version == "m1"
    for part in (payload, tag):
        assert set(part) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert len(unb64(tag)) == 32  # HMAC-SHA256


def test_the_payload_is_readable_but_not_secret() -> None:
    """Integrity only: the documented contract is that nothing secret goes in."""
    token = RequestStateSealer(KEY).seal(make_state(user={"note": "visible"}))
    payload = json.loads(unb64(token.split(".")[1]))
    assert payload["user"] == {"note": "visible"}


def test_binding_covers_method_name_and_arguments() -> None:
    base = RequestStateSealer.binding("tools/call", "t", b"{}")
    assert base == RequestStateSealer.binding("tools/call", "t", b"{}")
    assert base != RequestStateSealer.binding("prompts/get", "t", b"{}")
    assert base != RequestStateSealer.binding("tools/call", "u", b"{}")
    assert base != RequestStateSealer.binding("tools/call", "t", b'{"a":1}')


# -- tampering ------------------------------------------------------------------------------------


def flip_one_character(part: str, index: int) -> str:
    replacement = "A" if part[index] != "A" else "B"
    return part[:index] + replacement + part[index + 1 :]


@pytest.mark.parametrize("index", [0, 5, -2])
def test_a_tampered_payload_is_rejected(index: int) -> None:
    sealer = RequestStateSealer(KEY)
    version, payload, tag = sealer.seal(make_state()).split(".")
    error = rejected(sealer, f"{version}.{flip_one_character(payload, index)}.{tag}")
    assert "verification" in error.message or "malformed" in error.message


def test_a_rewritten_payload_with_the_old_tag_is_rejected() -> None:
    sealer = RequestStateSealer(KEY)
    version, payload, tag = sealer.seal(make_state()).split(".")
    forged = json.loads(unb64(payload))
    forged["expires"] = NOW + 10**9
    forged_payload = b64(json.dumps(forged, separators=(",", ":")).encode())
    error = rejected(sealer, f"{version}.{forged_payload}.{tag}")
    assert "verification" in error.message


@pytest.mark.parametrize("index", [0, 10, -1])
def test_a_tampered_tag_is_rejected(index: int) -> None:
    sealer = RequestStateSealer(KEY)
    version, payload, tag = sealer.seal(make_state()).split(".")
    rejected(sealer, f"{version}.{payload}.{flip_one_character(tag, index)}")


def test_a_truncated_tag_is_rejected() -> None:
    sealer = RequestStateSealer(KEY)
    version, payload, tag = sealer.seal(make_state()).split(".")
    rejected(sealer, f"{version}.{payload}.{tag[:20]}")
    rejected(sealer, f"{version}.{payload}.")


def test_another_version_prefix_is_rejected() -> None:
    sealer = RequestStateSealer(KEY)
    _, payload, tag = sealer.seal(make_state()).split(".")
    rejected(sealer, f"m2.{payload}.{tag}")


@pytest.mark.parametrize("junk", ["!!!!", "*$*$", "    "])
def test_characters_outside_the_alphabet_are_rejected(junk: str) -> None:
    sealer = RequestStateSealer(KEY)
    version, payload, tag = sealer.seal(make_state()).split(".")
    rejected(sealer, f"{version}.{payload[:8]}{junk}{payload[8:]}.{tag}")


@pytest.mark.parametrize(
    "token",
    ["", "m1", "m1.abc", "m1.a.b.c", "m1..", "m1.é.x", "m1.\x00.x", "m1.A.AAAA", "m1.abcde.x"],
)
def test_malformed_tokens_are_rejected(token: str) -> None:
    rejected(RequestStateSealer(KEY), token)


def test_a_valid_tag_over_a_payload_of_the_wrong_shape_is_rejected() -> None:
    """Even a correctly keyed payload must decode into a SealedState."""
    import hashlib
    import hmac

    payload = b'{"binding":5}'
    tag = hmac.new(KEY, b"m1" + payload, hashlib.sha256).digest()
    error = rejected(RequestStateSealer(KEY), f"m1.{b64(payload)}.{b64(tag)}")
    assert "malformed" in error.message


# -- binding, expiry, keys ------------------------------------------------------------------------


def test_a_state_for_another_request_is_rejected() -> None:
    sealer = RequestStateSealer(KEY)
    token = sealer.seal(make_state())
    for binding in (
        RequestStateSealer.binding("tools/call", "book_flight", b'{"to":"OPO"}'),
        RequestStateSealer.binding("tools/call", "cancel_flight", b'{"to":"LIS"}'),
        RequestStateSealer.binding("prompts/get", "book_flight", b'{"to":"LIS"}'),
    ):
        error = rejected(sealer, token, binding)
        assert "another request" in error.message


def test_an_expired_state_is_rejected() -> None:
    sealer = RequestStateSealer(KEY)
    token = sealer.seal(make_state(expires=NOW - 1))
    error = rejected(sealer, token)
    assert "expired" in error.message


def test_a_state_is_valid_until_it_expires() -> None:
    sealer = RequestStateSealer(KEY)
    token = sealer.seal(make_state(expires=NOW + 5))
    assert sealer.open(token, BINDING, NOW + 4.999).binding == BINDING
    with pytest.raises(InvalidParams):
        sealer.open(token, BINDING, NOW + 5.001)


def test_a_state_sealed_under_another_key_is_rejected() -> None:
    token = RequestStateSealer(OTHER_KEY).seal(make_state())
    error = rejected(RequestStateSealer(KEY), token)
    assert "verification" in error.message


def test_key_rotation_accepts_states_sealed_under_a_previous_key() -> None:
    old = RequestStateSealer(KEY)
    rotated = RequestStateSealer(OTHER_KEY, previous_keys=(KEY,))
    old_token = old.seal(make_state())
    assert rotated.open(old_token, BINDING, NOW).user == {"phase": 2, "big": 2**70}
    # New states are sealed under the new key: the old sealer cannot open them.
    new_token = rotated.seal(make_state())
    assert rotated.open(new_token, BINDING, NOW).binding == BINDING
    rejected(old, new_token)
    # Once the old key is dropped from the list, its states are refused.
    rejected(RequestStateSealer(OTHER_KEY), old_token)


def test_short_keys_are_rejected() -> None:
    with pytest.raises(ValueError, match="16 bytes"):
        RequestStateSealer(b"k" * 15)
    with pytest.raises(ValueError, match="at least 16 bytes"):
        RequestStateSealer(b"")
    assert RequestStateSealer(b"k" * 16).ttl == 600.0


def test_ttl_is_configurable() -> None:
    assert RequestStateSealer(KEY, ttl=5.0).ttl == 5.0
