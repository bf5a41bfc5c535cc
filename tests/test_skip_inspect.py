"""A name an ``agent-skip`` cell binds is kept out of ``inspect_variable`` (issue 41 #7).

The adversary's run: ``# agent-skip`` kept a cell out of the activity block, but the variable
it set was still readable through ``inspect_variable``. Now a name a skipped cell binds is
withheld while it still holds what that cell bound, and the shell's history (``In``, ``Out``,
``_``, ``_iN``, ``_N``: it holds the skipped cells' source and results) is never described.
What is not covered is documented (docs/notebook.md, docs/security.md): objects such a cell
changes in place, values other cells compute from it, and ``run_python``.
"""

from __future__ import annotations

from pathlib import Path

from IPython.utils.capture import capture_output

from pseudoclaude_nb.magics import current_agent
from tests.scripts import save_script, turn

SECRET = "sk-live-the-skipped-value-123"


def cell(ip, source: str) -> None:
    with capture_output():
        result = ip.run_cell(source, store_history=True)
    assert result.error_in_exec is None, result.error_in_exec


def inspected(ip, workspace: Path, *names: str) -> list[tuple[bool, str]]:
    """What the agent's inspect_variable said for each name (is_error, text), through a run."""
    path = save_script(
        workspace / "s.json",
        turn("", *[("inspect_variable", {"name": n}) for n in names]),
        turn("done"),
    )
    cell(ip, f"%agent --provider scripted --script {path} --mode read-only look")
    results = [m.tool_result for m in current_agent(ip).session.conversation.messages() if m.tool_result]
    return [(r.is_error, r.content) for r in results[-len(names) :]]


def test_a_name_a_skipped_cell_binds_is_withheld(ip, workspace: Path) -> None:
    cell(ip, f"# agent-skip\napi_token = {SECRET!r}\nalias = api_token")
    cell(ip, "revenue = [120, 95, 143]")
    said = inspected(ip, workspace, "api_token", "alias", "revenue", "api_token.upper", "api_toke")
    for is_error, text in said[:2]:
        assert is_error and "set in a cell marked agent-skip" in text and SECRET not in text
    assert not said[2][0] and "len: 3" in said[2][1]
    assert said[3][0] and "agent-skip" in said[3][1]  # a dotted name through it, too
    assert said[4][0] and "api_token" not in said[4][1]  # not offered as a similar name
    assert all(SECRET not in text for _, text in said)


def test_the_shells_history_is_never_described(ip, workspace: Path) -> None:
    cell(ip, f"# agent-skip\n{SECRET!r}")  # its result lands in Out and _
    said = inspected(ip, workspace, "Out", "_", "In", "_i")
    assert all(is_error and "the shell's history" in text for is_error, text in said), said
    assert all(SECRET not in text for _, text in said)


def test_a_name_bound_again_by_an_ordinary_cell_is_readable(ip, workspace: Path) -> None:
    cell(ip, f"# agent-skip\nsetting = {SECRET!r}")
    cell(ip, "setting = 'public value'")
    [(is_error, text)] = inspected(ip, workspace, "setting")
    assert not is_error and "public value" in text
