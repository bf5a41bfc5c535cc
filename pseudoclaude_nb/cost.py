"""What requests cost: the shipped price table, the person's overrides, and spend per run or session.

Prices are US dollars per million tokens, per model (``prices.json``, with the date and source
of each family; ``%config PseudoClaude.prices = {MODEL: {...}}`` adds or replaces models). Each
request is priced on its own — a long-context tier depends on that request's prompt — and a
model the table does not know is "price unknown", never a guess. No IPython here.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from .messages import Usage

PRICES_FILE = Path(__file__).with_name("prices.json")
RATE_KEYS = ("input", "output", "cache_write", "cache_write_1h", "cache_read")
# The highest rate taken, in dollars per million tokens (issue 41: 1e308 made every cost "$inf");
# today's dearest models cost well under $1,000.
MAX_RATE = 10_000
# A model matches its key exactly, or with a snapshot date or "-latest" after it: never by a
# shorter prefix, so claude-opus-4-8 is not priced as claude-opus-4, nor gpt-5.4-mini as gpt-5.4.
_SUFFIX = re.compile(r"(?:-\d{8}|-\d{4}-\d{2}-\d{2}|-latest)?(?:\[1m\])?")
UNKNOWN = "price unknown"


@dataclass(frozen=True)
class Rates:
    """One model's prices in dollars per million tokens (one tier)."""

    input: float
    output: float
    cache_write: float  # 5-minute write (Anthropic's default TTL)
    cache_write_1h: float
    cache_read: float

    def dollars(self, u: Usage) -> float:
        hour = min(u.cache_creation_1h_input_tokens, u.cache_creation_input_tokens)
        return (
            u.input_tokens * self.input
            + u.output_tokens * self.output
            + (u.cache_creation_input_tokens - hour) * self.cache_write
            + hour * self.cache_write_1h
            + u.cache_read_input_tokens * self.cache_read
            # The provider's compaction iterations (--strategy api), each kind at its own rate
            # (issue 43: their cache reads and writes were billed as plain input before).
            + u.compaction_input_tokens * self.input
            + u.compaction_cache_creation_input_tokens * self.cache_write
            + u.compaction_cache_read_input_tokens * self.cache_read
            + u.compaction_output_tokens * self.output
        ) / 1e6

    def uncached(self, u: Usage) -> float:
        """The same request had nothing been cached or written: every prompt token at input."""
        prompt = (
            u.prompt_total
            + u.compaction_input_tokens
            + u.compaction_cache_creation_input_tokens
            + u.compaction_cache_read_input_tokens
        )
        return (prompt * self.input + (u.output_tokens + u.compaction_output_tokens) * self.output) / 1e6


@dataclass(frozen=True)
class Price:
    """A model's entry: its rates, and the tier above ``long_above`` prompt tokens if it has one."""

    rates: Rates
    long_above: int | None = None
    long_rates: Rates | None = None
    source: str = ""
    as_of: str = ""

    def for_usage(self, u: Usage) -> Rates:
        if self.long_above is not None and self.long_rates is not None and u.prompt_total > self.long_above:
            return self.long_rates
        return self.rates


def _rates(entry: dict[str, Any], where: str) -> Rates:
    for key in RATE_KEYS:
        if (key in entry or key in ("input", "output")) and not _is_rate(entry.get(key)):
            given = f" = {entry[key]!r}" if key in entry else " missing"
            raise ValueError(
                f"{where}[{key!r}]{given}: refused; a price is a number of dollars per million "
                f"tokens, from 0 to {MAX_RATE:,}"
            )
    unknown = set(entry) - {*RATE_KEYS, "long_context", "source", "as_of"}
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}; use {', '.join(RATE_KEYS)}, long_context")
    # A provider without a separate write price bills a write as input; a 1-hour write without
    # its own price costs what a write costs. A missing cache-read price is billed as input:
    # the table never makes a discount up.
    write = float(entry.get("cache_write", entry["input"]))
    return Rates(
        input=float(entry["input"]),
        output=float(entry["output"]),
        cache_write=write,
        cache_write_1h=float(entry.get("cache_write_1h", write)),
        cache_read=float(entry.get("cache_read", entry["input"])),
    )


