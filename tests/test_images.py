"""Images (issue-14, SPEC §18): the part format, the session's image store, the loader's check,
the estimate, and both wire forms against the fake servers (real SDK / httpx).

A purpose-made tool returns ``ToolOutput(text, images)`` the way ``run_python``'s executor
does; the runner stores the bytes in the session and the providers read them back from
there at request time.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest
from pydantic import Field

from pseudoclaude_nb.context.estimate import estimate_tokens, image_tokens
from pseudoclaude_nb.conversation import Conversation
from pseudoclaude_nb.messages import ImagePart, Message, ToolResult
from pseudoclaude_nb.providers.anthropic import AnthropicProvider
from pseudoclaude_nb.providers.openai_compat import OpenAIProvider
from pseudoclaude_nb.runner import Runner
from pseudoclaude_nb.session import SessionWriter, images, load_session, new_session_dir
from pseudoclaude_nb.session.entries import message_entry
from pseudoclaude_nb.tools import Permissions, Tool, ToolArgs, ToolRegistry
from pseudoclaude_nb.tools.registry import ToolOutput
from tests.fakes import FakeServer
from tests.fakes import anthropic_server as anthropic_wire
from tests.fakes import openai_server as openai_wire
from tests.images_support import gif, jpeg, png, webp_vp8x

KEY = "sk-ant-images-5521"


# --- headers and the store --------------------------------------------------------------------


def test_sniff_reads_dimensions_of_each_format_without_pillow() -> None:
    assert images.sniff(png(640, 480)) == ("image/png", 640, 480)
    assert images.sniff(gif(5, 7)) == ("image/gif", 5, 7)
    assert images.sniff(jpeg(1920, 1080)) == ("image/jpeg", 1920, 1080)
    assert images.sniff(webp_vp8x(300, 200)) == ("image/webp", 300, 200)
    assert images.sniff(b"<svg/>") is None
    assert images.sniff(b"\x89PNG\r\n\x1a\n") is None  # cut short: no crash, no guess


def test_store_is_content_addressed_once_and_read_checks_the_hash(tmp_path: Path) -> None:
    data = png(8, 8)
    part = images.store(tmp_path, data, "image/png")
    digest = hashlib.sha256(data).hexdigest()
    assert part.path == f"images/{digest}.png" and part.sha256 == digest
    assert (part.bytes, part.width, part.height, part.media_type) == (len(data), 8, 8, "image/png")
    assert (tmp_path / part.path).read_bytes() == data
    again = images.store(tmp_path, data, "image/jpeg")  # the claimed type loses to the bytes
    assert again == part and len(list((tmp_path / "images").iterdir())) == 1
    assert images.read(tmp_path, part) == data
    (tmp_path / part.path).write_bytes(data[:-1] + b"\x00")
    with pytest.raises(images.ImageError, match="altered"):
        images.read(tmp_path, part)
    images.store(tmp_path, data)  # an altered copy is rewritten when the image comes again
    assert images.read(tmp_path, part) == data
    with pytest.raises(images.ImageError):
        images.store(tmp_path, b"not an image")
    with pytest.raises(images.ImageError, match="not inside"):
        images.read(tmp_path, part.model_copy(update={"path": "../x.png"}))


def test_store_refuses_a_linked_images_folder(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    session = tmp_path / "s"
    session.mkdir()
    (session / "images").symlink_to(outside)
    with pytest.raises(OSError):
        images.store(session, png())
    assert list(outside.iterdir()) == []


# --- the message model and the log ------------------------------------------------------------


def test_message_without_parts_serializes_as_before() -> None:
    msg = Message(id="m1", role="user", tool_result=ToolResult(call_id="c", content="x"), ts=1.0)
    assert "parts" not in msg.to_dict()
    assert list(message_entry(msg)) == [
        "v",
        "type",
        "id",
        "ts",
        "role",
        "content",
        "tool_calls",
        "tool_result",
    ]


class NoArgs(ToolArgs):
    label: str = Field("", description="unused")


def plot_tool(*pictures: bytes) -> Tool:
    return Tool(
        name="plot",
        description="shows a figure",
        args=NoArgs,
        handler=lambda a: ToolOutput("a figure of the sample", tuple((p, "image/png") for p in pictures)),
    )


def run_once(workspace: Path, provider, tools: ToolRegistry, prompt: str = "plot it"):
    writer = SessionWriter(new_session_dir(workspace), fsync=False)
    conversation = Conversation()
    writer.attach(conversation)
    runner = Runner(
        conversation=conversation,
        provider=provider,
        tools=tools,
        permissions=Permissions("auto"),
        system_prompt="sys",
        writer=writer,
        strict=True,
    )
    summary = runner.run(prompt)
    writer.close()
    return summary, conversation, writer.dir


def test_anthropic_gets_image_blocks_inside_the_tool_result_and_the_log_holds_no_base64(
    workspace: Path,
) -> None:
    picture = png(64, 48, seed=3)
    with FakeServer("anthropic") as fake:
        fake.play(
            anthropic_wire.answer("Plotting.", [("toolu_1", "plot", {})]),
            anthropic_wire.answer("I see a gradient."),
        )
        provider = AnthropicProvider(api_key=KEY, base_url=fake.url, model="claude-sonnet-4-6")
        summary, conversation, session = run_once(workspace, provider, ToolRegistry([plot_tool(picture)]))
    assert summary.status == "done"
    result = fake.requests[1].body["messages"][2]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_1"
    text, image = result["content"]
    assert text == {"type": "text", "text": "a figure of the sample"}
    assert image["type"] == "image" and image["source"]["type"] == "base64"
    assert image["source"]["media_type"] == "image/png"
    assert base64.b64decode(image["source"]["data"]) == picture  # exactly the bytes
    log = (session / "conversation.jsonl").read_bytes()
    assert base64.b64encode(picture)[:40] not in log and image["source"]["data"][:40].encode() not in log
    (part,) = conversation.messages()[2].parts
    assert (session / part.path).read_bytes() == picture
    entry = [json.loads(line) for line in log.splitlines() if b'"parts"' in line][0]
    assert entry["parts"] == [part.model_dump()] and entry["parts"][0]["width"] == 64
    # The first request had no image; the loader restores the part.
    assert "image" not in json.dumps(fake.requests[0].body["messages"])
    loaded = load_session(session)
    assert loaded.messages[2].parts == (part,) and not loaded.problems()


def test_openai_tool_message_keeps_text_and_images_follow_in_a_user_message(workspace: Path) -> None:
    one, two = png(10, 10, seed=1), png(20, 10, seed=2)
    with FakeServer("openai") as fake:
        fake.play(
            openai_wire.answer("", [("call_1", "plot", {}), ("call_2", "plot", {})]),
            openai_wire.answer("Two plots."),
        )
        provider = OpenAIProvider(api_key="sk-test-1", base_url=f"{fake.url}/v1", model="gpt-4o")
        tools = ToolRegistry([plot_tool(one, two)])
        summary, _, _ = run_once(workspace, provider, tools)
    assert summary.status == "done"
    sent = fake.requests[1].body["messages"]
    roles = [m["role"] for m in sent]
    assert roles == ["system", "user", "assistant", "tool", "tool", "user"]
    assert sent[3] == {"role": "tool", "tool_call_id": "call_1", "content": "a figure of the sample"}
    urls = [p["image_url"]["url"] for p in sent[5]["content"] if p["type"] == "image_url"]
    assert len(urls) == 4  # two images per call, both calls
    prefix = "data:image/png;base64,"
    assert all(u.startswith(prefix) for u in urls)
    assert [base64.b64decode(u[len(prefix) :]) for u in urls] == [one, two, one, two]


def test_model_without_images_gets_the_note_and_the_setting_overrides(workspace: Path) -> None:
    picture = png(4, 4)
    part = images.store(workspace, picture)
    msg = Message(role="user", tool_result=ToolResult(call_id="c1", content="done"), parts=(part,))
    call = Message(role="assistant", tool_calls=())
    del call
    source = lambda p: images.read(workspace, p)  # noqa: E731
    auto = OpenAIProvider(api_key="k", base_url="http://127.0.0.1:9/v1", model="deepseek-chat")
    body = auto._body(_request([msg], source))
    assert body["messages"][-1]["role"] == "tool"
    assert (
        "takes no images" in body["messages"][-1]["content"] and part.path in body["messages"][-1]["content"]
    )
    always = OpenAIProvider(
        api_key="k", base_url="http://127.0.0.1:9/v1", model="deepseek-chat", send_images="always"
    )
    assert always._body(_request([msg], source))["messages"][-1]["role"] == "user"
    never = AnthropicProvider(api_key=KEY, base_url="http://127.0.0.1:9", send_images="never")
    block = never._params(_request([msg], source))["messages"][0]["content"][0]
    assert isinstance(block["content"], str) and "send_images is 'never'" in block["content"]


def _request(messages, source):
    from pseudoclaude_nb.providers.base import Request

    return Request(system="s", messages=messages, images=source)


def test_corrupt_image_on_resume_is_reported_and_the_request_still_goes(workspace: Path) -> None:
    picture = png(30, 30, seed=9)
    with FakeServer("anthropic") as fake:
        fake.play(anthropic_wire.answer("", [("toolu_1", "plot", {})]), anthropic_wire.answer("ok"))
        provider = AnthropicProvider(api_key=KEY, base_url=fake.url)
        _, conversation, session = run_once(workspace, provider, ToolRegistry([plot_tool(picture)]))
    (part,) = conversation.messages()[2].parts
    (session / part.path).write_bytes(b"\x89PNG garbage")
    loaded = load_session(session)
    assert any(part.path in p and "altered" in p for p in loaded.problems())
    restored = loaded.messages[2]
    assert restored.parts == () and part.path in restored.tool_result.content  # the note stands in
    with FakeServer("anthropic") as fake:
        fake.play(anthropic_wire.answer("still fine"))
        provider = AnthropicProvider(api_key=KEY, base_url=fake.url)
        conversation = Conversation(loaded.messages)
        runner = Runner(
            conversation=conversation,
            provider=provider,
            tools=ToolRegistry([plot_tool(picture)]),
            permissions=Permissions("auto"),
            system_prompt="sys",
            strict=True,
        )
        assert runner.run("and now?").status == "done"
    body = json.dumps(fake.requests[0].body)
    assert '"type": "image"' not in body and "altered" in body


def test_missing_image_file_on_resume_is_reported(workspace: Path) -> None:
    with FakeServer("anthropic") as fake:
        fake.play(anthropic_wire.answer("", [("toolu_1", "plot", {})]), anthropic_wire.answer("ok"))
        provider = AnthropicProvider(api_key=KEY, base_url=fake.url)
        _, conversation, session = run_once(workspace, provider, ToolRegistry([plot_tool(png())]))
    (part,) = conversation.messages()[2].parts
    (session / part.path).unlink()
    loaded = load_session(session)
    assert loaded.bad_images and "missing" in loaded.bad_images[0]
    assert "missing" in loaded.messages[2].tool_result.content


def test_unknown_part_types_are_ignored_by_the_loader(tmp_path: Path) -> None:
    session = tmp_path / "s"
    session.mkdir()
    entry = {
        "v": 1,
        "type": "message",
        "id": "m1",
        "ts": 1.0,
        "role": "user",
        "content": "hi",
        "parts": [{"type": "audio", "path": "a.wav"}],
    }
    (session / "conversation.jsonl").write_text(json.dumps(entry) + "\n")
    loaded = load_session(session)
    assert loaded.messages[0].content == "hi" and loaded.messages[0].parts == () and not loaded.bad_lines


@pytest.fixture
def no_pillow(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on a machine without the ``images`` extra (the test extra installs Pillow)."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "PIL" else real(name, *a)
    )


def test_oversized_image_is_refused_with_a_note_without_pillow(workspace: Path, no_pillow: None) -> None:
    part = ImagePart(path="images/x.png", media_type="image/png", bytes=10, sha256="0", width=9000, height=10)
    msg = Message(role="user", tool_result=ToolResult(call_id="c1", content="done"), parts=(part,))
    provider = AnthropicProvider(api_key=KEY, base_url="http://127.0.0.1:9")
    block = provider._params(_request([msg], lambda p: b"0123456789"))["messages"][0]["content"][0]
    assert "over Anthropic's limit" in block["content"] and "Pillow" in block["content"]


def test_oversized_image_is_downscaled_with_pillow_and_the_session_keeps_the_original(
    workspace: Path,
) -> None:
    """With Pillow installed (the ``images`` extra), a figure wider than Anthropic's 8,000 pixels
    goes out as a JPEG within the limits, through the real SDK; the session's copy is untouched."""
    pil = pytest.importorskip("PIL.Image")
    import io

    picture = png(9_000, 30, noise=True)
    with FakeServer("anthropic") as fake:
        fake.play(anthropic_wire.answer("", [("toolu_1", "plot", {})]), anthropic_wire.answer("wide"))
        provider = AnthropicProvider(api_key=KEY, base_url=fake.url, model="claude-sonnet-4-6")
        summary, conversation, session = run_once(workspace, provider, ToolRegistry([plot_tool(picture)]))
    assert summary.status == "done"
    _, image = fake.requests[1].body["messages"][2]["content"][0]["content"]
    assert image["source"]["media_type"] == "image/jpeg"
    sent = base64.b64decode(image["source"]["data"])
    with pil.open(io.BytesIO(sent)) as img:
        assert img.format == "JPEG" and max(img.size) <= 8_000 and img.size[0] > img.size[1]
    (part,) = conversation.messages()[2].parts
    assert (session / part.path).read_bytes() == picture and part.width == 9_000


