"""``%compact --apply --edit PATH`` reads a bounded regular file (issue 41).

The adversary's run: a 60 MB file became the "summary" (the log grew 60 MB and stayed so
after ``--undo``), a FIFO blocked the kernel, and ``/dev/zero`` ran it out of memory. Now the
path is opened without blocking and must be a regular file; a text larger than the summary
reserve allows (about 70 KB at the default 20,000 tokens) or than the messages it replaces is
refused, never truncated, and nothing is written; ``--undo`` after an edit restores the
effective state and says the log keeps the bytes (it is append-only).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from IPython.core.error import UsageError

from tests.scripts import run_magic, turn, write_script


def session(ip, workspace: Path, words: int) -> Path:
    """Six runs of ``words`` words each, and a pending preview; the session's log."""
    from pseudoclaude_nb.magics import current_agent

    path = write_script(workspace, "chat", turn("answer " + "words " * words), summaries=["MODEL-SUMMARY"])
    for i in range(6):
        run_magic(ip, f"agent --provider scripted --script {path} question {i}")
    ip.run_line_magic("config", "PseudoClaude.recent_tokens = 500")
    run_magic(ip, "compact --preview")
    return current_agent(ip).session.dir / "conversation.jsonl"


def refused(ip, target: object) -> str:
    with pytest.raises(UsageError) as caught:
        ip.run_line_magic("compact", f"--apply --edit {target}")
    return str(caught.value)


def test_a_fifo_is_refused_without_blocking(ip, workspace: Path) -> None:
    log = session(ip, workspace, 300)
    fifo = workspace.parent / "summary.fifo"
    os.mkfifo(fifo)
    said: list[str] = []
    reader = threading.Thread(target=lambda: said.append(refused(ip, fifo)), daemon=True)
    reader.start()
    reader.join(timeout=20)
    if reader.is_alive():  # the old code blocks in open(): let it go before failing
        with open(fifo, "w"):
            pass
        reader.join(timeout=5)
        pytest.fail("--edit on a FIFO blocked the kernel")
    assert f"--edit {fifo}: not a regular file (a FIFO)" in said[0]
    assert "MODEL-SUMMARY" not in log.read_text(encoding="utf-8")


@pytest.mark.parametrize(("target", "kind"), [("/dev/zero", "a device"), (".", "a folder")])
def test_a_device_or_a_folder_is_refused(ip, workspace: Path, target: str, kind: str) -> None:
    session(ip, workspace, 300)
    assert f"not a regular file ({kind})" in refused(ip, target)


def test_a_summary_over_the_reserve_is_refused_not_truncated(ip, workspace: Path) -> None:
    log = session(ip, workspace, 3_000)  # ~30,000 tokens to replace
    before = log.stat().st_size
    big = workspace.parent / "big.md"
    big.write_text("## Summary\n" + "a line of the person's summary\n" * 2_700, encoding="utf-8")  # ~84 KB
    message = refused(ip, big)
    size = big.stat().st_size
    assert f"is {size:,} bytes: refused" in message
    assert "at most 70,000 bytes (summary_reserve 20,000 tokens)" in message
    assert log.stat().st_size == before  # nothing written
    # Within the bound it is taken whole.
    fits = workspace.parent / "fits.md"
    fits.write_text("## Summary\n" + "a line of the person's summary\n" * 2_000, encoding="utf-8")  # ~62 KB
    assert run_magic(ip, f"compact --apply --edit {fits}").startswith("compacted: ~")


def test_a_summary_bigger_than_what_it_replaces_is_refused(ip, workspace: Path) -> None:
    log = session(ip, workspace, 300)
    before = log.stat().st_size
    mine = workspace.parent / "long.md"
    mine.write_text("## Summary\n" + "more than the conversation held\n" * 600, encoding="utf-8")  # ~19 KB
    message = refused(ip, mine)
    assert (
        "refused: it is ~" in message and "tokens, more than the" in message and "it replaces (~" in message
    )
    assert log.stat().st_size == before


def test_undo_after_an_edit_restores_the_state_and_says_the_log_keeps_it(ip, workspace: Path) -> None:
    from pseudoclaude_nb.magics import current_agent

    session(ip, workspace, 300)
    agent = current_agent(ip)
    original = [m.content for m in agent.session.conversation.messages()]
    mine = workspace.parent / "mine.md"
    mine.write_text("## My summary\n- short\n", encoding="utf-8")
    run_magic(ip, f"compact --apply --edit {mine}")
    assert agent.session.conversation.messages()[0].content.startswith("<summary>\n## My summary")
    out = run_magic(ip, "compact --undo")
    assert [m.content for m in agent.session.conversation.messages()] == original
    assert "the log keeps the undone summary's bytes (it is append-only: an undo adds a replace" in out
