"""The five memory layers under /v1/memory/{entity}/...

Importing ``functions.sinks.s3`` registers the S3 archive sink: ``POST .../archive``
and search's archived layer reach ``ACMI_ARCHIVE_URL`` through it.

``ACMI_EMBEDDINGS=bedrock:<model-id>`` (Amazon Titan text embeddings v2,
``amazon.titan-embed-text-v2:0``) embeds memory lines with Bedrock, because acmi_core
never imports the AWS SDK: this module registers :class:`BedrockEmbeddings` with
``acmi_core.memory.embeddings``. One ``InvokeModel`` a text (Titan takes one input a
request), 256 dimensions (what the index stores for wordllama too), normalised by the
service; the client is built on the first embedding of the process (``AWS_REGION``) and
reused while warm; one attempt each, so a failure costs a write its vectors (a later
search embeds them) and a search its semantic side, never the write."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

import functions.sinks.s3  # noqa: F401  (registers the s3 sink)
from acmi_core.memory.embeddings import EMBED_TIMEOUT_S, EmbeddingError, register_embedder
from functions.runtime import http_handler

if TYPE_CHECKING:
    from acmi_core.base.settings import Settings
    from acmi_core.memory.embeddings import Matrix

CONNECT_TIMEOUT_S: Final = 3.0
DIMENSIONS: Final = 256


@functools.cache
def bedrock_client() -> Any:
    """The process's ``bedrock-runtime`` client, one attempt a call."""
    import boto3
    from botocore.config import Config

    config = Config(
        connect_timeout=CONNECT_TIMEOUT_S,
        read_timeout=EMBED_TIMEOUT_S,
        retries={"total_max_attempts": 1, "mode": "standard"},
    )
    return boto3.client(
        "bedrock-runtime", region_name=os.environ.get("AWS_REGION") or None, config=config
    )


class BedrockEmbeddings:
    """``acmi_core.memory.embeddings.Embedder`` for ``bedrock:<model-id>``; every failure
    is an :class:`EmbeddingError` naming the error, never the text."""

    def __init__(self, model: str, client: Callable[[], Any] = bedrock_client) -> None:
        self.model = model
        self._client = client

    @property
    def name(self) -> str:
        return f"bedrock:{self.model}"

    def embed(self, texts: Sequence[str]) -> Matrix:
        import numpy as np
        from botocore.exceptions import BotoCoreError, ClientError

        rows = []
        for text in texts:
            body = {"inputText": text, "dimensions": DIMENSIONS, "normalize": True}
            try:
                reply = self._client().invoke_model(
                    modelId=self.model,
                    body=json.dumps(body),
                    contentType="application/json",
                    accept="application/json",
                )
                vector = json.loads(reply["body"].read())["embedding"]
            except ClientError as exc:
                code = exc.response.get("Error", {}).get("Code") or "error"
                raise EmbeddingError(f"{self.name}: Bedrock {code}") from None
            except BotoCoreError as exc:
                raise EmbeddingError(f"{self.name}: {type(exc).__name__}") from None
            except (ValueError, KeyError, TypeError):
                raise EmbeddingError(f"{self.name}: the answer holds no embedding") from None
            rows.append(vector)
        matrix = np.asarray(rows, np.float32).reshape(len(rows), -1)
        norms = np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
        out: Matrix = (matrix / norms).astype(np.float32)
        return out


def bedrock_embeddings(model: str, settings: Settings) -> BedrockEmbeddings:
    """The ``bedrock`` factory: builds nothing AWS until the first embedding."""
    return BedrockEmbeddings(model)


register_embedder("bedrock", bedrock_embeddings)
handler = http_handler("memory")
