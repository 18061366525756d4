"""``memory.rerank``: the reranker's settings, a section of
:class:`tiermem.config.model.TiermemConfig`.

It lives with the rerankers (config/model.py holds the other sections and is at the house's
700-line limit); it validates like them: unknown keys are errors with a "did you mean",
``${ENV}`` and ``${{ secrets.NAME }}`` are interpolated before it sees a value, and the
key is a ``SecretStr``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from tiermem.errors import ConfigError
from tiermem.rerank.factory import parse_spec


class RerankConfig(BaseModel):
    """``memory.rerank``: an optional second stage that scores the best candidates again
    with a cross-encoder, a ``/rerank`` API or the chat model (docs/rerank.md). Off
    (``provider: null``) by default."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, validate_default=True)

    provider: str | None = Field(
        default=None,
        description="onnx:/path, cohere/<model>, jina/<model>, voyage/<model>, tei:<url> or "
        "llm (the chat model); null: off.",
    )
    top_n: int = Field(default=30, gt=0, le=1000, description="Best candidates sent to it.")
    weight: float = Field(
        default=1.0,
        ge=0,
        le=1,
        description="Share of the reranker's score in a candidate's relevance (1: replaces it).",
    )
    timeout: float = Field(
        default=2.0,
        gt=0,
        description="Seconds a read waits for it; late or failing, the first-stage order stays.",
    )
    api_key: SecretStr | None = Field(
        default=None, description="The API's key; else $COHERE_API_KEY, $JINA_API_KEY..."
    )
    base_url: str | None = Field(
        default=None, description="Another server speaking the API (a proxy, vLLM, TEI)."
    )

    @field_validator("provider")
    @classmethod
    def _known_provider(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                parse_spec(value)
            except ConfigError as exc:
                raise ValueError(f"{exc.problem} ({exc.hint})") from None
        return value

    @model_validator(mode="after")
    def _tei_url(self) -> RerankConfig:
        if self.provider is not None and not self.base_url:
            spec = parse_spec(self.provider)
            if spec.provider == "tei" and not spec.target:
                raise ValueError(
                    "provider tei needs the URL of your server: write tei:http://host:8080 "
                    "or set base_url"
                )
        return self

    @property
    def enabled(self) -> bool:
        return self.provider is not None

    def provider_options(self) -> dict[str, Any]:
        """Keyword options for ``get_reranker`` (a read retries a failed call once)."""
        options: dict[str, Any] = {"timeout": self.timeout, "max_retries": 1}
        if self.base_url:
            options["base_url"] = self.base_url
        if self.api_key is not None:
            options["api_key"] = self.api_key.get_secret_value()
        return options