def test_image_pillow_cannot_read_is_refused_like_a_huge_one() -> None:
    pytest.importorskip("PIL.Image")
    part = ImagePart(path="images/x.png", media_type="image/png", bytes=10, sha256="0", width=9000, height=10)
    msg = Message(role="user", tool_result=ToolResult(call_id="c1", content="done"), parts=(part,))
    provider = AnthropicProvider(api_key=KEY, base_url="http://127.0.0.1:9")
    block = provider._params(_request([msg], lambda p: b"not a png at all"))["messages"][0]["content"][0]
    assert block["content"].count("not sent") == 1 and "over Anthropic's limit" in block["content"]


# --- the estimate -----------------------------------------------------------------------------


def test_estimate_grows_with_image_size() -> None:
    def with_image(w: int, h: int) -> Message:
        part = ImagePart(path="images/a.png", media_type="image/png", bytes=1, sha256="a", width=w, height=h)
        return Message(role="user", tool_result=ToolResult(call_id="c", content="x"), parts=(part,))

    plain = estimate_tokens([Message(role="user", tool_result=ToolResult(call_id="c", content="x"))])
    small, large = estimate_tokens([with_image(200, 200)]), estimate_tokens([with_image(1200, 1000)])
    assert plain < small < large
    assert image_tokens(1000, 1000) == 1334  # Anthropic: width * height / 750
    assert image_tokens(8000, 8000) == image_tokens(4000, 4000)  # capped: the API downsizes


