"""A mistyped option, choice or action (issue 30, item 8): the nearest one, then the usage line.

In-process IPython: each magic as a person mistypes it. The hint names what was meant, the
usage line is the magic's own, and the hint is left out when nothing is near.
"""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError


@pytest.mark.parametrize(
    ("magic", "line", "hint"),
    [
        ("agent", "--mdoe auto hi", "--mdoe: did you mean --mode?"),
        ("agent", "--provder demo hi", "--provder: did you mean --provider?"),
        ("agent", "--mode atuo hi", "did you mean 'auto'?"),
        ("context", "--jsn", "--jsn: did you mean --json?"),
        ("compact", "--undoo", "--undoo: did you mean --undo?"),
        ("sessions", "list --limt 3", "--limt: did you mean --limit?"),
        ("sessions", "shwo", "unknown action 'shwo'; did you mean 'show'?"),
        ("memory", "shwo", "unknown action 'shwo'; did you mean 'show'?"),
        ("context", "pinss", "unknown action 'pinss'; did you mean 'pins'?"),
        ("context", "bogus", "unknown action 'bogus'; use one of: pin, pins, unpin"),
        ("mcp", "--bogus", "--bogus is not an option"),
    ],
)
def test_a_mistake_names_the_nearest_and_shows_the_usage(ip, magic: str, line: str, hint: str) -> None:
    with pytest.raises(UsageError) as raised:
        ip.run_line_magic(magic, line)
    message = str(raised.value)
    assert hint in message.splitlines()[0] + "\n" + "\n".join(message.splitlines()[1:])
    if magic not in ("memory",):
        assert f"usage: %{magic} [" in message, message
    assert "::" not in message


def test_nothing_near_gets_no_guess(ip) -> None:
    with pytest.raises(UsageError) as raised:
        ip.run_line_magic("agent", "--zzzzzz hi")
    assert "did you mean" not in str(raised.value) and "--zzzzzz is not an option" in str(raised.value)


@pytest.mark.parametrize(
    ("magic", "line"),
    [
        ("agent", "--tools"),
        ("agent", "hi"),
        ("mcp", ""),
        ("mcp", "start"),
        ("sessions", "list"),
        ("memory", ""),
        ("context", ""),
        ("compact", "--status"),
    ],
)
def test_a_workspace_setting_that_is_no_folder_is_a_usage_error_with_the_fix(
    ip, tmp_path, magic: str, line: str
) -> None:
    # The audit found %agent --tools and %mcp showing a ConfigError traceback here.
    ip.run_line_magic("config", f'PseudoClaude.workspace = "{tmp_path / "no-such-folder"}"')
    with pytest.raises(UsageError) as raised:
        ip.run_line_magic(magic, line)
    assert "is not a directory; set PseudoClaude.workspace to an existing folder" in str(raised.value)


def test_an_unknown_provider_names_every_choice_auto_included(ip) -> None:
    with pytest.raises(UsageError) as raised:
        ip.run_line_magic("agent", "--provider nope hi")
    assert (
        "unknown provider 'nope'; choose one of: anthropic, openai, offline, demo, scripted, or auto"
        in str(raised.value)
    )


def test_a_provider_typo_gets_a_suggestion(ip) -> None:
    from IPython.core.error import UsageError

    with pytest.raises(
        UsageError, match=r"unknown provider 'opneai' \(did you mean 'openai'\?\); choose one of"
    ):
        ip.run_line_magic("agent", "--provider opneai hello")
