"""Every 15 minutes: a fresh rollup:latest for each entity whose timeline changed.

``ACMI_SUMMARIZER=bedrock:<model-id>`` summarizes with Amazon Bedrock, because acmi_core
never imports the AWS SDK: this module registers :class:`BedrockSummarizer` with
``acmi_core.jobs.summarizers``. Importing it does not import boto3; the ``bedrock-runtime``
client is built on the first Bedrock summary of the process (in the function's region,
``AWS_REGION``) and reused while warm, so a run with the extractive summarizer, or with
nothing to summarize, never pays for it.

One ``Converse`` request per summary: the prompt of the other LLM summarizers
(``summarizers.prompt``: the timeline fenced as data, under ``INSTRUCTIONS``), at most
``LLM_MAX_TOKENS`` tokens back. No retry (botocore's are off): a failed call costs the
run at most ``CONNECT_TIMEOUT_S`` + ``LLM_TIMEOUT_S``, then the extractive summary stands
in (``fallback_from`` on the rollup; the job stops calling after ``MAX_LLM_FAILURES``).
The function's policy allows ``bedrock:InvokeModel`` (what Converse needs) on foundation
models and the account's inference profiles (template.yaml).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from acmi_core.jobs.summarizers import (
    INSTRUCTIONS,
    LLM_MAX_TOKENS,
    LLM_TIMEOUT_S,
    SummarizerError,
    clip,
    prompt,
    register_summarizer,
)
from functions.runtime import job_handler

if TYPE_CHECKING:
    from acmi_core.base.settings import Settings
    from acmi_core.jobs.summarizers import Digest, Window

CONNECT_TIMEOUT_S: Final = 3.0


@functools.cache
def bedrock_client() -> Any:
    """The process's ``bedrock-runtime`` client: the region from ``AWS_REGION`` (set by
    Lambda) or boto3's own chain; one attempt per call. Not cached when it fails
    (``NoRegionError``): the next summary tries again."""
    import boto3
    from botocore.config import Config

    config = Config(
        connect_timeout=CONNECT_TIMEOUT_S,
        read_timeout=LLM_TIMEOUT_S,
        retries={"total_max_attempts": 1, "mode": "standard"},
    )
    return boto3.client(
        "bedrock-runtime", region_name=os.environ.get("AWS_REGION") or None, config=config
    )


class BedrockSummarizer:
    """``acmi_core.jobs.summarizers.Summarizer`` for ``bedrock:<model-id>``: one Converse call
    per window; every failure is a :class:`SummarizerError` naming the error, never the
    request."""

    def __init__(self, model: str, client: Callable[[], Any] = bedrock_client) -> None:
        self.model = model
        self._client = client

    @property
    def name(self) -> str:
        return f"bedrock:{self.model}"

    def summarize(self, window: Window, facts: Digest) -> str:
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            ConnectTimeoutError,
            ReadTimeoutError,
        )

        try:
            reply = self._client().converse(
                modelId=self.model,
                system=[{"text": INSTRUCTIONS}],
                messages=[{"role": "user", "content": [{"text": prompt(window, facts)}]}],
                inferenceConfig={"maxTokens": LLM_MAX_TOKENS},
            )
        except (ConnectTimeoutError, ReadTimeoutError):
            raise SummarizerError(f"{self.name}: no answer within {LLM_TIMEOUT_S:g} s") from None
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code") or "error"
            raise SummarizerError(f"{self.name}: Bedrock {code}") from None
        except BotoCoreError as exc:
            raise SummarizerError(f"{self.name}: {type(exc).__name__}") from None
        message = (reply.get("output") or {}).get("message") or {}
        texts = [
            block["text"]
            for block in message.get("content") or []
            if isinstance(block, dict) and isinstance(block.get("text"), str)
        ]
        text = "\n".join(texts).strip()
        if not text:
            raise SummarizerError(f"{self.name}: the answer holds no text")
        return clip(text)


def bedrock_summarizer(model: str, settings: Settings) -> BedrockSummarizer:
    """The ``bedrock`` factory: builds nothing AWS until the first summary."""
    return BedrockSummarizer(model)


register_summarizer("bedrock", bedrock_summarizer)
handler = job_handler("rollup-cron")
