"""The secret rules: ``RULES``, a table of text rules, most specific first (where two
match overlapping text, the earlier one wins).

Every rule is a provider's documented prefix and length, a checksum, or a key/value form
whose value must look like a credential (the checks in ``acmi_core.guard.checks``).
Linear time: every pattern starts at a token boundary (a fixed-width look-behind), its
repeats are bounded or possessive over a class that excludes what follows. The scanner
that runs them is ``acmi_core.guard.secrets``; the pre-filter that proves a value needs
no scan, from the same table, is ``acmi_core.guard.prefilter``. A new rule comes with a
fake in ``tests/unit/secret_corpus.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from acmi_core.guard.checks import (
    aws_secret,
    basic,
    card_text,
    jwt,
    keyed_password,
    random_like,
    ssn,
    text_password,
)

_TOKEN: Final = "A-Za-z0-9"


@dataclass(frozen=True, slots=True)
class Rule:
    """A text rule: its regex runs only when one of ``triggers`` occurs in the string
    (or its lower-case copy when ``fold``); ``check`` vets each match (a checksum, a
    credential-like value); the ``secret`` group, when the pattern has one, is what is
    redacted (``Bearer`` and ``password=`` stay)."""

    id: str
    text: str
    pattern: str
    triggers: tuple[str, ...] = ()
    fold: bool = False
    check: Callable[[str], bool] | None = None


def _b(prefix: str, body: str, cls: str = _TOKEN + "_-", after: str | None = None) -> str:
    """``prefix`` then ``body``, neither inside a longer token: a fixed-width look-behind
    after the literal prefix (so the regex engine still searches for the literal fast),
    and a look-ahead after the body (over ``after``, by default the same class)."""
    return rf"{prefix}(?<![{cls}]{prefix}){body}(?![{after if after is not None else cls}])"


_VALUE: Final = (  # "quoted", 'quoted' or bare, one token
    r"""(?:"(?P<q1>[^"\s]{1,256}+)"|'(?P<q2>[^'\s]{1,256}+)'"""
    r"""|(?P<bare>[^\s"'`,;<>(){}\[\]]{1,256}+))"""
)
_ASSIGN: Final = r"""["']?[ \t]{0,3}(?::|=|:=)[ \t]{0,3}"""
_PASSWORD_WORDS: Final = r"p(?:assword|asswd|assphrase|wd)(?![a-z])"
_SECRET_WORDS: Final = (
    r"(?:api[_-]?key|api[_-]?secret|client[_-]?secret|secret[_-]?key|app[_-]?secret"
    r"|(?:access|auth|api|bearer|refresh|session|bot|rest|private)[_-]?token"
    r"|secret[_-]?access[_-]?key)(?![a-z])"
)

