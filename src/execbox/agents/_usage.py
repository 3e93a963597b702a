"""Token usage and what it cost, from a price table the user can extend."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PRICES", "Usage", "price_of", "register_price"]

# USD per million tokens (input, output), as the providers published them in 2025.
# Prices change: register_price() (or ModelClient(prices=...)) overrides.
PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "o3-mini": (1.10, 4.40),
    "o4-mini": (1.10, 4.40),
    # Anthropic's, as published in 2025 (a prefix prices the dated versions).
    "claude-opus-4-5*": (5.00, 25.00),
    "claude-opus-4-1*": (15.00, 75.00),
    "claude-sonnet-4*": (3.00, 15.00),
    "claude-haiku-4-5*": (1.00, 5.00),
    "claude-3-5-haiku*": (0.80, 4.00),
}


def register_price(model: str, input_per_million: float, output_per_million: float) -> None:
    """Set the price of ``model`` (USD per million input and output tokens).
    A name ending in ``*`` prices every model that starts with the rest."""
    PRICES[model] = (float(input_per_million), float(output_per_million))


def price_of(model: str, prices: dict[str, tuple[float, float]] | None = None) -> tuple[float, float] | None:
    """The (input, output) price of ``model``: an exact name first, then the
    longest matching ``prefix*`` entry, then a dated variant of a known name
    (``gpt-4o-2024-08-06`` is priced as ``gpt-4o``)."""
    table = {**PRICES, **(prices or {})}
    if model in table:
        return table[model]
    prefixes = [k for k in table if k.endswith("*") and model.startswith(k[:-1])]
    if prefixes:
        return table[max(prefixes, key=len)]
    dated = [k for k in table if not k.endswith("*") and model.startswith(k + "-20")]
    return table[max(dated, key=len)] if dated else None


@dataclass(frozen=True)
class Usage:
    """Tokens used and their cost in USD (None when the model has no price)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = 0.0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        cost = None if self.cost is None or other.cost is None else self.cost + other.cost
        return Usage(
            self.prompt_tokens + other.prompt_tokens, self.completion_tokens + other.completion_tokens, cost
        )

    def __sub__(self, other: Usage) -> Usage:
        cost = None if self.cost is None or other.cost is None else self.cost - other.cost
        return Usage(
            self.prompt_tokens - other.prompt_tokens, self.completion_tokens - other.completion_tokens, cost
        )

    def describe(self) -> str:
        cost = (
            "cost unknown (no price for this model: register_price())"
            if self.cost is None
            else f"${self.cost:.6f}"
        )
        return f"{self.prompt_tokens} prompt + {self.completion_tokens} completion tokens, {cost}"

    @classmethod
    def priced(
        cls, model: str, prompt: int, completion: int, prices: dict[str, tuple[float, float]] | None = None
    ) -> Usage:
        price = price_of(model, prices)
        cost = None if price is None else (prompt * price[0] + completion * price[1]) / 1_000_000
        return cls(prompt, completion, cost)
