"""The magics in a real in-process IPython shell: parse → core → render, errors as UsageError."""

from __future__ import annotations

from pathlib import Path

import pytest
from IPython.core.error import UsageError

from pseudoclaude_nb.magics import current_agent
from pseudoclaude_nb.session import list_sessions, load_session
from tests.scripts import run_magic as run
from tests.scripts import save_script, turn


def test_agent_streams_text_runs_tools_and_ends_with_a_summary_line(ip, workspace: Path) -> None:
    path = save_script(
        workspace / "s.json",
        turn("Writing the file.", ("write_file", {"path": "hello.txt", "content": "hi\n"})),
        turn("All **done**."),
    )
    out = run(ip, f'agent --provider scripted --script {path} --mode auto "make hello.txt"')
    assert (workspace / "hello.txt").read_text() == "hi\n"
    assert "Writing the file." in out and "All **done**." in out
    assert "→ write_file(" in out and "✓ wrote 3 bytes to hello.txt" in out
    agent = current_agent(ip)
    assert "✓ done · 2 steps" in out and f"session {agent.session.id}" in out
    # The prompt's quotes were the shell's, not the user's words.
    assert load_session(agent.session.dir).messages[0].content == "make hello.txt"


def test_cells_continue_the_session_and_new_starts_another(ip, workspace: Path) -> None:
    path = save_script(workspace / "s.json", turn("one"))
    run(ip, f"agent --provider scripted --script {path} first")
    first = current_agent(ip).session.id
    run(ip, f"agent --provider scripted --script {path} second")
    assert current_agent(ip).session.id == first
    assert [m.content for m in load_session(current_agent(ip).session.dir).messages] == [
        "first",
        "one",
        "second",
        "one",
    ]
    run(ip, f"agent --provider scripted --script {path} --new third")
    assert current_agent(ip).session.id != first
    assert len(list_sessions(workspace)) == 2


def test_cell_magic_uses_the_body_as_prompt(ip, workspace: Path) -> None:
    path = save_script(workspace / "s.json", turn("ok"))
    run(ip, f"agent --provider scripted --script {path}", "Refactor utils.py\nand run the tests.")
    first = load_session(current_agent(ip).session.dir).messages[0]
    assert first.content == "Refactor utils.py\nand run the tests."


@pytest.mark.parametrize(
    "line, needle",
    [
        ("agent --bogus x", "unrecognized arguments"),
        ("agent --mode sometimes x", "invalid choice"),
        ("agent --max-steps 0 x", "--max-steps"),
        ("agent --provider demo", "needs a prompt"),
        ("agent --new --session abc x", "either --new or --session"),
        ("agent --provider nosuch x", "unknown provider 'nosuch'"),
        ("agent --provider scripted x", "needs a script"),
        ("sessions frobnicate", "unknown action"),
        ("sessions resume", "needs an ID or --last"),
        ("sessions show 20990101-000000-0000", "no session 20990101-000000-0000"),
    ],
)
def test_user_mistakes_raise_usage_error_with_the_fix(ip, line: str, needle: str) -> None:
    with pytest.raises(UsageError, match=needle.replace("-", r"\-").replace("'", ".")):
        ip.run_line_magic(line.split()[0], line.partition(" ")[2])


def test_script_errors_end_the_run_with_one_clear_line(ip, workspace: Path) -> None:
    path = save_script(workspace / "s.json", turn("a", ("list_files", {})))
    out = run(ip, f"agent --provider scripted --script {path} --mode auto go")
    assert f"error: script {path} ran out" in out
    assert "✗ error · 2 steps" in out
    # Nothing is lost: the log holds the first step, protocol-valid.
    log = load_session(current_agent(ip).session.dir)
    assert [m.role for m in log.messages] == ["user", "assistant", "user"]


def test_help_comes_from_the_docstring(ip) -> None:
    doc = ip.find_line_magic("agent").__doc__
    assert "--max-steps N" in doc and "Successive %agent cells continue" in doc


def test_config_settings_apply_to_runs(ip, workspace: Path) -> None:
    path = save_script(workspace / "s.json", turn("a", ("list_files", {})))  # max_steps 1: one turn
    ip.run_line_magic("config", f"PseudoClaude.script = '{path}'")
    ip.run_line_magic("config", "PseudoClaude.provider = 'scripted'")
    ip.run_line_magic("config", "PseudoClaude.max_steps = 1")
    out = run(ip, "agent --mode auto go")
    assert "stopped after --max-steps 1" in out and "■ stopped at max steps · 1 step · " in out


