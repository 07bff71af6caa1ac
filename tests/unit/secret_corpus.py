"""The secret guard's corpus: real-format secrets (fake: right prefix, length, alphabet and
checksum, made here from a seeded generator so no scanner mistakes this file for a leak and
no real credential is in it), innocent look-alikes, and ordinary agent-memory prose.

Cards are the networks' published test numbers; the SSN is a valid shape in an area never
published as an example; the IBANs are ISO 13616's own examples."""

from __future__ import annotations

import base64
import json
import random
import string
from typing import Final

_RNG = random.Random(20261130)
ALNUM: Final = string.ascii_letters + string.digits
B64: Final = ALNUM + "+/"
URLSAFE: Final = ALNUM + "_-"
HEX: Final = "0123456789abcdef"
BASE32: Final = string.ascii_uppercase + "234567"


def fake(alphabet: str, length: int) -> str:
    """Random text over ``alphabet`` with at least one digit and both cases where the
    alphabet has them (as a real key almost always has)."""
    while True:
        text = "".join(_RNG.choice(alphabet) for _ in range(length))
        if all(
            any(c in group for c in text)
            for group in (string.digits, string.ascii_lowercase, string.ascii_uppercase)
            if any(c in group for c in alphabet)
        ):
            return text


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwt() -> str:
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = _b64url(json.dumps({"sub": "user:42", "iat": 1764500000}).encode())
    return f"{header}.{payload}.{fake(URLSAFE, 43)}"


def pem(kind: str) -> str:
    body = "\n".join(fake(B64, 64) for _ in range(6))
    return f"-----BEGIN {kind}-----\n{body}\n-----END {kind}-----"


AWS_KEY_ID: Final = "AKIA" + fake(BASE32, 16)
AWS_SECRET: Final = fake(B64, 40)
GITHUB_PAT: Final = "ghp_" + fake(ALNUM, 36)

