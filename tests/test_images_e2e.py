"""Figures reach the model (issue-14) end to end: ``%agent`` in the in-process shell, the real
``run_python`` executor capturing what the code displays, the real SDK / httpx against the
fake servers; then a resume in a new process, with the workspace's file deleted, that sends
the image read back from the session's own copy — and never imports matplotlib or Pillow.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from pseudoclaude_nb.magics import current_agent
from pseudoclaude_nb.magics.python_exec import python_executor
from pseudoclaude_nb.tools.registry import ToolOutput
from tests.fakes import FakeServer
from tests.fakes import anthropic_server as anthropic_wire
from tests.fakes import openai_server as openai_wire
from tests.images_support import png
from tests.scripts import run_magic

KEY = "sk-ant-figures-7730"
SHOW = "from IPython.display import Image, display\nprint('plotted')\ndisplay(Image(filename='plot.png'))"


def _images_in(body: dict) -> list[bytes]:
    """Every Anthropic image block's bytes in a request body, in order."""
    found: list[bytes] = []

    def walk(node) -> None:
        if isinstance(node, dict):
            if node.get("type") == "image":
                found.append(base64.b64decode(node["source"]["data"]))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(body)
    return found


def test_run_python_display_reaches_anthropic_and_a_new_process_resumes_from_the_session_copy(
    ip, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    picture = png(120, 80, seed=5)
    (workspace / "plot.png").write_bytes(picture)
    with FakeServer("anthropic") as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
        fake.play(
            anthropic_wire.answer("Plotting.", [("toolu_1", "run_python", {"code": SHOW})]),
            anthropic_wire.answer("A smooth gradient."),
            anthropic_wire.answer("Still the same gradient."),
        )
        out = run_magic(
            ip, 'agent --provider anthropic --mode auto "plot the sample and tell me what you see"'
        )
        assert "A smooth gradient." in out
        result = fake.requests[1].body["messages"][2]["content"][0]
        assert result["type"] == "tool_result"
        assert result["content"][0]["type"] == "text" and "plotted" in result["content"][0]["text"]
        assert _images_in(fake.requests[1].body) == [picture]
        agent = current_agent(ip)
        session = agent.session.dir
        session_id = session.name
        log = (session / "conversation.jsonl").read_bytes()
        assert base64.b64encode(picture)[:32] not in log
        stored = list((session / "images").iterdir())
        assert [p.read_bytes() for p in stored] == [picture]
        # A new process, the workspace's file gone: the image comes from the session's copy.
        (workspace / "plot.png").unlink()
        ip.run_line_magic("unload_ext", "pseudoclaude_nb")  # releases the session's writer
        try:
            script = textwrap.dedent(
                f"""
                import json, sys
                from IPython.core.interactiveshell import InteractiveShell
                ip = InteractiveShell.instance()  # not IPython.testing: it imports matplotlib
                ip.run_line_magic("load_ext", "pseudoclaude_nb")
                from pseudoclaude_nb.magics import current_agent
                current_agent(ip).settings.workspace = {str(workspace)!r}
                ip.run_line_magic("agent", "--provider anthropic --mode auto --session {session_id} and now?")
                ip.run_line_magic("unload_ext", "pseudoclaude_nb")
                print(json.dumps(sorted(m for m in ("matplotlib", "PIL") if m in sys.modules)))
                """
            )
            done = subprocess.run(
                [sys.executable, "-c", script], cwd=workspace, capture_output=True, text=True, timeout=120
            )
        finally:
            ip.run_line_magic("load_ext", "pseudoclaude_nb")
        assert done.returncode == 0, done.stderr[-2000:]
        assert "Still the same gradient." in done.stdout
        assert done.stdout.strip().splitlines()[-1] == "[]"  # neither imported
        assert len(fake.requests) == 3
        assert _images_in(fake.requests[2].body) == [picture]


def test_openai_gets_the_displayed_image_as_a_data_url(ip, workspace: Path, monkeypatch) -> None:
    picture = png(32, 32, seed=11)
    (workspace / "plot.png").write_bytes(picture)
    with FakeServer("openai") as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{fake.url}/v1")
        fake.play(
            openai_wire.answer("", [("call_1", "run_python", {"code": SHOW})]),
            openai_wire.answer("I see it."),
        )
        out = run_magic(ip, 'agent --provider openai --model gpt-4o --mode auto "plot it"')
    assert "I see it." in out
    sent = fake.requests[1].body["messages"]
    tool = [m for m in sent if m["role"] == "tool"][0]
    assert "plotted" in tool["content"]
    follow = sent[sent.index(tool) + 1]
    assert follow["role"] == "user"
    (url,) = [p["image_url"]["url"] for p in follow["content"] if p["type"] == "image_url"]
    assert base64.b64decode(url.split(",", 1)[1]) == picture and url.startswith("data:image/png;base64,")


def test_executor_captures_displays_svg_and_open_figures(ip, workspace: Path, monkeypatch) -> None:
    run = python_executor(ip)
    picture = png(6, 6)
    ip.user_ns["_pic"] = picture
    out = run("from IPython.display import Image, SVG, display\ndisplay(Image(data=_pic))\n'value'")
    assert isinstance(out, ToolOutput) and out.images == ((picture, "image/png"),)
    assert "'value'" in out.text
    small = run(
        "from IPython.display import SVG, display\ndisplay(SVG('<svg xmlns=\"http://www.w3.org/2000/svg\"/>'))"
    )
    assert isinstance(small, str) and "[displayed SVG]" in small and "<svg" in small
    big_svg = "<svg xmlns='http://www.w3.org/2000/svg'>" + "<g/>" * 5000 + "</svg>"
    ip.user_ns["_svg"] = big_svg
    big = run("from IPython.display import SVG, display\ndisplay(SVG(_svg))")
    assert "not sent" in big and "<g/>" not in big
    # A figure left open, with matplotlib imported by the user (a stand-in module here).
    drawn = png(50, 40, seed=2)

    class Figure:
        stale = True

        def savefig(self, buf, format: str, bbox_inches: str) -> None:  # noqa: A002 - matplotlib's name
            assert format == "png"
            buf.write(drawn)

    pyplot = types.SimpleNamespace(get_fignums=lambda: [1], figure=lambda n: Figure())
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", pyplot)
    out = run("x = 1")
    assert isinstance(out, ToolOutput) and out.images == ((drawn, "image/png"),)


def test_nothing_imports_matplotlib_or_pillow(workspace: Path) -> None:
    code = textwrap.dedent(
        """
        import json, sys
        from IPython.core.interactiveshell import InteractiveShell
        ip = InteractiveShell.instance()  # not IPython.testing: it imports matplotlib
        ip.run_line_magic("load_ext", "pseudoclaude_nb")
        from pseudoclaude_nb.magics.python_exec import python_executor
        from pseudoclaude_nb.session import images
        from pseudoclaude_nb.providers import wire
        out = python_executor(ip)("from IPython.display import Image, display\\n"
            "display(Image(data=open('p.png','rb').read()))")
        assert out.images
        images.store(__import__('pathlib').Path('.'), out.images[0][0])
        print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ("matplotlib", "PIL"))))
        """
    )
    (workspace / "p.png").write_bytes(png())
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=workspace, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_a_cell_s_figure_reaches_the_model_in_the_user_turn(ip, workspace: Path, monkeypatch) -> None:
    picture = png(24, 18, seed=8)
    ip.user_ns["_cell_pic"] = picture
    # Not under capture_output: it swaps the display publisher the recorder watches.
    ip.run_cell(
        "from IPython.display import Image, display\ndisplay(Image(data=_cell_pic))", store_history=True
    )
    with FakeServer("anthropic") as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
        fake.play(anthropic_wire.answer("A small gradient."))
        out = run_magic(ip, 'agent --provider anthropic "what does my plot show?"')
    assert "A small gradient." in out
    (turn,) = fake.requests[0].body["messages"]
    kinds = [b["type"] for b in turn["content"]]
    assert kinds == ["text", "image"] and "what does my plot show?" in turn["content"][0]["text"]
    assert _images_in(fake.requests[0].body) == [picture]
    first = current_agent(ip).session.conversation.messages()[0]
    assert first.notebook is not None and len(first.parts) == 1
    assert (current_agent(ip).session.dir / first.parts[0].path).read_bytes() == picture
