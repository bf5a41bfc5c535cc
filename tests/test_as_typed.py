"""Every magic that takes free text keeps it as typed (issue 41, SPEC §20 "As typed, everywhere").

IPython expands ``{x}`` and ``$x`` in a magic's line when a *cell* runs it, unless the magic
opts out (``@no_var_expand``), so these tests go through ``run_cell`` as a notebook would: a
pin or a note that said ``{secretvar}`` must never hold the variable's value (a pin goes into
every request; a note is written to disk). The adversary's scenario: ``%context pin A
{secretvar} $secretvar`` pinned the secret.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.scripts import turn, write_script

SECRET = "hunter2-the-secret-value"
TYPED = "A {secretvar} $secretvar"


@pytest.fixture
def shell(ip):
    ip.user_ns["secretvar"] = SECRET
    yield ip
    ip.user_ns.pop("secretvar", None)


def run(shell, source: str) -> str:
    """Run ``source`` as a cell; what it printed. A failing cell fails the test."""
    from IPython.utils.capture import capture_output

    with capture_output() as out:
        result = shell.run_cell(source)
    assert result.error_in_exec is None, f"{source!r}: {result.error_in_exec!r}\n{out.stdout}{out.stderr}"
    return out.stdout


def test_context_pin_keeps_the_text_as_typed(shell) -> None:
    run(shell, f"%context pin {TYPED}")
    pins = run(shell, "%context pins")
    assert TYPED in pins and SECRET not in pins


def test_memory_add_keeps_name_description_and_body_as_typed(shell, workspace: Path) -> None:
    run(shell, '%memory add secrets -d "about {secretvar}" body {secretvar} and $secretvar')
    note = next((workspace / ".pseudoclaude" / "memory").glob("secrets*.md")).read_text(encoding="utf-8")
    assert "about {secretvar}" in note and "body {secretvar} and $secretvar" in note
    assert SECRET not in note


def test_memory_cell_keeps_its_line_as_typed(shell, workspace: Path) -> None:
    run(shell, '%%memory add cellnote -d "line {secretvar} $secretvar"\nthe body {secretvar}\n')
    note = next((workspace / ".pseudoclaude" / "memory").glob("cellnote*.md")).read_text(encoding="utf-8")
    assert "line {secretvar} $secretvar" in note and "the body {secretvar}" in note
    assert SECRET not in note


def test_sessions_search_looks_for_the_text_as_typed(shell, workspace: Path) -> None:
    path = write_script(workspace, "s", turn("the literal {secretvar} is here"))
    run(shell, f"%agent --provider scripted --script {path} hello")
    out = run(shell, "%sessions search {secretvar}")
    assert "1 match for '{secretvar}'" in out and SECRET not in out


def test_sessions_other_actions_still_expand_as_before(shell, workspace: Path) -> None:
    """A session id from a variable (``%sessions resume {original}``, notebook 07) still works."""
    path = write_script(workspace, "s", turn("hi"))
    run(shell, f"%agent --provider scripted --script {path} hello")
    from pseudoclaude_nb.magics import current_agent

    shell.user_ns["original"] = current_agent(shell).session.id
    run(shell, "%sessions new")
    out = run(shell, "%sessions resume {original}")
    assert shell.user_ns["original"] in out


def test_compact_apply_edit_reads_the_path_as_typed(shell, workspace: Path) -> None:
    from pseudoclaude_nb.magics import current_agent

    path = write_script(workspace, "chat", turn("answer " + "words " * 300), summaries=["MODEL-SUMMARY"])
    for i in range(4):
        run(shell, f"%agent --provider scripted --script {path} question {i}")
    shell.run_line_magic("config", "PseudoClaude.recent_tokens = 500")
    run(shell, "%compact --preview")
    mine = workspace.parent / "summary-{secretvar}.md"  # a name with braces, as the person typed it
    mine.write_text("## My summary\n- kept as written\n", encoding="utf-8")
    out = run(shell, f"%compact --apply --edit {mine}")
    assert out.startswith("compacted: ~")
    first = current_agent(shell).session.conversation.messages()[0].content
    assert first.startswith("<summary>\n## My summary")


def test_sessions_option_values_from_variables_still_expand(shell, workspace: Path) -> None:
    path = write_script(workspace, "s", turn("the answer"))
    run(shell, f"%agent --provider scripted --script {path} hello")
    run(shell, f"%agent --provider scripted --script {path} again")
    shell.user_ns["n"] = 1
    out = run(shell, "%sessions show --tail $n")  # the last message of four
    assert "… 3 more messages" in out and "the answer" in out and "hello" not in out