# (name, text as it would be written into memory, the rule that must find it)
SECRETS: Final[list[tuple[str, str, str]]] = [
    ("aws key id", f"aws_access_key_id = {AWS_KEY_ID}", "aws_access_key_id"),
    ("aws temporary key id", "deploy creds ASIA" + fake(BASE32, 16), "aws_access_key_id"),
    ("aws secret key", f"aws_secret_access_key = {AWS_SECRET}", "aws_secret_access_key"),
    ("aws secret key, env", f"AWS_SECRET_ACCESS_KEY={fake(B64, 40)}", "aws_secret_access_key"),
    ("github classic", f"use {GITHUB_PAT} for the release job", "github_token"),
    ("github oauth", "gho_" + fake(ALNUM, 36), "github_token"),
    ("github fine-grained", "github_pat_" + fake(ALNUM + "_", 82), "github_token"),
    ("gitlab", "GITLAB_TOKEN is glpat-" + fake(URLSAFE, 20), "gitlab_token"),
    (
        "slack bot",
        f"xoxb-{_RNG.randrange(10**11, 10**12)}-{_RNG.randrange(10**12, 10**13)}-{fake(ALNUM, 24)}",
        "slack_token",
    ),
    (
        "slack user",
        f"token xoxp-{_RNG.randrange(10**10, 10**11)}-{_RNG.randrange(10**10, 10**11)}"
        f"-{_RNG.randrange(10**11, 10**12)}-{fake(HEX, 32)}",
        "slack_token",
    ),
    (
        "slack webhook",
        "post to https://hooks.slack.com/services/T"
        + fake(string.ascii_uppercase + string.digits, 8)
        + "/B"
        + fake(string.ascii_uppercase + string.digits, 10)
        + "/"
        + fake(ALNUM, 24),
        "slack_webhook",
    ),
    (
        "discord webhook",
        f"https://discord.com/api/webhooks/{_RNG.randrange(10**17, 10**18)}/{fake(URLSAFE, 68)}",
        "discord_webhook",
    ),
    ("stripe live secret", "STRIPE_KEY sk_live_" + fake(ALNUM, 24), "stripe_secret_key"),
    ("stripe restricted", "rk_live_" + fake(ALNUM, 99), "stripe_secret_key"),
    ("stripe test secret", "sk_test_" + fake(ALNUM, 24), "stripe_secret_key"),
    ("stripe webhook secret", "whsec_" + fake(ALNUM, 32), "stripe_webhook_secret"),
    ("openai project", "OPENAI_API_KEY=sk-proj-" + fake(URLSAFE, 156), "openai_api_key"),
    ("openai legacy", "sk-" + fake(ALNUM, 20) + "T3BlbkFJ" + fake(ALNUM, 20), "openai_api_key"),
    (
        "anthropic",
        "key: sk-ant-api03-" + fake(URLSAFE, 93) + "AA",
        "anthropic_api_key",
    ),
    ("google api key", "maps key AIza" + fake(URLSAFE, 35), "google_api_key"),
    ("google oauth secret", "GOCSPX-" + fake(URLSAFE, 28), "google_oauth"),
    ("google access token", "ya29.a0" + fake(URLSAFE, 120), "google_oauth"),
    ("twilio api key", "twilio SK" + fake(HEX, 32), "twilio_api_key"),
    ("sendgrid", f"SG.{fake(URLSAFE, 22)}.{fake(URLSAFE, 43)}", "sendgrid_api_key"),
    ("npm", "//registry.npmjs.org/:_authToken=npm_" + fake(ALNUM, 36), "npm_token"),
    ("pypi", "password = pypi-AgEIcHlwaS5vcmc" + fake(URLSAFE, 70), "pypi_token"),
    ("hugging face", "HF_TOKEN hf_" + fake(string.ascii_letters, 34), "huggingface_token"),
    ("digitalocean", "dop_v1_" + fake(HEX, 64), "digitalocean_token"),
    ("shopify", "shpat_" + fake(HEX, 32), "shopify_token"),
    ("upstash qstash", "eyJVc2VySUQiOi" + fake(B64, 60) + "=", "upstash_qstash_token"),
    (
        "age",
        "AGE-SECRET-KEY-1" + fake(string.ascii_uppercase + string.digits, 58),
        "age_secret_key",
    ),
    ("rsa private key", pem("RSA PRIVATE KEY"), "private_key"),
    ("openssh private key", "id_ed25519:\n" + pem("OPENSSH PRIVATE KEY"), "private_key"),
    ("pkcs8 key, truncated", pem("PRIVATE KEY")[:200], "private_key"),
    ("jwt", f"session {jwt()}", "jwt"),
    ("bearer", "Authorization: Bearer " + fake(URLSAFE + ".", 40), "bearer_token"),
    (
        "basic auth",
        "Authorization: Basic " + base64.b64encode(b"deploy:W1nter-is-coming").decode(),
        "basic_auth",
    ),
    ("url credentials", "postgres://app:S3cr3tPw@db.internal:5432/app", "url_credentials"),
    ("password=", "login with password=hunter2!", "password"),
    ("yaml password", "db_password: Tr0ub4dor&3", "password"),
    ("json in a string", '{"user": "ops", "pwd": "p4ssW0rd!"}', "password"),
    ("the seed's dangerous example", "- Password: MyS3cretP@ss!", "password"),
    ("api_key=", "api_key=" + fake(ALNUM, 32), "secret_assignment"),
    ("client secret", 'client_secret: "' + fake(URLSAFE, 40) + '"', "secret_assignment"),
    ("visa, grouped", "card 4111 1111 1111 1111 exp 12/29", "card_number"),
    ("mastercard", "paid with 5555555555554444", "card_number"),
    ("amex", "amex 3782-822463-10005", "card_number"),
    ("discover", "6011111111111117", "card_number"),
    ("jcb", "JCB 3530 1113 3330 0000", "card_number"),
    ("us ssn", "SSN 536-22-1987 on file", "us_ssn"),
    ("uk nino", "NI number JG 10 37 59 A", "uk_nino"),
    ("iban, grouped", "wire to GB82 WEST 1234 5698 7654 32 today", "iban"),
    ("iban, compact", "IBAN DE89370400440532013000", "iban"),
]