# --- context management -----------------------------------------------------------------------


def _imaged(content: str = "x", w: int = 640, h: int = 480) -> Message:
    part = ImagePart(path="images/ab.png", media_type="image/png", bytes=9, sha256="ab", width=w, height=h)
    return Message(role="user", tool_result=ToolResult(call_id="c", content=content), parts=(part,))


def test_context_shows_images_as_their_own_part_only_when_there_are_any() -> None:
    from pseudoclaude_nb.context.manifest import manifest
    from pseudoclaude_nb.magics.context import render_manifest

    def shown(messages):
        m = manifest(sections=[], messages=messages, tools=[], context_window=200_000, threshold=150_000)
        return m, render_manifest(m, title="next request")

    m, text = shown([_imaged(w=1200, h=1000)])
    assert m.parts["images"] == 1600 and m.image_count == 1
    assert "images" in text and "1 images" in text
    assert m.parts["tool_results"] < 10  # the image is not counted twice
    m, text = shown([Message(role="user", content="hi")])
    assert "images" not in text.replace("messages", "")


def test_layer2_sends_images_older_than_the_tail_as_their_notes() -> None:
    from pseudoclaude_nb.context.summarize import summary_messages

    sent = summary_messages([Message(role="user", content="plot"), _imaged("drawn")])
    assert all(not m.parts for m in sent)
    assert "images/ab.png" in sent[1].tool_result.content and sent[1].tool_result.content.startswith("drawn")


