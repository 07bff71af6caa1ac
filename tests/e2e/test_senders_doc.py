"""docs/senders.md, run as a reader would paste it: each section's ``<!-- run: name -->``
block goes to bash (the installed ``acmi``, curl, jq, openssl) against a real app served
on a real redis-server, with a fresh ACMI_HOME, and what it prints must be the section's
``<!-- output: name -->`` block once the per-run values the doc marks are normalised."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from acmi_core import Settings, create_acmi
from acmi_core.api.app import create_app
from acmi_core.api.context import ApiContext
from acmi_core.auth.google_oidc import GoogleTokenVerifier
from acmi_core.store import open_store
from acmi_core.testing.redis_server import RedisServer
from tests.kit import ROOT, TEST_DBS, console_script, load_event, serving

DOC_PATH = ROOT / "docs" / "senders.md"
DOC = DOC_PATH.read_text(encoding="utf-8")
DB = TEST_DBS["senders_doc"]  # this module's own database (tests/kit.py TEST_DBS)
BIN = str(Path(console_script()).parent)

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")


def block(kind: str, name: str) -> str:
    """The fenced block right after ``<!-- kind: name -->``."""
    match = re.search(rf"<!-- {kind}: {re.escape(name)} -->\n```\w*\n(.*?)```", DOC, re.S)
    assert match, f"{DOC_PATH.name} has no {kind} block {name!r}"
    return match.group(1)


def sections() -> list[str]:
    return re.findall(r"<!-- run: ([\w-]+) -->", DOC)


@dataclass(frozen=True)
class Served:
    url: str
    env: dict[str, str]
    google_key: rsa.RSAPrivateKey  # the test's own Google: the app trusts only its key


def google_token(served: Served, section: str) -> str:
    """What Pub/Sub puts in ``Authorization``: signed for the audience and service account
    the section's ``acmi sources set`` names (the endpoint on the served app)."""
    email = re.search(r"--oidc-email (\S+)", block("run", section))
    assert email, f"{section}: no --oidc-email"
    now = int(time.time())
    claims = {
        "iss": "https://accounts.google.com",
        "aud": f"{served.url}/v1/ingest/gmail",
        "email": email.group(1),
        "email_verified": True,
        "sub": "1234",
        "iat": now,
        "exp": now + 3600,
    }
    return jwt.encode(claims, served.google_key, algorithm="RS256", headers={"kid": "k1"})


@pytest.fixture(scope="module")
def served(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    redis_server.flush(DB)
    home = tmp_path_factory.mktemp("acmi-home")
    # the reader's shell: none of this machine's ACMI or Upstash settings, the store's URL
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACMI_", "UPSTASH_"))}
    env |= {
        "ACMI_REDIS_URL": redis_server.url_for(DB),
        "ACMI_HOME": str(home),
        "ACMI_CONFIG": str(home / "none.toml"),
        "PATH": f"{BIN}:{env.get('PATH', '/usr/bin:/bin')}",
        "NO_COLOR": "1",
    }
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
    jwks = {"keys": [{**jwk, "kid": "k1", "alg": "RS256", "use": "sig"}]}
    google = GoogleTokenVerifier(fetch_jwks=lambda: (jwks, 3600))
    settings = Settings.from_env(env)
    store = open_store(settings)
    try:
        ctx = ApiContext(create_acmi(store, settings), offload=True, google=google)
        with serving(create_app(ctx)) as url:
            yield Served(url, env | {"ACMI_URL": url}, key)
    finally:
        store.close()


def normalised(text: str, url: str) -> str:
    """The values a run cannot repeat, as the doc marks them."""
    text = text.replace(url, "<ACMI_URL>")
    text = re.sub(r"token=[A-Za-z0-9_-]{16,}", "token=<push token>", text)
    text = re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\dZ", "<time>", text)
    return re.sub(r'"ts": \d{13}', '"ts": <ts>', text)


def run(section: str, served: Served) -> str:
    env = dict(served.env)
    if "GOOGLE_OIDC_TOKEN" in block("run", section):
        env["GOOGLE_OIDC_TOKEN"] = google_token(served, section)
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block("run", section)],
        check=False,
        env=env,
        cwd=served.env["ACMI_HOME"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, (section, done.stdout, done.stderr)
    return normalised(done.stdout, served.url)


def test_every_section_has_its_output_and_every_shell_block_runs() -> None:
    assert sections() == ["make", "n8n", "slack", "github", "gmail"], sections()
    for section in sections():
        assert "FILL" not in block("output", section), section
    # a shell block the test does not run could go stale unseen
    shell = re.findall(r"(?:(<!-- run: [\w-]+ -->)\n)?```(?:bash|sh|shell)\n", DOC)
    assert shell and all(shell), "every shell block in docs/senders.md is marked <!-- run: ... -->"


@pytest.mark.parametrize("section", ["make", "n8n", "slack", "github"])
def test_a_section_posts_the_senders_captured_body(section: str) -> None:
    """The body a section posts is its sender's captured one (events/ingest.<source>.json),
    so the doc shows what the sender really sends, and both change together."""
    shell = block("run", section)
    found = re.search(r"<<'BODY'\n(.*?)\nBODY\n", shell, re.S) or re.search(
        r"^body='(.*)'$", shell, re.M
    )
    assert found, f"{section}: no body in its run block"
    assert json.loads(found.group(1)) == json.loads(load_event(f"ingest.{section}")["body"])


@pytest.mark.slow  # fresh interpreters: every `acmi` line is one
@pytest.mark.parametrize("section", sections())
def test_a_section_prints_what_the_doc_shows(section: str, served: Served) -> None:
    printed = run(section, served)
    if os.environ.get("ACMI_SENDERS_DOC_SHOW"):  # how the doc's outputs were taken
        print(f"----- {section}\n{printed}-----")
    assert printed == block("output", section)