# Things that look like secrets and are not: none may be found.
INNOCENT: Final[list[tuple[str, str]]] = [
    ("order number, not Luhn", "Order #4111111111111112 shipped"),
    ("order number, no card network", "order 1234567890123456 refunded"),
    ("long id, not Luhn", "customer id 4532015112830367"),
    ("uuid", "request 123e4567-e89b-12d3-a456-426614174000 failed"),
    ("git sha", "fixed in commit 9fceb02d0ae598e95dc970b74767f19372d61af8"),
    (
        "hash in a url",
        "https://github.com/acme/app/blob/9fceb02d0ae598e95dc970b74767f19372d61af8/src/x.py",
    ),
    ("asset digest", "https://cdn.example.com/app." + "3b1f6a0c" * 8 + ".js"),
    ("docker digest", "image@sha256:" + "4d7a214614ab2935c943f9e0ff69d22e" * 2),
    ("password in prose", "I reset my password yesterday"),
    ("password reset", "Password reset link sent to the user at 09:14"),
    ("password rule", "Remember: the password must be at least 12 characters"),
    ("password status", "password: reset"),
    ("password manager", "The password manager is 1Password; the vault is Ops"),
    ("seed safe pattern 1", 'Database password: see secrets manager, item "prod-db"'),
    ("seed safe pattern 2", 'API keys: stored in 1Password vault "MyVault"'),
    ("truncated example key", "- API key: sk-abc123def456..."),
    ("password from env", "password: ${DB_PASSWORD}"),
    ("key named by env var", "api_key: OPENAI_API_KEY"),
    ("bearer in prose", "Send the bearer token in the Authorization header"),
    ("bearer placeholder", "Authorization: Bearer <token>"),
    ("phone, us", "call +1 (415) 555-2671 after lunch"),
    ("phone, uk", "office +44 20 7946 0958"),
    ("iso dates", "due 2026-11-30T13:32:27Z, moved from 2026-11-28"),
    ("ms timestamp", "ts 1732982400000 and 1732982400000000 (us)"),
    ("snowflake id", "tweet 1859283910283746561"),
    ("iban, bad checksum", "GB00 WEST 1234 5698 7654 32"),
    ("example ssn", "the SSA's example 078-05-1120"),
    ("invalid ssn area", "ref 666-12-3456 and 900-12-3456"),
    ("isbn", "ISBN 978-0-306-40615-7"),
    ("ups tracking", "tracking 1Z999AA10123456784"),
    ("stripe publishable", "pk_test_TYooMQauvdEDq54NiTphI7jx and pk_live_" + "a1B2c3D4" * 3),
    ("twilio account sid", "account AC" + "0123456789abcdef" * 2),
    ("aws arn", "role arn:aws:iam::123456789012:role/deploy"),
    ("slack ids", "channel C024BE91L, user U024BE7LH"),
    ("jwt-like without alg", _b64url(b'{"foo":"bar"}') + "." + _b64url(b'{"a":1}') + ".c2ln"),
    (
        "base64 image",
        "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
        "+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
    ),
    ("public key block", "-----BEGIN PUBLIC KEY-----\n" + "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8A" * 2),
    (
        "private key marker in prose",
        "files that start with -----BEGIN RSA PRIVATE KEY----- are keys",
    ),
    ("url without password", "https://user@example.com/path and https://example.com:8443/x"),
    ("secret in prose", "Our secret: ship small PRs daily."),
    ("token count", "token_count: 1532, max tokens: 3000"),
    ("card last four", "Visa ending 4242, expires 12/29"),
    ("uk postcode", "ship to SW1A 1AA"),
    ("version numbers", "bumped to v2.14.3 (build 20261130.4)"),
    ("basic in prose", "basic understanding of the billing flow"),
    ("float digits", "ratio 0.41111111111111111"),
]

