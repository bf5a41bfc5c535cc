"""Issue 32, item 8: a memory update whose model echoed "… and [] when nothing changes" is
not read as "nothing to change"; a plain [] still is."""

from __future__ import annotations

import pytest

from pseudoclaude_nb.memory.operations import InvalidOperation, parse_operations


def test_an_echo_of_the_instructions_is_not_an_empty_answer() -> None:
    echo = "Answer with only a JSON array of operations, and [] when nothing changes."
    with pytest.raises(InvalidOperation, match="echoes the instructions"):
        parse_operations(echo)


@pytest.mark.parametrize("answer", ["[]", "```json\n[]\n```", "Nothing durable happened.\n[]"])
def test_a_plain_empty_array_is_still_nothing_to_change(answer: str) -> None:
    assert parse_operations(answer) == []
