"""Workspace trust, resource bounds (SPEC §19, finding 10): hostile input cannot make a request
or a tool cost unbounded time or memory.

A decompression-bomb PNG (13,000 x 13,000 pixels in 164 KB) is refused from its header, with
and without Pillow, by the store and again at request time (a crafted session), never decoded;
peak memory is measured in a subprocess. A request carries at most ``MAX_IMAGES`` images.
``inspect_variable`` returns in time whatever a user class's dunder methods do.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import textwrap
import time
import zlib
from pathlib import Path

import pytest

from pseudoclaude_nb import image_fit
from pseudoclaude_nb.messages import Message, ToolResult
from pseudoclaude_nb.notebook import inspect_variable
from pseudoclaude_nb.providers.anthropic import AnthropicProvider
from pseudoclaude_nb.providers.base import MAX_IMAGES, Request, cap_images
from pseudoclaude_nb.providers.openai_compat import OpenAIProvider
from pseudoclaude_nb.session import images
from pseudoclaude_nb.tools import ToolRegistry
from tests.fakes import FakeServer
from tests.fakes import anthropic_server as anthropic_wire
from tests.images_support import png
from tests.test_images import plot_tool, run_once

KEY = "sk-ant-bounds-7730"
BOMB_SIDE = 13_000


def _chunk(kind: bytes, body: bytes) -> bytes:
    return (
        struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)
    )


def bomb_png(side: int = BOMB_SIDE) -> bytes:
    """A valid 8-bit greyscale PNG of ``side`` x ``side`` zeros: ~164 KB for 169 megapixels."""
    z = zlib.compressobj(9)
    row = bytes(side + 1)  # filter byte + one byte a pixel
    idat = b"".join(z.compress(row) for _ in range(side)) + z.flush()
    ihdr = struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", idat) + _chunk(b"IEND", b"")


@pytest.fixture(scope="module")
def bomb() -> bytes:
    return bomb_png()


# --- the decompression bomb -------------------------------------------------------------------


def test_the_store_refuses_a_bomb_from_its_header(tmp_path: Path, bomb: bytes) -> None:
    assert len(bomb) < 200_000 and images.sniff(bomb) == ("image/png", BOMB_SIDE, BOMB_SIDE)
    with pytest.raises(images.ImageError, match=r"\(169 megapixels\), over the 50 megapixels"):
        images.store(tmp_path, bomb)
    assert not (tmp_path / images.IMAGE_DIR).exists()


def test_a_tool_displaying_a_bomb_gets_a_note_and_the_request_no_image(workspace: Path, bomb: bytes) -> None:
    with FakeServer("anthropic") as fake:
        fake.play(anthropic_wire.answer("", [("toolu_1", "plot", {})]), anthropic_wire.answer("ok"))
        provider = AnthropicProvider(api_key=KEY, base_url=fake.url, model="claude-sonnet-4-6")
        summary, conversation, session = run_once(workspace, provider, ToolRegistry([plot_tool(bomb)]))
    assert summary.status == "done"
    result = fake.requests[1].body["messages"][2]["content"][0]
    assert isinstance(result["content"], str) and "not kept" in result["content"]
    assert "over the 50 megapixels" in result["content"]
    assert conversation.messages()[2].parts == () and images.stored_files(session) == []


_PROBE = textwrap.dedent(
    """
    import hashlib, json, resource, sys, tempfile, time
    from pathlib import Path
    if sys.argv[2] == "no-pillow":
        sys.modules["PIL"] = None
    from pseudoclaude_nb.messages import ImagePart, Message, ToolResult
    from pseudoclaude_nb.providers.anthropic import AnthropicProvider
    from pseudoclaude_nb.providers.base import Request
    from pseudoclaude_nb.providers.openai_compat import OpenAIProvider
    from pseudoclaude_nb.session import images

    folder = Path(sys.argv[1])
    data = Path(sys.argv[3]).read_bytes()
    try:
        images.store(folder, data)
        stored = True
    except images.ImageError:
        stored = False
    # A crafted session (or one written before the bound): the bomb is in the window anyway.
    digest = hashlib.sha256(data).hexdigest()
    (folder / "images").mkdir(exist_ok=True)
    (folder / "images" / f"{digest}.png").write_bytes(data)
    part = ImagePart(path=f"images/{digest}.png", media_type="image/png", bytes=len(data),
                     sha256=digest, width=10, height=10)  # the log may lie: the bytes decide
    msg = Message(role="user", tool_result=ToolResult(call_id="c1", content="done"), parts=(part,))
    request = Request(system="s", messages=[msg], images=lambda p: images.read(folder, p))
    started = time.monotonic()
    texts = []
    for _ in range(2):  # two requests: the second must not pay again
        a = AnthropicProvider(api_key="sk-ant-probe-000000", base_url="http://127.0.0.1:9")
        texts.append(json.dumps(a._params(request)["messages"]))
        o = OpenAIProvider(api_key="sk-probe-000000", base_url="http://127.0.0.1:9", model="gpt-4o")
        texts.append(json.dumps(o._body(request)["messages"]))
    # ru_maxrss keeps the parent's peak across fork+exec on Linux; VmHWM is this process's own.
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    status = Path("/proc/self/status")
    if status.exists():
        peak_kb = next(int(l.split()[1]) for l in status.read_text().splitlines() if l.startswith("VmHWM:"))
    print(json.dumps({
        "stored": stored,
        "seconds": time.monotonic() - started,
        "peak_mb": peak_kb / 1024,
        "images_sent": sum(t.count('"image"') + t.count('"image_url"') for t in texts),
        "refused": all("over the 50 megapixels" in t for t in texts),
    }))
    """
)


@pytest.mark.parametrize("pillow", ["pillow", "no-pillow"])
def test_a_bomb_in_the_window_is_never_decoded(tmp_path: Path, bomb: bytes, pillow: str) -> None:
    """Peak memory of a process that stores the bomb and builds two requests of each provider
    with it in the window: far below the 1.5 GB one decode took (13,000^2 x RGB, resized)."""
    if pillow == "pillow":
        pytest.importorskip("PIL.Image")
    (tmp_path / "bomb.png").write_bytes(bomb)
    session = tmp_path / "session"
    session.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(session), pillow, str(tmp_path / "bomb.png")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    probe = json.loads(done.stdout.strip().splitlines()[-1])
    assert probe["peak_mb"] < 200, probe  # ~100 MB is the interpreter with the SDKs imported
    assert probe["stored"] is False and probe["refused"] and probe["images_sent"] == 0, probe


def test_a_downscaled_copy_is_made_once_per_image(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pytest.importorskip("PIL.Image")
    image_fit.clear_cache()
    made = []
    real = image_fit._downscale
    monkeypatch.setattr(image_fit, "_downscale", lambda *a: made.append(1) or real(*a))
    part = images.store(tmp_path, png(9_000, 30, noise=True))
    msg = Message(role="user", tool_result=ToolResult(call_id="c1", content="done"), parts=(part,))
    request = Request(system="s", messages=[msg], images=lambda p: images.read(tmp_path, p))
    provider = AnthropicProvider(api_key=KEY, base_url="http://127.0.0.1:9")
    first = provider._params(request)["messages"]
    assert provider._params(request)["messages"] == first and made == [1]
    image = first[0]["content"][0]["content"][1]
    assert image["type"] == "image" and image["source"]["media_type"] == "image/jpeg"


def test_pillow_is_never_handed_more_pixels_than_the_bound(tmp_path: Path) -> None:
    """A format the header reader does not know goes to Pillow only for the four formats, and
    Pillow's own reading of the size is checked again before anything is decoded."""
    pytest.importorskip("PIL.Image")
    image_fit.clear_cache()
    assert image_fit.fit(bomb_png(8_000), limit=5 << 20, max_side=2_000) is None  # 64 MP: not decoded
    assert image_fit.fit(b"BM" + bytes(100), limit=5 << 20, max_side=2_000) is None  # a BMP header


