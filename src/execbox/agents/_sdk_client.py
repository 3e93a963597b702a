"""What ``ModelClient`` and ``AnthropicClient`` share: the settings read
once (model, base URL, key, retries, prices), the usage they count, their
config as JSON-ready data, and an SDK's exceptions as a ``ModelError``.

A subclass names its ``provider``, the variable that holds its base URL,
its default URL and the hint for a wrong one, and opens its own SDK client.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any, ClassVar

from .._errors import ConfigurationError, ModelError
from ._usage import Usage

__all__ = ["SDKClient", "safe_name", "sdk_error"]


class SDKClient:
    """The half of a model client that does not depend on its API."""

    provider: ClassVar[str]
    _base_url_env: ClassVar[str]
    _default_url: ClassVar[str]
    _url_hint: ClassVar[str]

    model: str
    base_url: str | None
    api_key_env: str
    temperature: float | None
    timeout_s: float
    max_retries: int
    prices: dict[str, tuple[float, float]]
    usage: Usage
    _sdk: Any
    _explicit_key: bool

    def _settle(
        self,
        sdk: Any,
        model: str,
        example: str,
        base_url: str | None,
        api_key: str | None,
        api_key_env: str,
        temperature: float | None,
        timeout_s: float,
        max_retries: int,
        prices: Mapping[str, tuple[float, float]] | None,
        /,
    ) -> str | None:
        """Keep the settings shared by every client; the key found (given,
        else from ``api_key_env``), or None where there is none."""
        if not isinstance(model, str) or not model:
            raise ConfigurationError(
                f"{type(self).__name__}(model=...) needs the model's name, such as {example!r}"
            )
        self.model = model
        self.base_url = base_url or os.environ.get(self._base_url_env) or None
        self.api_key_env = api_key_env
        self.temperature = temperature
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.prices = dict(prices or {})
        self.usage = Usage()
        self._sdk = sdk
        self._explicit_key = api_key is not None
        return api_key if api_key is not None else os.environ.get(api_key_env)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def where(self) -> str:
        return self.base_url or self._default_url

    def _config(self, **extra: Any) -> dict[str, Any]:
        """The settings as JSON-ready data, ``extra`` after the shared ones.
        The key itself is not saved: its variable's name is (``api_key_env``)."""
        return {
            "provider": self.provider,
            "model": self.model,
            "base_url": self.base_url,
            "api_key_env": self.api_key_env,
            "temperature": self.temperature,
            "timeout_s": self.timeout_s,
            "max_retries": self.max_retries,
            "prices": {k: list(v) for k, v in self.prices.items()},
            **extra,
        }

    @classmethod
    def _from_config(cls, config: Mapping[str, Any], api_key: str | None) -> Any:
        options = {k: v for k, v in config.items() if k != "provider"}
        options["prices"] = {k: tuple(v) for k, v in (options.get("prices") or {}).items()}
        make: Any = cls  # a subclass's own __init__ takes the options
        try:
            return make(api_key=api_key, **options)
        except TypeError as exc:
            raise ConfigurationError(f"a model config has a field that does not fit: {exc}") from None

    def _count(self, prompt: int, completion: int) -> Usage:
        usage = Usage.priced(self.model, prompt, completion, self.prices)
        self.usage = self.usage + usage
        return usage

    def _translate(self, exc: Exception) -> ModelError:
        source = "the api_key given" if self._explicit_key else f"${self.api_key_env}"
        return sdk_error(
            self._sdk,
            exc,
            where=self.where,
            timeout_s=self.timeout_s,
            model=self.model,
            key_source=source,
            url_hint=self._url_hint,
        )


def sdk_error(
    sdk: Any, exc: Exception, *, where: str, timeout_s: float, model: str, key_source: str, url_hint: str
) -> ModelError:
    """An SDK's exception (OpenAI's and Anthropic's share their names) as
    a ``ModelError`` that says what to change."""
    if isinstance(exc, sdk.APITimeoutError):
        return ModelError(f"the model server at {where} did not answer within {timeout_s} s (timeout_s)")
    if isinstance(exc, sdk.APIConnectionError):
        return ModelError(f"cannot reach the model server at {where}: start it, or set base_url {url_hint}")
    if isinstance(exc, sdk.AuthenticationError):
        return ModelError(f"the model server at {where} refused the API key ({key_source}): 401")
    if isinstance(exc, sdk.NotFoundError):
        return ModelError(f"the model server at {where} has no model {model!r} (404): check the model name")
    if isinstance(exc, sdk.APIStatusError):
        return ModelError(f"the model server at {where} answered {exc.status_code}: {_detail(exc)}")
    return ModelError(f"the model call failed: {exc}")


def _detail(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
    return str(getattr(exc, "message", exc))


def safe_name(name: str) -> str:
    """A name the APIs take for a tool or a schema."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64] or "reply"