def test_rollover_handoff_lists_the_window_images() -> None:
    from pseudoclaude_nb.context.handoff import Handoff, first_message
    from pseudoclaude_nb.context.rollover import _window_images

    listed = _window_images([_imaged(), _imaged()], Path("/s/sess"))
    assert listed == ["/s/sess/images/ab.png (image/png, 640x480)"]
    text = first_message(
        session_id="s",
        message_uuid=None,
        pinned_request="go",
        handoff=Handoff(agent_inferences=["a plot"]),
        related_files=[],
        reason="model",
        images=listed,
    )
    block = text.split("<related_files>")[1].split("</related_files>")[0]
    assert "/s/sess/images/ab.png (image/png, 640x480) (image)" in block and "(none)" not in block


# --- widgets ----------------------------------------------------------------------------------


def test_tool_line_shows_thumbnails_and_the_spill_browser_and_timeline_list_images(workspace: Path) -> None:
    from pseudoclaude_nb.events import ToolFinished
    from pseudoclaude_nb.magics.render import tool_result_bundle
    from pseudoclaude_nb.messages import ToolCall
    from pseudoclaude_nb.session.timeline import build_timeline
    from pseudoclaude_nb.widgets.spills import SpillBrowser
    from pseudoclaude_nb.widgets.timeline import timeline_svg

    picture = png(16, 12, seed=4)
    result = ToolResult(call_id="c1", content="drawn").with_images(((picture, "image/png"),))
    bundle = tool_result_bundle(ToolFinished(ToolCall(id="c1", name="run_python"), result, 0.2))
    assert f"data:image/png;base64,{base64.b64encode(picture).decode()}" in bundle["text/html"]
    assert "class='pc-thumb'" in bundle["text/html"] and bundle["text/plain"].endswith("· 1 image")
    with FakeServer("anthropic") as fake:
        fake.play(anthropic_wire.answer("", [("toolu_1", "plot", {})]), anthropic_wire.answer("ok"))
        provider = AnthropicProvider(api_key=KEY, base_url=fake.url)
        _, _, session = run_once(workspace, provider, ToolRegistry([plot_tool(picture)]))
    browser = SpillBrowser(session)
    (row,) = browser.images
    assert row["data"] == picture and not row["problem"]
    assert "1 image(s)" in browser._repr_mimebundle_()["text/plain"]
    assert base64.b64encode(picture).decode() in browser.children[-2].value
    timeline = build_timeline(session)
    marked = [it for it in timeline.items if it.images]
    assert len(marked) == 1 and "1 image" in marked[0].label
    assert "pc-image-mark" in timeline_svg(timeline)


