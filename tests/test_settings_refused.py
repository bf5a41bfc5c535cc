"""A setting ``%config`` would swallow is refused out loud (issue 41, SPEC §20).

IPython's ``%config`` catches a validator's exception and only logs it, so before this a
negative price was dropped without a word and ``1e308`` was taken (the end line said
``cost $inf (cache cost +$nan)``). Now prices are checked (finite, from 0 to $10,000 per million
tokens), the package prints the refusal naming the entry and saying "refused", and the prices
in force stay the previous ones. Run as a person would: ``%config`` in a cell.
"""

from __future__ import annotations

import pytest
from IPython.utils.capture import capture_output

from pseudoclaude_nb import cost
from pseudoclaude_nb.messages import Usage

MILLION = Usage(input_tokens=1_000_000, output_tokens=1_000_000)


def config(ip, line: str) -> str:
    with capture_output() as out:
        ip.run_cell(f"%config {line}")
    return out.stdout + out.stderr


@pytest.fixture
def priced(ip):
    said = config(ip, "PseudoClaude.prices = {'my-model': {'input': 1, 'output': 2}}")
    assert "refused" not in said
    assert cost.request_dollars(MILLION, "my-model") == 3
    yield ip
    config(ip, "PseudoClaude.prices = {}")


@pytest.mark.parametrize(
    ("rates", "entry"),
    [
        ("{'input': 1e308, 'output': 2}", "['input'] = 1e+308"),
        ("{'input': 1, 'output': 10001}", "['output'] = 10001"),
        ("{'input': -1, 'output': 2}", "['input'] = -1"),
        ("{'input': 1, 'output': 2, 'cache_read': -0.5}", "['cache_read'] = -0.5"),
        ("{'input': float('nan'), 'output': 2}", "['input'] = nan"),
        ("{'input': float('inf'), 'output': 2}", "['input'] = inf"),
        ("{'input': '3', 'output': 2}", "['input'] = '3'"),
    ],
)
def test_a_bad_price_is_refused_out_loud_and_the_previous_stays(priced, rates: str, entry: str) -> None:
    said = config(priced, f"PseudoClaude.prices = {{'my-model': {rates}}}")
    assert f"%config PseudoClaude.prices['my-model']{entry}: refused" in said, said
    assert "from 0 to 10,000" in said and "the prices in force stay the previous ones" in said
    assert cost.request_dollars(MILLION, "my-model") == 3  # the previous entry is in force


def test_the_highest_price_taken_is_ten_thousand_dollars(priced) -> None:
    said = config(priced, "PseudoClaude.prices = {'my-model': {'input': 10000, 'output': 0}}")
    assert "refused" not in said
    assert cost.request_dollars(MILLION, "my-model") == 10_000


def test_a_bad_redact_pattern_is_refused_out_loud(ip) -> None:
    said = config(ip, "PseudoClaude.redact_patterns = ['(unclosed']")
    assert "%config PseudoClaude.redact_patterns: redact pattern '(unclosed' is not a valid" in said
    assert "(refused)" in said and "the patterns in force stay the previous ones" in said