# --- images per request -----------------------------------------------------------------------


def _many(tmp_path: Path, count: int) -> list[Message]:
    out = []
    for i in range(count):
        part = images.store(tmp_path, png(4, 3, seed=i))
        if i % 2:
            out.append(Message(role="user", content=f"figure {i}", parts=(part,)))
        else:
            result = ToolResult(call_id=f"c{i}", content=f"plot {i}")
            out.append(Message(role="user", tool_result=result, parts=(part,)))
    return out


def test_a_request_carries_at_most_the_newest_max_images(tmp_path: Path) -> None:
    messages = _many(tmp_path, 150)
    capped = cap_images(messages)
    request = Request(system="s", messages=messages, images=lambda p: images.read(tmp_path, p))
    kept = [p for m in capped for p in m.parts]
    assert MAX_IMAGES <= 20 and kept == [p for m in messages[-MAX_IMAGES:] for p in m.parts]
    assert capped[-MAX_IMAGES:] == messages[-MAX_IMAGES:]  # untouched, as is
    old_result, old_text = capped[0], capped[1]
    assert "left out of this request" in old_result.tool_result.content
    assert old_result.tool_result.content.startswith("plot 0\n[image images/")
    assert old_text.content.startswith("figure 1\n[image ") and "left out" in old_text.content
    assert [m.id for m in capped] == [m.id for m in messages]

    anthropic = AnthropicProvider(api_key=KEY, base_url="http://127.0.0.1:9")
    sent = json.dumps(anthropic._params(request)["messages"])
    assert sent.count('"type": "image"') == MAX_IMAGES
    openai = OpenAIProvider(api_key="sk-test-bounds-000", base_url="http://127.0.0.1:9", model="gpt-4o")
    sent = json.dumps(openai._body(request)["messages"])
    assert sent.count('"type": "image_url"') == MAX_IMAGES


