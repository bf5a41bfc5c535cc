"""Pins are counted and bounded (issue 41, SPEC §20 "Pins bounded").

The adversary's run: twelve pins of ~19 KB in a 50,000-token window. ``%context`` said
"~1,955 of 50,000 (4 %)" while its own table listed the pins at 64,904; the next request sent
66,862 tokens, and compaction cannot shrink pins. Now the headline (``estimated_tokens``) and
the gauge include the pins, their total is capped at ``pins_max_share`` of the window (a pin
past it is refused with the figures), and a run whose window is smaller than the pins in force
says so before its request.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from IPython.core.error import UsageError

from tests.fakes import FakeServer, Reply
from tests.fakes import openai_server as wire
from tests.scripts import run_magic, turn, write_script

WINDOW = 50_000
# ~19 KB of varied text (a repeated word would still be ~bytes/3.5 to the estimate).
PIN = " ".join(f"fact-{i:05d} stays as written;" for i in range(700))[:19_000]


def first_run(ip, workspace: Path) -> None:
    ip.run_line_magic("config", f"PseudoClaude.context_window = {WINDOW}")
    answer = turn("hello there") | {"usage": {"input_tokens": 1_900, "output_tokens": 55}}
    path = write_script(workspace, "s", answer)
    run_magic(ip, f"agent --provider scripted --script {path} hi")


def context_json(ip) -> dict:
    return json.loads(run_magic(ip, "context --json"))


def test_pins_are_in_the_headline_estimate_and_the_gauge(ip, workspace: Path) -> None:
    first_run(ip, workspace)
    before = context_json(ip)
    run_magic(ip, f"context pin {PIN}")
    run_magic(ip, f"context pin second {PIN}")
    after = context_json(ip)
    pins = after["parts"]["pins"]
    assert pins > 10_000
    # The headline grew by the pins (the provider's last figure had none of them).
    assert after["estimated_tokens"] - before["estimated_tokens"] >= pins - 50
    assert after["estimated_tokens"] >= pins + after["parts"]["system"]
    # The gauge of %compact --status reads the same figure.
    status = run_magic(ip, "compact --status")
    assert f"~{after['estimated_tokens']:,} of {WINDOW:,} tokens" in status
    # Unpinning takes them out again.
    run_magic(ip, "context unpin 2")
    run_magic(ip, "context unpin 1")
    assert context_json(ip)["estimated_tokens"] == before["estimated_tokens"]


def test_a_pin_past_the_share_is_refused_with_the_figures(ip, workspace: Path) -> None:
    first_run(ip, workspace)
    run_magic(ip, f"context pin {PIN}")
    run_magic(ip, f"context pin two {PIN}")
    with pytest.raises(UsageError) as refused:
        run_magic(ip, f"context pin three {PIN}")
    message = str(refused.value)
    assert "refused" in message and f"{WINDOW:,}-token window" in message
    assert "may take 25% of it (~12,500 tokens" in message and "pins_max_share = 0.25" in message
    assert "2 pins" in run_magic(ip, "context pins")  # the third was not kept
    # The share is a setting (pinned name): raised, the third pin fits.
    ip.run_line_magic("config", "PseudoClaude.pins_max_share = 0.5")
    run_magic(ip, f"context pin three {PIN}")
    assert "3 pins" in run_magic(ip, "context pins")


def test_the_share_is_checked_before_any_session(ip, workspace: Path) -> None:
    ip.run_line_magic("config", "PseudoClaude.context_window = 20000")
    ip.run_line_magic("config", "PseudoClaude.provider = 'demo'")
    with pytest.raises(UsageError, match=r"refused.*20,000-token window"):
        run_magic(ip, f"context pin {PIN}")


def test_pins_max_share_must_be_a_share(ip) -> None:
    from IPython.utils.capture import capture_output

    from pseudoclaude_nb.magics import current_agent

    for bad in ("3", "0", "-0.1", "float('nan')"):
        with capture_output() as out:
            ip.run_cell(f"%config PseudoClaude.pins_max_share = {bad}")
        said = out.stdout + out.stderr
        assert "%config PseudoClaude.pins_max_share:" in said and "refused" in said, said
        assert "the value in force stays 0.25" in said
        assert current_agent(ip).settings.pins_max_share == 0.25


def test_a_learned_window_smaller_than_the_pins_is_said_before_the_request(
    workspace: Path, agents, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pseudoclaude_nb.agent import Agent
    from pseudoclaude_nb.config import PseudoClaude

    props = {
        "default_generation_settings": {"n_ctx": 4096, "n_predict": -1},
        "chat_template_caps": {"supports_tools": True, "supports_tool_calls": True},
    }
    with FakeServer("local", probes=True) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        agent = Agent(
            PseudoClaude(
                workspace=str(workspace), provider="openai", model="m", fsync=False, memory_policy="off"
            )
        )
        agents.append(agent)
        agent.pins.add(PIN[:6_000])  # held: fine in the model table's 128,000 window
        seen: list = []
        server.play(Reply(200, props), wire.answer("ok"))
        agent.run("hi", listeners=[seen.append])
    said = [e.text for e in seen if type(e).__name__ == "Notice"]
    pins = [t for t in said if t.startswith("the pins in force")]
    assert pins, said
    assert "4,096-token window" in pins[0] and "llama.cpp /props n_ctx" in pins[0]
    assert "%context unpin" in pins[0]
    # Said before the request: before the first step started.
    assert seen.index(next(e for e in seen if getattr(e, "text", "") == pins[0])) < next(
        i for i, e in enumerate(seen) if type(e).__name__ == "StepStarted"
    )