def test_export_and_import_carry_the_images(workspace: Path, tmp_path: Path) -> None:
    from pseudoclaude_nb.session.archive import export_session, import_session

    picture = png(12, 12, seed=6)
    with FakeServer("anthropic") as fake:
        fake.play(anthropic_wire.answer("", [("toolu_1", "plot", {})]), anthropic_wire.answer("ok"))
        provider = AnthropicProvider(api_key=KEY, base_url=fake.url)
        _, conversation, session = run_once(workspace, provider, ToolRegistry([plot_tool(picture)]))
    (part,) = conversation.messages()[2].parts
    report = import_session(workspace, export_session(workspace, session.name, tmp_path / "s.zip").path)
    assert report.problems == []
    loaded = load_session(workspace / ".pseudoclaude" / "sessions" / report.session_id)
    assert loaded.messages[2].parts == (part,) and not loaded.bad_images


def test_anthropic_many_images_requests_refuse_sides_over_2000_px(
    workspace: Path, no_pillow: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A request holds at most MAX_IMAGES (20) images; the 2,000 px rule is for a cap raised past 20.
    monkeypatch.setattr("pseudoclaude_nb.providers.base.MAX_IMAGES", 100)
    big = images.store(workspace, png(2100, 10, seed=1))
    small = [images.store(workspace, png(8, 8, seed=s)) for s in range(2, 22)]

    def msg(part: ImagePart) -> Message:
        return Message(role="user", content="look", parts=(part,))

    provider = AnthropicProvider(api_key=KEY, base_url="http://127.0.0.1:9")
    source = lambda p: images.read(workspace, p)  # noqa: E731
    few = provider.wire_messages([msg(big)], source)
    assert [b["type"] for b in few[0]["content"]] == ["text", "image"]
    many = provider.wire_messages([msg(big), *map(msg, small)], source)
    blocks = many[0]["content"]
    assert sum(b["type"] == "image" for b in blocks) == 20  # the 2,100 px one became a note
    assert "2,000 pixels a side" in blocks[0]["text"]


def test_anthropic_many_images_requests_downscale_sides_over_2000_px_with_pillow(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pil = pytest.importorskip("PIL.Image")
    monkeypatch.setattr("pseudoclaude_nb.providers.base.MAX_IMAGES", 100)  # see the test above
    import io

    big = images.store(workspace, png(2100, 10, seed=1))
    small = [images.store(workspace, png(8, 8, seed=s)) for s in range(2, 22)]
    provider = AnthropicProvider(api_key=KEY, base_url="http://127.0.0.1:9")
    source = lambda p: images.read(workspace, p)  # noqa: E731
    many = provider.wire_messages(
        [Message(role="user", content="look", parts=(p,)) for p in (big, *small)], source
    )
    first = many[0]["content"][1]
    assert first["type"] == "image" and first["source"]["media_type"] == "image/jpeg"
    with pil.open(io.BytesIO(base64.b64decode(first["source"]["data"]))) as img:
        assert max(img.size) <= 2_000