def test_sessions_list_show_resume_and_new(ip, workspace: Path) -> None:
    assert "no sessions yet" in run(ip, "sessions")
    path = save_script(workspace / "s.json", turn("fine, thanks"))
    run(ip, f"agent --provider scripted --script {path} how are you")
    sid = current_agent(ip).session.id

    listing = run(ip, "sessions list")
    assert (
        f"* {sid}" in listing and "how are you" in listing and "current" in listing and "open" not in listing
    )

    shown = run(ip, f"sessions show {sid}")
    assert "2 effective messages of 2 logged" in shown and "fine, thanks" in shown

    assert "starts a new session" in run(ip, "sessions new")
    assert current_agent(ip).session is None
    resumed = run(ip, "sessions resume --last")
    assert f"resumed session {sid}: 2 messages" in resumed
    assert current_agent(ip).session.id == sid
    run(ip, f"agent --provider scripted --script {path} and now?")
    contents = [m.content for m in load_session(workspace / ".pseudoclaude/sessions" / sid).messages]
    assert contents == ["how are you", "fine, thanks", "and now?", "fine, thanks"]


def test_show_reports_recovery_problems(ip, workspace: Path) -> None:
    path = save_script(workspace / "s.json", turn("hello"))
    run(ip, f"agent --provider scripted --script {path} hi")
    agent = current_agent(ip)
    sid, log = agent.session.id, agent.session.writer.path
    agent.close()
    with open(log, "ab") as f:
        f.write(b"this is not json\n")
    shown = run(ip, f"sessions show {sid}")
    assert "! recovery incomplete: line 4 unreadable" in shown
    assert "incomplete" in run(ip, "sessions list")


def test_run_python_tool_runs_in_the_notebook_namespace(ip, workspace: Path) -> None:
    ip.user_ns["numbers"] = [3, 4, 5]
    path = save_script(
        workspace / "s.json",
        turn("", ("run_python", {"code": "total = sum(numbers)\nprint('printed')\ntotal * 2"})),
        turn("done"),
    )
    run(ip, f"agent --provider scripted --script {path} --mode auto compute")
    assert ip.user_ns["total"] == 12
    result = load_session(current_agent(ip).session.dir).messages[2].tool_result
    assert result is not None and result.content == "printed\n24"


def test_unload_removes_the_magics_and_releases_the_lock(ip, workspace: Path) -> None:
    path = save_script(workspace / "s.json", turn("x"))
    run(ip, f"agent --provider scripted --script {path} hi")
    session_dir = current_agent(ip).session.dir
    ip.run_line_magic("unload_ext", "pseudoclaude_nb")
    assert ip.find_line_magic("agent") is None
    from pseudoclaude_nb.session.writer import is_locked

    assert not is_locked(session_dir)
    ip.run_line_magic("load_ext", "pseudoclaude_nb")  # the fixture unloads again
    current_agent(ip).settings.workspace = str(workspace)


def test_the_prompt_is_sent_as_typed_without_ipython_expansion(ip, workspace: Path) -> None:
    """SPEC §19: no {var} or $var expansion; the model and the log get the words typed."""
    ip.user_ns.update(name="Ada", x=42, price=5)
    path = save_script(workspace / "s.json", turn("ok"))  # each run plays it from the top
    typed = ['why does f"{name}" print Ada?', "explain {x} and $price", "a $$ b {{c}}"]
    for line in typed:
        run(ip, f"agent --provider scripted --script {path} {line}")
    users = [m.content for m in load_session(current_agent(ip).session.dir).messages if m.role == "user"]
    assert users == typed


def test_a_run_whose_every_change_was_refused_does_not_end_as_a_success(ip, workspace: Path) -> None:
    """Issue 30 item 5: read-only refuses the write; the end line says so, not "✓ done"."""
    path = save_script(
        workspace / "s.json",
        turn("Writing.", ("write_file", {"path": "a.txt", "content": "x"})),
        turn("All done."),
    )  # each run plays it from the top
    out = run(ip, f"agent --provider scripted --script {path} --mode read-only go")
    assert "■ done, but every change was refused" in out and "· 1 call refused" in out
    assert "✓ done" not in out and not (workspace / "a.txt").exists()
    out = run(ip, f"agent --provider scripted --script {path} --mode auto go")
    assert "✓ done" in out and "refused" not in out
