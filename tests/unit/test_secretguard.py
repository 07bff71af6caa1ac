"""The secret guard (DESIGN §6): every corpus secret found by its rule and never echoed,
every look-alike and every line of ordinary memory prose left alone, JSON paths and
redaction exact, and scanning linear in the input."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from acmi_core.base.errors import AcmiValidationError, SecretDetected
from acmi_core.guard.rules import RULES
from acmi_core.guard.secrets import Finding, check_policy, guard, marker, redact, scan
from tests.unit.secret_corpus import AWS_KEY_ID, GITHUB_PAT, INNOCENT, PROSE, SECRETS, jwt


def _removed(text: str, redacted: str) -> str:
    """What redaction took out of ``text``: the secret, for the never-echoed checks."""
    head = 0
    while head < min(len(text), len(redacted)) and text[head] == redacted[head]:
        head += 1
    tail = 0
    while tail < min(len(text), len(redacted)) - head and text[-1 - tail] == redacted[-1 - tail]:
        tail += 1
    return text[head : len(text) - tail]


# --- the corpus ------------------------------------------------------------------------------


def test_corpus_size_and_coverage() -> None:
    assert len(SECRETS) >= 30 and len(INNOCENT) >= 30
    assert len(PROSE.splitlines()) >= 200
    assert {rule for _, _, rule in SECRETS} == {rule.id for rule in RULES}  # every rule tested


@pytest.mark.parametrize(("name", "text", "rule"), SECRETS, ids=[s[0] for s in SECRETS])
def test_every_secret_is_found_by_its_rule_and_never_echoed(
    name: str, text: str, rule: str
) -> None:
    findings = scan({"note": text})
    assert [(f.path, f.rule) for f in findings] == [("$.note", rule)], name
    redacted, again = redact(text)
    assert again == [Finding("$", rule, findings[0].text)]
    assert marker(rule) in redacted
    secret = _removed(text, redacted)
    assert len(secret) >= 6
    with pytest.raises(SecretDetected) as err:
        guard({"note": text}, "reject")
    error = err.value
    assert (error.field, error.rule, error.code) == ("$.note", rule, "secret_detected")
    shown = [str(error), error.message, error.field, repr(error.findings), str(findings[0])]
    assert not [where for where in shown if secret in where]


@pytest.mark.parametrize(("name", "text", "rule"), SECRETS, ids=[s[0] for s in SECRETS])
def test_redaction_keeps_the_context_and_is_final(name: str, text: str, rule: str) -> None:
    redacted, _ = redact(text)
    assert scan(redacted) == [], name  # a redacted value passes the guard
    assert redacted.replace(marker(rule), "") == text.replace(_removed(text, redacted), "")


@pytest.mark.parametrize(("name", "text"), INNOCENT, ids=[s[0] for s in INNOCENT])
def test_look_alikes_are_not_found(name: str, text: str) -> None:
    assert scan({"note": text}) == [], name
    assert guard(text, "reject") is text


def test_ordinary_memory_prose_has_no_findings() -> None:
    """The false-positive rate on ~200 lines of agent memory: 0 (per line and whole)."""
    flagged = [line for line in PROSE.splitlines() if scan(line)]
    assert flagged == []
    assert scan(PROSE) == []
    assert scan({"lines": PROSE.splitlines()}) == []


# --- JSON values --------------------------------------------------------------------------------


def test_paths_name_where_the_secret_is() -> None:
    event = {
        "summary": "deploy done",
        "payload": {
            "headers": {"Authorization": f"Bearer {'Zk3' * 8}", "X-Id": "42"},
            "items": ["a", "b", {"token": jwt()}],
            "odd key.name": f"key {AWS_KEY_ID}",
            "amount": 4111111111111111,
        },
    }
    assert [(f.path, f.rule) for f in scan(event, path="event")] == [
        ("event.payload.headers.Authorization", "bearer_token"),
        ("event.payload.items[2].token", "jwt"),
        ('event.payload["odd key.name"]', "aws_access_key_id"),
        ("event.payload.amount", "card_number"),
    ]


@pytest.mark.parametrize(
    ("doc", "rule"),
    [
        ({"password": "hunter22"}, "password"),
        ({"db_password": "x9!"}, None),  # too short to be one
        ({"DB_PASSWORD": "correct-horse-7"}, "password"),
        ({"userPwd": "pa55word"}, "password"),
        ({"passwd": "whatever"}, "password"),  # keyed: any one-token value
        ({"password": "required"}, None),
        ({"password": "********"}, None),
        ({"password": "${DB_PASSWORD}"}, None),
        ({"password": "op://Ops/prod-db/password"}, None),
        ({"password": "see the vault, item prod-db"}, None),
        ({"pwd": "/home/atlas/work"}, None),  # a working directory
        ({"password": True}, None),
        ({"password_changed_at": "2026-11-30T10:00:00Z"}, None),
        ({"client_secret": "Zx8" * 8}, "secret_assignment"),
        ({"api_key": "OPENAI_API_KEY"}, None),  # names where it is kept
        (
            {"aws_secret_access_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"},
            "aws_secret_access_key",
        ),
        ({"Authorization": "Token " + "f4c9" * 8}, "secret_assignment"),
        ({"token": "next-page-2"}, None),  # a bare "token" key is not a credential
        ({"note": "I reset my password yesterday"}, None),
    ],
)
def test_key_value_credentials(doc: dict[str, Any], rule: str | None) -> None:
    key = next(iter(doc))
    expected = [] if rule is None else [(f"$.{key}", rule)]
    assert [(f.path, f.rule) for f in scan(doc)] == expected


def test_numbers_floats_and_booleans() -> None:
    assert [f.rule for f in scan([5555555555554444, 4111111111111112])] == ["card_number"]
    assert scan([True, None, 3.5, 1764500000000, 4.111111111111111e15]) == []


def test_non_ascii_text_is_scanned_ignoring_case() -> None:
    """ "İ".lower() is two characters: the folded copy's positions differ, so the
    ignore-case patterns run on the original and the span is still exact."""
    text = "İstanbul ofisi: PASSWORD=Tr0ub4dor&3 (eski)"
    redacted, findings = redact(text)
    assert [f.rule for f in findings] == ["password"]
    assert redacted == "İstanbul ofisi: PASSWORD=[REDACTED:password] (eski)"


def test_a_secret_in_a_key_is_redacted_in_paths_and_values() -> None:
    doc = {GITHUB_PAT: {"note": "hi", "card": "5555 5555 5555 4444"}, "z": 1}
    findings = scan(doc)
    assert [(f.path, f.rule) for f in findings] == [
        ('$["[REDACTED:github_token]"]', "github_token"),
        ('$["[REDACTED:github_token]"].card', "card_number"),
    ]
    assert GITHUB_PAT not in repr(findings)
    redacted, _ = redact(doc)
    assert redacted == {
        "[REDACTED:github_token]": {"note": "hi", "card": "[REDACTED:card_number]"},
        "z": 1,
    }
    assert list(redacted) == ["[REDACTED:github_token]", "z"]  # key order kept


def test_keys_that_redact_alike_stay_distinct() -> None:
    doc = {"ghp_" + "a1" * 18: 1, "ghp_" + "b2" * 18: 2}
    redacted, findings = redact(doc)
    assert redacted == {"[REDACTED:github_token]": 1, "[REDACTED:github_token]#2": 2}
    assert len(findings) == 2


def test_redact_copies_only_what_it_changes() -> None:
    clean = {"a": [1, 2], "b": {"c": "d"}}
    same, findings = redact(clean)
    assert same is clean and findings == []
    dirty = {"keep": clean, "bad": ["x", {"pwd": "Hunter2!"}]}
    before = json.dumps(dirty)
    redacted, _ = redact(dirty)
    assert json.dumps(dirty) == before  # the input is never changed
    assert redacted == {"keep": clean, "bad": ["x", {"pwd": "[REDACTED:password]"}]}
    assert redacted["keep"] is clean  # untouched branches are shared, not copied
    assert redact(f"key {AWS_KEY_ID}")[0] == "key [REDACTED:aws_access_key_id]"


def test_deep_values_do_not_overflow_the_stack() -> None:
    deep: Any = f"password={'Xy9' * 3}"
    for _ in range(100_000):
        deep = [deep]
    findings = scan(deep)
    assert [f.rule for f in findings] == ["password"]
    assert findings[0].path == "$" + "[0]" * 100_000
    redacted, _ = redact(deep)
    for _ in range(100_000):
        redacted = redacted[0]
    assert redacted == "password=[REDACTED:password]"


# --- the policy ---------------------------------------------------------------------------------


def test_guard_policies() -> None:
    doc = {"summary": "rotated keys", "payload": {"old": GITHUB_PAT, "pin": "password: 9!x4Lm2q"}}
    with pytest.raises(SecretDetected) as err:
        guard(doc, "reject", path="event")
    error = err.value
    assert isinstance(error, AcmiValidationError)
    assert (error.field, error.rule) == ("event.payload.old", "github_token")
    assert "1 more finding" in error.message and GITHUB_PAT not in error.message
    assert [f.rule for f in error.findings if isinstance(f, Finding)] == [
        "github_token",
        "password",
    ]
    stored = guard(doc, "redact", path="event")
    assert stored["payload"] == {
        "old": "[REDACTED:github_token]",
        "pin": "password: [REDACTED:password]",
    }
    assert guard({"summary": "fine"}, "reject") == {"summary": "fine"}


def test_check_policy() -> None:
    assert check_policy("reject") == "reject" and check_policy("redact") == "redact"
    with pytest.raises(AcmiValidationError) as err:
        check_policy("warn")
    assert (err.value.field, err.value.rule) == ("secret_policy", "enum")


# --- cost ----------------------------------------------------------------------------------------

MB = 1 << 20

# Near-misses of every rule, each the worst case for a backtracking regex: long runs of a
# token's characters with no end, prefixes with nothing after, BEGIN without END.
ADVERSARIAL = {
    "mixed near-misses": "".join(
        (
            "AKIA" + "A" * 15 + " ",
            "ghp_" + "a" * 35 + " ",
            "eyJ" + "a" * 50 + ".",
            "password=abc ",
            "xoxb-1-2-",
            "-----BEGIN RSA PRIVATE KEY----- ",
            "4111 1111 1111 111 ",
            "Bearer abc ",
            "://u:p ",
            "GB82 WEST ",
            "123-45-678 ",
            "api_key=short ",
            "AB 12 34 5 ",
            "SG.abc.def ",
        )
    ),
    "one token run": "eyJ",
    "token parts": "eyJab.",
    "digits": "4",
    "digit groups": "4111 ",
    "digits and dashes": "1-",
    "private key without END": "-----BEGIN RSA PRIVATE KEY-----\n" + "A" * 40 + "\n",
    "password= run": "password=",
    "quoted password run": 'password="',
    "bearer run": "Bearer ",
    "url credentials run": "://a:",
    "capitals and digits": "GB82",
    "slack run": "xoxb-1-",
}


def _seconds(text: str) -> float:
    best = float("inf")
    for _ in range(2):
        start = time.perf_counter()
        scan(text)
        best = min(best, time.perf_counter() - start)
    return best


@pytest.mark.slow  # ~15 MB scanned
def test_scanning_is_linear_on_adversarial_input() -> None:
    """Every 1 MB near-miss string costs a small multiple of 1 MB of ordinary prose (a
    quadratic regex would cost thousands of times more). Ratios, measured interleaved."""
    prose = (PROSE * (MB // len(PROSE) + 1))[:MB]
    ratios: dict[str, float] = {}
    for name, unit in ADVERSARIAL.items():
        attack = (unit * (MB // len(unit) + 1))[:MB]
        plain = _seconds(prose)
        ratios[name] = _seconds(attack) / plain
    print({name: round(ratio, 2) for name, ratio in ratios.items()})
    assert max(ratios.values()) < 8, ratios


def _strings(value: object) -> int:
    """How many strings a JSON value holds, object keys included."""
    if isinstance(value, str):
        return 1
    if isinstance(value, dict):
        return sum(1 + _strings(child) for child in value.values())
    if isinstance(value, list):
        return sum(_strings(child) for child in value)
    return 0


def test_a_typical_event_is_linear(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 1 KB event is scanned once per string, and 100 of them in one payload cost
    exactly 100 times one: counted in characters handed to the text rules, not timed
    (its time per KB is `python -m bench`'s to measure)."""
    from acmi_core.guard import secrets as secrets_module

    event = {
        "source": "agent:atlas",
        "kind": "note",
        "correlationId": "c-8812",
        "summary": "Reconciled November invoices: 412 of 412 match after the rounding fix",
        "ts": 1764500000000,
        "payload": {
            "invoices": 412,
            "currency": "EUR",
            "total": "61250.00",
            "notes": " ".join(PROSE.splitlines()[60:72]),
            "links": ["https://github.com/acme/app/pull/1284"],
            "headers": {"x-request-id": "123e4567-e89b-12d3-a456-426614174000"},
            "tags": ["billing", "reconciliation", "november"],
        },
    }
    size = len(json.dumps(event))
    assert 900 <= size <= 1200
    scanned: list[int] = []
    text_spans = secrets_module._text_spans

    def counted(text: str) -> list[tuple[int, int, str]]:
        scanned.append(len(text))
        return text_spans(text)

    monkeypatch.setattr(secrets_module, "_text_spans", counted)
    assert scan(event) == []
    one_calls, one_chars = len(scanned), sum(scanned)
    # every key and string value once: less text than the event's JSON, never a multiple
    assert one_calls == _strings(event) and one_chars < size, (one_calls, one_chars)
    scanned.clear()
    assert scan({"events": [event] * 100}) == []
    assert (len(scanned), sum(scanned)) == (100 * one_calls + 1, 100 * one_chars + 6)
