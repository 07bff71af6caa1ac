"""Example 04: an OpenAI model reviews a diff; the review goes on the repository's
timeline as a `code-review` event.

    pip install 'acmi[examples]'          # or just: pip install openai httpx
    export ACMI_API_URL=http://127.0.0.1:8000 ACMI_API_KEY=<key> OPENAI_API_KEY=<key>
    git diff main | python examples/04_openai.py repo:website
"""

from __future__ import annotations

import hashlib
import os
import sys

import httpx
import openai

MODEL = os.environ.get("OPENAI_MODEL", "gpt-4.1-mini")


def acmi_client() -> httpx.Client:
    url = os.environ.get("ACMI_API_URL", "http://127.0.0.1:8000").rstrip("/")
    key = os.environ["ACMI_API_KEY"]
    return httpx.Client(base_url=url, headers={"authorization": f"Bearer {key}"}, timeout=30)


def main(argv: list[str] | None = None, diff: str | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    repo = args[0] if args else "repo:website"
    diff = sys.stdin.read() if diff is None else diff
    if not diff.strip():
        print("no diff on stdin", file=sys.stderr)
        return 2
    client = openai.OpenAI()  # OPENAI_API_KEY, OPENAI_BASE_URL from the env
    completion = client.chat.completions.create(
        model=MODEL,
        messages=[
            {"role": "system", "content": "You review code. Answer: verdict, then findings."},
            {"role": "user", "content": f"Review this diff:\n\n{diff}"},
        ],
    )
    review = (completion.choices[0].message.content or "").strip()
    # The same diff reviewed twice is one event: the correlationId is the diff's hash and
    # an Idempotency-Key makes a retried POST answer as the first one did.
    digest = hashlib.sha256(diff.encode()).hexdigest()[:16]
    event = {
        "source": "agent:codex",
        "kind": "code-review",
        "correlationId": f"review-{digest}",
        "summary": review[:500],
        "review": review,
        "model": completion.model,
    }
    acmi_client().post(
        f"/v1/entities/{repo}/events", json=event, headers={"Idempotency-Key": f"review-{digest}"}
    ).raise_for_status()
    print(review)
    return 0


if __name__ == "__main__":
    sys.exit(main())