# Most specific first: where two rules match overlapping text, the earlier one wins.
RULES: Final[tuple[Rule, ...]] = (
    Rule(
        "private_key",
        "a private key block",
        "",  # found by _private_keys: its END line is searched once per block
        ("-----BEGIN",),
    ),
    Rule(
        "aws_access_key_id",
        "an AWS access key id",
        _b("(?:AKIA|ASIA|ABIA|ACCA)", "[A-Z2-7]{16}", _TOKEN),
        ("AKIA", "ASIA", "ABIA", "ACCA"),
    ),
    Rule(
        "github_token",
        "a GitHub token",
        _b("gh[pousr]_", "[A-Za-z0-9]{36,251}+") + "|" + _b("github_pat_", "[A-Za-z0-9_]{82}"),
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    Rule(
        "gitlab_token",
        "a GitLab token",
        "|".join(
            _b(prefix, "[A-Za-z0-9_-]{20,200}+")
            for prefix in ("glpat-", "glptt-", "gldt-", "glrt-", "glcbt-", "gloas-")
        ),
        ("glpat-", "glptt-", "gldt-", "glrt-", "glcbt-", "gloas-"),
    ),
    Rule(
        "slack_token",
        "a Slack token",
        _b("xox[abeoprs]-", "(?:[0-9]+-)++[A-Za-z0-9-]{8,250}+")
        + "|"
        + _b("xapp-", "[0-9]-[A-Z0-9]{8,}+-[0-9]{8,}+-[a-f0-9]{40,}+"),
        ("xox", "xapp-"),
    ),
    Rule(
        "slack_webhook",
        "a Slack webhook URL",
        r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<secret>T[A-Z0-9]{6,}+/[A-Za-z0-9/_-]{20,200}+)",
        ("hooks.slack.com/",),
    ),
    Rule(
        "discord_webhook",
        "a Discord webhook URL",
        r"discord(?:app)?\.com/api/webhooks/[0-9]{10,}+/(?P<secret>[A-Za-z0-9_-]{60,100}+)",
        ("/api/webhooks/",),
    ),
    Rule(
        "stripe_secret_key",
        "a Stripe secret or restricted key",
        _b("(?:sk|rk)_(?:live|test)_", "[A-Za-z0-9]{20,247}+"),
        ("sk_live_", "rk_live_", "sk_test_", "rk_test_"),
    ),
    Rule(
        "stripe_webhook_secret",
        "a Stripe webhook signing secret",
        _b("whsec_", "[A-Za-z0-9+/=]{24,100}+"),
        ("whsec_",),
    ),
    Rule(
        "anthropic_api_key",
        "an Anthropic API key",
        _b("sk-ant-", "[a-z]{2,8}[0-9]{2}-[A-Za-z0-9_-]{80,200}+"),
        ("sk-ant-",),
    ),
    Rule(
        "openai_api_key",
        "an OpenAI API key",
        _b("sk-", "(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,250}+")
        + "|"
        + _b("sk-", "[A-Za-z0-9]{48}")
        + "|"
        + _b("sk-", "[A-Za-z0-9_-]{10,100}T3BlbkFJ[A-Za-z0-9_-]{10,100}+"),
        ("sk-",),
        check=random_like,
    ),
    Rule(
        "google_api_key",
        "a Google API key",
        _b("AIza", "[A-Za-z0-9_-]{35}"),
        ("AIza",),
    ),
    Rule(
        "google_oauth",
        "a Google OAuth client secret or access token",
        _b("GOCSPX-", "[A-Za-z0-9_-]{28}")
        + "|"
        + _b(r"ya29\.", r"[A-Za-z0-9_-]{30,}+", _TOKEN + "_.-"),
        ("GOCSPX-", "ya29."),
    ),
    Rule(
        "twilio_api_key",
        "a Twilio API key",
        _b("SK", "[0-9a-f]{32}", _TOKEN),
        ("SK",),
    ),
    Rule(
        "sendgrid_api_key",
        "a SendGrid API key",
        _b(r"SG\.", r"[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}", _TOKEN + "_.-"),
        ("SG.",),
    ),
    Rule("npm_token", "an npm access token", _b("npm_", "[A-Za-z0-9]{36}"), ("npm_",)),
    Rule(
        "pypi_token",
        "a PyPI API token",
        _b("pypi-", "AgE(?:IcHlwaS5vcmc|NdGVzdC5weXBpLm9yZw)[A-Za-z0-9_-]{50,}+"),
        ("pypi-Ag",),
    ),
    Rule("huggingface_token", "a Hugging Face token", _b("hf_", "[A-Za-z]{34}"), ("hf_",)),
    Rule(
        "digitalocean_token",
        "a DigitalOcean token",
        _b("do[por]_v1_", "[a-f0-9]{64}"),
        ("dop_v1_", "doo_v1_", "dor_v1_"),
    ),
    Rule(
        "shopify_token",
        "a Shopify access token",
        _b("shp(?:at|ca|pa|ss)_", "[a-fA-F0-9]{32}"),
        ("shpat_", "shpca_", "shppa_", "shpss_"),
    ),
    Rule(
        "upstash_qstash_token",
        "an Upstash QStash token",
        _b("eyJVc2VySUQiOi", "[A-Za-z0-9+/=_-]{20,}+", _TOKEN + "+/=_-"),
        ("eyJVc2VySUQiOi",),
    ),
    Rule(
        "age_secret_key",
        "an age secret key",
        _b("AGE-SECRET-KEY-1", "[0-9A-Z]{58}"),
        ("AGE-SECRET-KEY-1",),
    ),
    Rule(
        "jwt",
        "a JSON Web Token",
        _b(
            "eyJ",
            r"[A-Za-z0-9_-]{5,}+\.[A-Za-z0-9_-]{2,}+\.[A-Za-z0-9_-]*+",
            _TOKEN + "_.-",
            _TOKEN + "_-",  # a token may end a sentence: "... its signature."
        ),
        ("eyJ",),
        check=jwt,
    ),
    Rule(
        "aws_secret_access_key",
        "an AWS secret access key",
        rf"(?:secret[_-]?access[_-]?key|aws[_-]?secret(?:[_-]?key)?){_ASSIGN}[\"']?"
        r"(?P<secret>(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=]))",
        ("secret",),
        fold=True,
        check=aws_secret,
    ),
    Rule(
        "bearer_token",
        "a bearer token",
        r"bearer[ \t]{1,4}+(?P<secret>[A-Za-z0-9._~+/=-]{16,4096}+)",
        ("bearer",),
        fold=True,
        check=random_like,
    ),
    Rule(
        "basic_auth",
        "HTTP basic credentials",
        r"basic[ \t]{1,4}+(?P<secret>[A-Za-z0-9+/]{8,4096}+={0,2})(?![A-Za-z0-9+/=])",
        ("basic",),
        fold=True,
        check=basic,
    ),
    Rule(
        "url_credentials",
        "a password in a URL",
        r"://[^\s:/@]{1,256}+:(?P<secret>[^\s:/@]{3,256}+)@",
        ("://",),
        check=keyed_password,
    ),
    Rule(
        "password",
        "a password in key/value form",
        rf"{_PASSWORD_WORDS}{_ASSIGN}{_VALUE}",
        ("pass", "pwd"),
        fold=True,
        check=text_password,
    ),
    Rule(
        "secret_assignment",
        "a secret, API key or token in key/value form",
        rf"{_SECRET_WORDS}{_ASSIGN}{_VALUE}",
        ("key", "secret", "token"),
        fold=True,
        check=random_like,
    ),
    Rule(
        "card_number",
        "a payment card number",
        r"[0-9](?<![0-9.][0-9])(?:[ -]?+[0-9]){12,18}(?![0-9]|[ -][0-9])",
        check=card_text,
    ),
    Rule(
        "us_ssn",
        "a US social security number",
        r"[0-9]{3}(?<![0-9-][0-9]{3})-[0-9]{2}-[0-9]{4}(?![0-9]|-[0-9])",
        check=ssn,
    ),
    Rule(
        "uk_nino",
        "a UK national insurance number",
        r"(?<![A-Za-z0-9])(?!BG|GB|KN|NK|NT|TN|ZZ)[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z]"
        r" ?[0-9]{2} ?[0-9]{2} ?[0-9]{2} ?[A-D](?![A-Za-z0-9])",
    ),
    Rule(
        "iban",
        "an IBAN (bank account number)",
        # possessive groups: a run of capitals is split one way only; iban_span then
        # takes the country's length and checks the boundary after it
        r"(?<![A-Za-z0-9])[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{1,4}+){2,8}+",
    ),
)