def test_the_cap_keeps_the_newest_parts_of_one_message(tmp_path: Path) -> None:
    parts = tuple(images.store(tmp_path, png(4, 3, seed=i)) for i in range(5))
    msg = Message(role="user", content="five", parts=parts)
    capped = cap_images([msg], 2)[0]
    assert capped.parts == parts[3:] and capped.content.count("left out of this request") == 3


# --- inspect_variable -------------------------------------------------------------------------


class Sleepy(list):
    def __len__(self) -> int:
        time.sleep(60)
        return 0

    def __iter__(self):
        time.sleep(60)
        return iter(())

    def __repr__(self) -> str:
        time.sleep(60)
        return "never"


class Spinning(dict):
    def __len__(self) -> int:
        while True:
            pass

    def __repr__(self) -> str:
        raise RuntimeError("no repr here")


class Hanging:
    def __repr__(self) -> str:
        time.sleep(60)
        return "never"


@pytest.mark.parametrize(
    ("value", "facts"),
    [
        (Sleepy([1, 2, 3]), ["len: 3", "first items: 1, 2, 3", "repr: (repr did not finish within 0.3 s"]),
        (Spinning(a=1), ["len: 1", "keys: 'a'", "repr: (repr raised RuntimeError: no repr here)"]),
        ([Hanging(), Hanging(), 1], ["len: 3", "item types: Hanging, int", "repr: (repr did not finish"]),
    ],
    ids=["sleeping-list", "spinning-dict", "hanging-items"],
)
def test_inspect_variable_returns_in_time_whatever_the_dunders_do(value: object, facts: list[str]) -> None:
    started = time.monotonic()
    text = inspect_variable({"x": value}, "x", seconds=0.3)
    assert time.monotonic() - started < 0.6 + 0.5  # the whole describe is capped at twice the repr's cap
    for fact in facts:
        assert fact in text, text


def test_a_list_subclass_keeping_the_builtin_repr_is_shown_without_its_overrides() -> None:
    class Tracked(list):
        def __iter__(self):
            raise AssertionError("the subclass's __iter__ ran")

    text = inspect_variable({"t": Tracked(range(1_000))}, "t", seconds=0.3)
    assert "len: 1,000" in text and "repr: [0, 1, 2," in text and "...]" in text
