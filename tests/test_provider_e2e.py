"""``%agent --provider anthropic|openai`` end to end, configured only as a user would: by environment.

The in-process shell runs the magic; the real SDK or httpx talks to a local fake server.
Each test checks the run's output, the files the tools touched, what the server
received, and the session log the run left behind.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from IPython.core.error import UsageError

from pseudoclaude_nb.context.summarize import SUMMARY_INSTRUCTION
from pseudoclaude_nb.magics import current_agent
from pseudoclaude_nb.session import list_sessions
from tests.fakes import FakeServer
from tests.fakes import anthropic_server as anthropic_wire
from tests.fakes import openai_server as openai_wire
from tests.scripts import run_magic

ANTHROPIC_KEY = "sk-ant-e2e-91b2"
OPENAI_KEY = "sk-e2e-40aa"
# About 30,000 estimated tokens: more than the recent tail (20,000) keeps verbatim, so a
# compaction has something old to summarize, and far below any automatic threshold.
LONG_BRIEF = "Background for the task, to keep in mind. " * 2500


@pytest.fixture
def anthropic_fake(monkeypatch: pytest.MonkeyPatch):
    with FakeServer("anthropic") as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
        yield fake


@pytest.fixture
def openai_fake(monkeypatch: pytest.MonkeyPatch):
    with FakeServer("openai") as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{fake.url}/v1")
        yield fake


def log_entries(ip, kind: str) -> list[dict]:
    path = current_agent(ip).session.dir / "conversation.jsonl"
    entries = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [e for e in entries if e.get("type") == kind]


def usage_of(entry: dict) -> tuple[int, int, int, int]:
    keys = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    return tuple(entry[k] for k in keys)  # type: ignore[return-value]


def run_messages(ip) -> list:
    return current_agent(ip).session.conversation.messages()


# --- Anthropic ---------------------------------------------------------------------------------------


def test_anthropic_two_step_tool_run_ends_done_and_logs_cache_usage(
    ip, workspace: Path, anthropic_fake
) -> None:
    (workspace / "notes.txt").write_text("remember the milk\n")
    anthropic_fake.play(
        anthropic_wire.answer(
            "Let me look.",
            [("toolu_01", "list_files", {"pattern": "*.txt"})],
            usage={"input_tokens": 1200, "cache_creation_input_tokens": 3100, "output_tokens": 40},
        ),
        anthropic_wire.answer(
            "There is one file: notes.txt.",
            usage={"input_tokens": 60, "cache_read_input_tokens": 3100, "output_tokens": 12},
        ),
    )
    out = run_magic(ip, 'agent --provider anthropic --mode auto "what files are here?"')
    assert "Let me look." in out and "There is one file: notes.txt." in out
    assert "→ list_files(" in out and "✓ notes.txt" in out
    assert "✓ done · 2 steps" in out and "cache read 3,100" in out

    first, second = anthropic_fake.requests
    assert first.headers["authorization"] == f"Bearer {ANTHROPIC_KEY}"
    assert first.body["messages"][0]["content"][0]["text"] == "what files are here?"
    assert {t["name"] for t in first.body["tools"]} >= {"list_files", "write_file"}
    tool_use = second.body["messages"][1]["content"][-1]
    tool_result = second.body["messages"][2]["content"][0]
    assert tool_use["type"] == "tool_use" and tool_use["id"] == "toolu_01"
    assert tool_result["tool_use_id"] == "toolu_01" and "notes.txt" in tool_result["content"]
    assert tool_result["cache_control"] == {"type": "ephemeral"}

    usages = log_entries(ip, "usage")
    assert [usage_of(e) for e in usages] == [(1200, 40, 3100, 0), (60, 12, 0, 3100)]
    assert {e["model"] for e in usages} == {"claude-sonnet-5-5"}
    assert ANTHROPIC_KEY not in (current_agent(ip).session.dir / "conversation.jsonl").read_text()


def test_anthropic_prompt_too_long_compacts_once_and_retries_once(ip, anthropic_fake) -> None:
    anthropic_fake.play(anthropic_wire.answer("Noted."))
    run_magic(ip, "agent --provider anthropic --mode auto", LONG_BRIEF)
    anthropic_fake.play(
        anthropic_wire.too_long(),
        anthropic_wire.message("## Confirmed requirements\n- the background brief (user)"),
        anthropic_wire.answer("Done after compacting."),
    )
    out = run_magic(ip, 'agent --provider anthropic --mode auto "now do it"')
    assert "compacted (forced)" in out and "Done after compacting." in out and "✓ done · 1 step" in out

    refused, summary, retry = anthropic_fake.requests[1:]
    assert LONG_BRIEF.strip() in json.dumps(refused.body)
    # The summary request goes to the same server, not streamed, ending with the instruction
    # (merged into the user turn that holds the old brief).
    assert "stream" not in summary.body
    assert summary.body["messages"][-1]["content"][-1]["text"] == SUMMARY_INSTRUCTION
    sent = json.dumps(retry.body["messages"])
    assert "<summary>" in sent and "the background brief" in sent and LONG_BRIEF.strip() not in sent
    assert [m.content for m in run_messages(ip)][-2:] == ["now do it", "Done after compacting."]
    compacts = log_entries(ip, "compact")
    assert [(c["trigger"], c["ok"]) for c in compacts] == [("forced", True)]


def test_anthropic_stream_cut_inside_a_tool_call_keeps_nothing_of_it(
    ip, workspace: Path, anthropic_fake
) -> None:
    anthropic_fake.play(
        anthropic_wire.cut(
            "Writing it.",
            [("toolu_w", "write_file", {"path": "x.py", "content": "y = 2\n"})],
            keep_last_block=False,
        )
    )
    out = run_magic(ip, 'agent --provider anthropic --mode auto "write x.py"')
    assert "without a stop reason" in out and "✗ error" in out
    assert not (workspace / "x.py").exists()
    messages = run_messages(ip)
    assert [m.role for m in messages] == ["user"] and not any(m.tool_calls for m in messages)
    assert log_entries(ip, "usage") == []


def test_anthropic_without_a_key_is_one_line_naming_the_variable(ip, workspace: Path, monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    with pytest.raises(UsageError, match="ANTHROPIC_API_KEY is not set"):
        ip.run_line_magic("agent", "--provider anthropic hello")
    assert list_sessions(workspace) == []


def test_anthropic_configured_by_the_workspace_env_file(ip, workspace: Path, monkeypatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        # Recorded, so that what the .env file sets is undone after the test.
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    with FakeServer("anthropic") as fake:
        (workspace / ".env").write_text(f"ANTHROPIC_API_KEY={ANTHROPIC_KEY}\nANTHROPIC_BASE_URL={fake.url}\n")
        fake.play(anthropic_wire.answer("Configured from .env."))
        out = run_magic(ip, 'agent --provider anthropic "hello"')
    assert "Configured from .env." in out and "✓ done" in out
    assert fake.requests[0].headers["authorization"] == f"Bearer {ANTHROPIC_KEY}"
    assert ANTHROPIC_KEY not in out


# --- OpenAI-compatible --------------------------------------------------------------------------------------


def test_openai_two_step_write_file_run_ends_done_and_logs_cached_tokens(
    ip, workspace: Path, openai_fake, monkeypatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    openai_fake.play(
        openai_wire.answer(
            "Creating it.",
            [("call_w1", "write_file", {"path": "hello.py", "content": "print('hi')\n"})],
            usage={"prompt_tokens": 2000, "completion_tokens": 30},
        ),
        openai_wire.answer(
            "hello.py is written.",
            usage={
                "prompt_tokens": 2100,
                "completion_tokens": 9,
                "prompt_tokens_details": {"cached_tokens": 1920},
            },
        ),
    )
    out = run_magic(ip, 'agent --provider openai --mode auto "create hello.py"')
    assert (workspace / "hello.py").read_text() == "print('hi')\n"
    assert "Creating it." in out and "hello.py is written." in out and "✓ done · 2 steps" in out

    first, second = openai_fake.requests
    assert first.headers["authorization"] == f"Bearer {OPENAI_KEY}"
    assert first.body["model"] == "gpt-5.5" and first.body["stream_options"] == {"include_usage": True}
    assert first.body["messages"][0]["role"] == "system"
    assistant, tool = second.body["messages"][2:4]
    assert assistant["tool_calls"][0]["id"] == "call_w1"
    assert tool["role"] == "tool" and tool["tool_call_id"] == "call_w1" and "hello.py" in tool["content"]

    usages = log_entries(ip, "usage")
    assert [usage_of(e) for e in usages] == [(2000, 30, 0, 0), (180, 9, 0, 1920)]
    assert OPENAI_KEY not in (current_agent(ip).session.dir / "conversation.jsonl").read_text()


def test_openai_context_length_exceeded_compacts_once_and_retries_once(ip, openai_fake) -> None:
    # A local endpoint (no OPENAI_API_KEY): nothing to authorize with.
    openai_fake.play(openai_wire.answer("Noted."))
    run_magic(ip, "agent --provider openai --mode auto", LONG_BRIEF)
    openai_fake.play(
        openai_wire.too_long(),
        openai_wire.completion("## Confirmed requirements\n- the background brief (user)"),
        openai_wire.answer("Done after compacting."),
    )
    out = run_magic(ip, 'agent --provider openai --mode auto "now do it"')
    assert "compacted (forced)" in out and "Done after compacting." in out and "✓ done · 1 step" in out

    refused, summary, retry = openai_fake.requests[1:]
    assert all("authorization" not in r.headers for r in openai_fake.requests)
    assert LONG_BRIEF.strip() in json.dumps(refused.body)
    assert summary.body["stream"] is False
    assert summary.body["messages"][-1]["content"].endswith(SUMMARY_INSTRUCTION)
    sent = json.dumps(retry.body["messages"])
    assert "<summary>" in sent and LONG_BRIEF.strip() not in sent
    assert [(c["trigger"], c["ok"]) for c in log_entries(ip, "compact")] == [("forced", True)]


def test_a_manual_compact_before_any_run_uses_the_runs_output_cap(
    ip, workspace: Path, anthropic_fake
) -> None:
    """``%compact`` right after a resume (no run in this kernel yet) builds its provider from
    the same settings a run would: a ``max_output_tokens`` override caps the summary request.
    (It used to build one from provider, model, window and script only, so the summary asked
    for the whole 20,000-token reserve, over the model's configured cap.)"""
    from tests.scripts import scripted_agent

    path = workspace / "brief.json"
    path.write_text(json.dumps({"model": "scripted-test", "turns": [{"text": "Noted."}]}))
    earlier = scripted_agent(workspace, str(path))
    assert earlier.run(LONG_BRIEF).status == "done"
    earlier.close()

    ip.run_line_magic("config", "PseudoClaude.provider = 'anthropic'")
    ip.run_line_magic("config", "PseudoClaude.max_output_tokens = 4096")
    run_magic(ip, "sessions resume --last")
    assert current_agent(ip).last_provider is None  # no run in this kernel: nothing to reuse
    anthropic_fake.play(anthropic_wire.message("## Confirmed requirements\n- the background brief (user)"))
    out = run_magic(ip, "compact")
    assert "compacted: ~" in out
    (summary,) = anthropic_fake.requests
    assert summary.body["max_tokens"] == 4096
    assert summary.body["messages"][-1]["content"][-1]["text"] == SUMMARY_INSTRUCTION