def _is_rate(value: Any) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0 <= value <= MAX_RATE
    )


def parse_price(entry: Any, where: str, source: str = "", as_of: str = "") -> Price:
    """One model's entry (a dict of rates, optionally ``long_context``), checked."""
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: give a dict like {{'input': 3, 'output': 15, 'cache_read': 0.3}}")
    rates = _rates(entry, where)
    long = entry.get("long_context")
    if long is None:
        return Price(rates, source=str(entry.get("source", source)), as_of=str(entry.get("as_of", as_of)))
    if not isinstance(long, dict) or not isinstance(long.get("above"), int) or long["above"] <= 0:
        raise ValueError(f"{where}: long_context needs 'above' (prompt tokens, an int > 0) and its rates")
    tier = _rates({k: v for k, v in long.items() if k != "above"}, f"{where}.long_context")
    return Price(rates, long["above"], tier, str(entry.get("source", source)), str(entry.get("as_of", as_of)))


@cache
def shipped() -> dict[str, Price]:
    """The table shipped with the package (read once)."""
    data = json.loads(PRICES_FILE.read_text(encoding="utf-8"))
    table: dict[str, Price] = {}
    for family in data["families"]:
        for model, entry in family["models"].items():
            table[model] = parse_price(entry, f"prices.json {model}", family["source"], family["as_of"])
    return table


_overrides: dict[str, Price] = {}


def parse_overrides(value: Any) -> dict[str, Price]:
    """``PseudoClaude.prices`` checked: ValueError says what is wrong and how it should look."""
    if not isinstance(value, dict):
        raise ValueError("PseudoClaude.prices must be a dict {MODEL: {'input': …, 'output': …, …}}")
    out = {}
    for model, entry in value.items():
        if not isinstance(model, str) or not model.strip():
            raise ValueError("PseudoClaude.prices: every key must be a model name")
        out[_name(model)] = parse_price(
            entry, f"PseudoClaude.prices[{model!r}]", source="%config PseudoClaude.prices"
        )
    return out


def set_overrides(value: Any) -> None:
    """Put ``PseudoClaude.prices`` in force for every pricing from now on (checked first)."""
    global _overrides
    _overrides = parse_overrides(value)


def _name(model: str) -> str:
    return model.strip().lower().rsplit("/", 1)[-1]  # "anthropic/claude-…" behind a router


def price_of(model: str | None) -> Price | None:
    """The price of ``model``: an override, else the shipped table; None when neither knows it."""
    if not model:
        return None
    name = _name(model)
    for table in (_overrides, shipped()):
        if name in table:
            return table[name]
        for key in sorted(table, key=len, reverse=True):
            if name.startswith(key) and _SUFFIX.fullmatch(name[len(key) :]):
                return table[key]
    return None


# The demo's model is no model: it is priced as if it were this one, and every figure says so
# ("$0.081 as if claude-sonnet-4-5"), so a learner sees dollars offline (issue 44). A price the
# person gives it (PseudoClaude.prices) wins.
AS_IF = {"pseudoclaude-demo": "claude-sonnet-4-5"}


def priced_as(model: str | None) -> tuple[Price | None, str | None]:
    """``model``'s price, or the price it is shown ``as if`` with that model's name; (None, None)."""
    price = price_of(model)
    if price is not None or not model:
        return price, None
    target = AS_IF.get(_name(model))
    return (price_of(target), target) if target else (None, None)


def request_dollars(usage: Usage, model: str | None) -> float | None:
    """What one request cost, or None: the model has no price."""
    price = price_of(model)
    return None if price is None else price.for_usage(usage).dollars(usage)