# Ordinary agent memory: daily notes, decisions, people, numbers, ids, prose about
# passwords, keys and tokens that holds none. No line may be flagged.
PROSE: Final = """\
# MEMORY.md - long-term memory
## About the human
- Kalin prefers being told, not asked; he reads messages at 07:30 and 19:00 (Sofia time).
- Prefers short summaries with the decision first and the details after.
- Birthday: 14 March. Partner: Mira. Kids: two, ages 6 and 9.
- Hates meetings before 10:00; protect his mornings.
- Uses a password manager (1Password) for everything; never ask him to paste a password.
## About the agent
- I am Atlas, the ops agent for AcmeCo. Timezone UTC; reports at 08:00 UTC.
- I keep ACTIVE-CONTEXT.md under 50 lines and prune it every evening.
## Projects
- Billing migration: Stripe to the new invoicing flow, target close 2026-12-15.
- Client AcmeCo: $50K deal, Q2 close, champion is Dana (VP Ops).
- Website redesign: waiting on copy from marketing (ticket WEB-1423).
- Data warehouse: nightly load at 02:00 UTC, 1.2M rows, 14 minutes on average.
## People
- Dana Whitfield, VP Ops at AcmeCo: decisive, likes numbers, answers within the hour.
- Priya (engineering lead): owns the deploy pipeline; on call weeks 48 and 50.
- Tom from finance: sends the invoice batch every Friday around 16:00.
## Lessons
- Apollo.io free plan doesn't support the API.
- Always verify prospect names with a live search: 6 of 18 were wrong last time.
- The staging database password was rotated on 2026-11-02; the new one is in the vault.
- Never store secrets here: reference the vault item by name instead.
- A token budget of 3,000 keeps the wake bundle fast; above 5,000 it gets slow.
## Preferences
- Dates as YYYY-MM-DD, times in 24h, amounts with the currency symbol.
- Bullet lists over paragraphs; one emoji at most.
## Important dates
- 2026-12-15 billing migration go-live.
- 2027-01-10 annual planning offsite in Lisbon.
- 2027-03-31 end of Q1; quarterly archive runs the next day.

# ACTIVE-CONTEXT.md
## Current priority
- Finish the invoice reconciliation for November (412 invoices, 9 mismatched).
## In progress
- PR #1284 (retry webhook deliveries with backoff): review requested from Priya.
- Migrating the cron jobs to the scheduler: 6 of 9 done.
## Waiting on
- Dana: signed order form for the 2027 renewal (sent 2026-11-27).
- Finance: the credit note for order 100045873.
## Decisions
- 2026-11-28: keep Upstash for the cache; ElastiCache costs 4x at our volume.
- 2026-11-29: rotate the deploy key every 90 days; reminder set for 2027-02-27.
## Next session
- Re-run the reconciliation after Tom's batch lands.

# memory/2026-11-28.md
## Summary
Quiet day: the reconciliation script found 9 mismatches out of 412 invoices.
## Events
- [08:02] Morning brief sent to Kalin (3 items, 1 decision needed).
- [09:15] Dana asked for the Q4 usage report; sent at 10:40.
- [11:30] Webhook retries failing for order 100045873: the payment provider returned 502.
- [12:05] Opened incident INC-2291; root cause was an expired TLS certificate upstream.
- [14:20] Priya merged PR #1279 (idempotency keys for ingest).
- [16:45] Tom's invoice batch arrived: 38 invoices, total EUR 61,250.00.
- [18:10] Reset the password for the shared demo account (the new one is in 1Password).
## Decisions
- Keep the retry budget at 5 attempts with exponential backoff capped at 5 minutes.
## Lessons
- Check certificate expiry dates monthly; add to the audit checklist.
## Tomorrow
- Follow up with finance on the credit note.

# memory/2026-11-29.md
## Events
- [07:58] Brief sent; Kalin approved the retry budget.
- [09:00] Standup: billing migration is on track; 2 blockers cleared.
- [10:12] Call with Dana (25 min): renewal at $54K, 3-year term under discussion.
- [11:47] Customer 7781 reported a double charge of $129.00; refunded within 20 minutes.
- [13:30] Rotated the deploy key as decided; old key revoked at 13:41.
- [15:05] Commit 9fceb02 fixed the timezone bug in the weekly report.
- [17:20] Reviewed 14 support tickets; 3 escalated to engineering (SUP-881, SUP-884, SUP-890).
## Numbers
- MRR: $182,400 (+2.1% month over month).
- Churned accounts: 3; new accounts: 11.
- Average response time: 42 minutes.
## People
- Priya is out on 2026-12-03 and 2026-12-04; Marco covers the pipeline.

# memory/2026-11-30.md
## Events
- [06:55] Nightly load finished in 13m 48s (1,204,331 rows).
- [08:00] Brief sent.
- [08:40] Kalin: "Ship the reconciliation fix today." Noted as the current priority.
- [09:30] Found the 9 mismatches: all were currency rounding (0.01 differences).
- [10:05] Fix deployed to staging; reconciliation now matches 412 of 412.
- [12:00] Lunch reminder sent (Kalin asked for one on heavy days).
- [14:10] Deployed to production after Priya's approval; monitoring for 2 hours.
- [16:30] Invoice 2026-11-0412 re-sent to AcmeCo with the corrected total.
## Decisions
- Round per line item, not per invoice, from now on.

# memory/topics/billing-migration.md
## Overview
Move invoicing from the legacy system to the new flow by 2026-12-15.
## Key facts
- 1,842 active subscriptions; 96 on annual plans.
- Tax rates come from the tax service; never hard-code them.
- The webhook endpoint is /v1/ingest/billing; deliveries are signed and verified.
- API keys for the provider live in the secrets manager under billing/prod and billing/staging.
## Decision log
- 2026-10-14: chose the new flow over a rewrite (estimate: 6 weeks vs 14).
- 2026-11-02: staging cut-over done; 0 data loss, 3 minor bugs.
- 2026-11-20: production dry run on 10% of accounts.
## Open questions
- Do annual plans renew on the anniversary or on the 1st of the month?
- Who signs off on the final cut-over: Kalin or Dana?

# memory/topics/acmeco.md
## Overview
AcmeCo: 240 seats, renewal 2027-01-31, champion Dana, economic buyer Lars (CFO).
## History
- 2025-02-10 first contract, 120 seats at $40K.
- 2026-01-31 renewal, 200 seats at $48K.
- 2026-09-15 expansion to 240 seats.
## Notes
- Lars wants quarterly invoices; Dana wants a single annual one. Decision pending.
- Their security review asked how we store credentials: answer is "never in memory; vault only".
- Procurement portal login is handled by Dana's team; we never hold their password.

# memory/topics/deploys.md
## Overview
Deploys go through the pipeline; production needs one approval.
## Facts
- Average deploy: 7 minutes; rollback: 2 minutes.
- The deploy key is rotated every 90 days (next: 2027-02-27).
- Build cache lives in s3://acme-build-cache (versioned, 30-day lifecycle).
- Feature flags: billing_v2 (on in staging), weekly_digest (on), dark_mode (off).
## Decision log
- 2026-08-01: blue/green deploys for the API.
- 2026-10-20: canary at 5% for 30 minutes before a full rollout.

# memory/archive/2026-Q3.md
## Summary
- Closed 14 deals (total $612K); lost 5 (3 to price, 2 to timing).
- Shipped: webhooks v2, the usage dashboard, SSO for enterprise.
- Incidents: 4 (longest 47 minutes, a DNS misconfiguration on 2026-08-19).
## Lessons promoted
- Put the decision first in every summary.
- Verify every prospect name before outreach.
- Keep secrets out of notes; store the vault item's name instead.

# Daily log, free text
Met Dana at 10:00; she wants the Q4 numbers by Friday. I promised them for Thursday.
The keynote slides are in the shared drive under Sales/2026/Q4; version 7 is final.
Kalin's flight to Lisbon: TP 1234 on 2027-01-09, departs 07:35, arrives 09:50.
Hotel confirmation number 84C2-19QX; check-in after 15:00.
The office wifi changed; the new network name is Acme-5G and the password is on the fridge card.
Reminder: expense report due 2026-12-05 (receipts 1 to 23).
Priya asked whether the token limit for summaries can go to 4,000: yes, for the weekly review.
Customer 100234 asked to delete their data; request REQ-5521 opened, due in 30 days.
Sent the NDA to Lars; DocuSign envelope 7c1e5a9b-3f2d-4e8a-9b1c-2d3e4f5a6b7c.
Ordered 12 new laptops (PO 2026-11-0098, total $21,480); delivery expected 2026-12-08.
Found a bug in the report: week 48 showed 0 signups because of a timezone offset (UTC vs UTC+2).
The support phone line is +1 (415) 555-0132; the UK line is +44 20 7946 0123.
Kalin wants a running list of things to celebrate: the 1,000th customer was on 2026-11-12.
The password policy now requires 14 characters and a hardware key for admins.
A customer wrote that they forgot their password and the reset email went to spam.
Marco rotated the API key for the analytics export; the new key is stored under analytics/prod.
Weekly review: promoted 3 lessons, pruned 11 stale items from the active context.
The old CRM export (contacts_2025.csv, 18,442 rows) was archived to cold storage.
Reconciliation totals: EUR 61,250.00 invoiced, EUR 61,249.97 collected, 0.03 rounding.
Next maintenance: weekly review on 2026-12-06, quarterly archive on 2027-04-01.
Order 4111111111111112 was a test order from the QA team; ignore it in the numbers.
The shipment tracking number is 1Z999AA10123456784; it arrives Wednesday.
Git tag v3.8.0 points at 3f9a2c1d4e5b6a7980c1d2e3f4a5b6c7d8e9f0a1.
The dashboard URL is https://grafana.internal.acme.example/d/abc123/billing?orgId=1&from=now-7d.
Release notes draft: https://docs.example.com/releases/2026-11-30#billing-v2.
Priya's review comment: "nit: rename secret_name to vault_item for clarity".
Cache hit rate 94.2%; p95 latency 38 ms; p99 112 ms.
Standup moved to 09:30 on Mondays starting 2026-12-07.
Tom's question: is the bank transfer from AcmeCo the one with reference INV-2026-0412?
The DNS change for billing.example.com propagated at 11:20 UTC.
Three prospects replied: Northwind (interested), Contoso (later), Fabrikam (no budget).
Kalin's sister visits 2026-12-20 to 2026-12-27; block his calendar for the 24th and 25th.
The backup restore test passed: 2.3 GB restored in 6 minutes, checksums matched.
Reading list: "Designing Data-Intensive Applications", chapters 5 and 7.
I should ask before sharing anything from MEMORY.md in the group channel.
The quarterly board deck needs slides 4 to 9 updated with the new MRR figures.
Heartbeat: last review 2026-11-29, last archive 2026-10-01, 212 events this month.
Tom confirmed the wire for invoice 2026-11-0412 arrived on 2026-12-01 at 14:02.
Dana's assistant is Jordan; schedule through Jordan for anything longer than 30 minutes.
The support macro for "forgot password" now links to the self-service reset page.
Kalin's key decision this week: hire a second support engineer in January.
Moved the staging environment to the new region; latency dropped from 180 ms to 45 ms.
The Q4 OKR sheet has 4 objectives and 13 key results; 9 are on track.
Marco's PR #1291 adds pagination tokens to the export API (cursor-based, 500 items per page).
Customer survey: NPS 47 (n=312), up from 41 last quarter.
Lars asked for the SOC 2 report; shared through the trust portal, access expires 2027-01-15.
Pending: decide whether the weekly digest goes out on Mondays or Fridays.
Invoice INV-2026-0413 for $12,400.00 is due 2026-12-30 (net 30).
The on-call rotation for December: Priya (wk 49), Marco (wk 50), Priya (wk 51), Sam (wk 52).
Kalin wants the monthly audit to check for stale items older than 14 days in the active context.
Backlog grooming found 23 tickets older than 90 days; 17 closed as won't fix.
The API rate limit for the partner integration is 600 requests per minute per key.
Two-factor authentication is now mandatory for all admin accounts (since 2026-11-15).
Order 55501234 from Northwind: 40 seats, starts 2027-01-01, paid by bank transfer.
Archive policy: events older than 30 days are summarized into the quarter's archive file.
Sam joins on 2026-12-14 as the second support engineer; laptop ordered, accounts pending.
When in doubt, ask before exposing any memory content in a shared channel.
"""