@dataclass
class Spend:
    """Requests' usage with the model of each, priced when asked (so an override applies at once)."""

    requests: list[tuple[str | None, Usage]] = field(default_factory=list)
    last_ts: float | None = None  # when the last request was logged (a session's, from its log)

    def add(self, usage: Usage, model: str | None) -> None:
        self.requests.append((model, usage))

    @property
    def usage(self) -> Usage:
        total = Usage()
        for _, u in self.requests:
            total = total + u
        return total

    @property
    def last_model(self) -> str | None:
        return next((m for m, _ in reversed(self.requests) if m), None)

    def hit_ratio(self) -> float | None:
        """Cache reads over all prompt tokens (None: no prompt tokens yet)."""
        u = self.usage
        return u.cache_read_input_tokens / u.prompt_total if u.prompt_total else None

    def cost(self) -> Cost:
        dollars = uncached = 0.0
        unknown: dict[str, int] = {}
        prices: dict[str | None, Price | None] = {}  # a model's price looked up once, not per request
        as_if: list[str] = []
        for model, u in self.requests:
            if model not in prices:
                prices[model], target = priced_as(model)
                if target is not None and prices[model] is not None:
                    as_if.append(target)
            price = prices[model]
            if price is None:
                unknown[model or "an unnamed model"] = unknown.get(model or "an unnamed model", 0) + 1
                continue
            rates = price.for_usage(u)
            dollars += rates.dollars(u)
            uncached += rates.uncached(u)
        return Cost(dollars, uncached, len(self.requests), unknown, tuple(as_if))


@dataclass(frozen=True)
class Cost:
    dollars: float  # of the priced requests
    uncached: float  # the same priced requests without any caching
    requests: int
    unknown: dict[str, int]  # model -> requests without a price
    as_if: tuple[str, ...] = ()  # the models whose prices stand in for one without (``AS_IF``)

    @property
    def known(self) -> bool:
        return not self.unknown

    @property
    def saved(self) -> float:
        """What caching saved on the priced requests (negative: writes cost more than reads saved)."""
        return self.uncached - self.dollars

    def text(self) -> str:
        """``$0.021``, ``price unknown (model x)``, or the priced part with the unknown one named."""
        if not self.requests:
            return money(0.0)
        if len(self.unknown) and sum(self.unknown.values()) == self.requests:
            return f"{UNKNOWN} ({', '.join(self.unknown)})"
        if self.unknown:
            n = sum(self.unknown.values())
            return f"{money(self.dollars)} + {UNKNOWN} for {n} request{'s' if n != 1 else ''} ({', '.join(self.unknown)})"
        return money(self.dollars) + (f" as if {', '.join(self.as_if)}" if self.as_if else "")

    def saved_text(self) -> str:
        """``cache saved $0.012`` (or ``cache cost +$0.003`` when writes outweighed reads); '' unpriced."""
        if self.dollars == 0 and self.uncached == 0:
            return ""
        if self.saved >= 0:
            return f"cache saved {money(self.saved)}"
        return f"cache cost +{money(-self.saved)}"


def money(dollars: float) -> str:
    """Dollars as people read small amounts: $1.23, $0.021, $0.0042."""
    if dollars >= 1:
        return f"${dollars:,.2f}"
    if dollars >= 0.01 or dollars == 0:
        return f"${dollars:.3f}" if dollars else "$0.00"
    return f"${dollars:.4f}"


# What each cache hit figure counts (issue 44): a run's, shown by the end line and the gauge, is
# over its agent requests (its steps); the session's, shown by %context, over every request its
# log records, the summaries' too (a summary request reads no cache, so it is lower).
RUN_HIT = "of the steps' input"
SESSION_HIT = "of the session's input (steps and summaries)"


def ratio_text(ratio: float | None, scope: str = RUN_HIT) -> str:
    return "cache hit –" if ratio is None else f"cache hit {ratio:.0%} {scope}"
