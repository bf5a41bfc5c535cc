"""The spill browser: which tool results Layer 1 moved to files, and their full text."""

from __future__ import annotations

import html
import os
import re
from pathlib import Path
from typing import Any

import ipywidgets

from .. import safeio
from ..errors import UnsafePathError
from ..session import images
from ..session.entries import MessageEntry, parse_line
from ..session.loader import load_session, log_path
from ..textsafe import printable
from ..workspace import SPILL_DIR
from .settle import Settles
from .theme import FG2
from .thumbs import thumbnail

# What a spill entry may name: a file directly in tool-results/ (context.spill.safe_name + .txt).
_SPILL_PATH = re.compile(rf"{SPILL_DIR}/[A-Za-z0-9_-][A-Za-z0-9_.~-]{{0,199}}")


def spill_path(session_dir: Path, rel: object) -> Path | None:
    """The file a log's spill entry names, or None when it would lie outside ``tool-results/``.

    A log can come from anywhere (an import, a cloned repository): ``../../etc/shadow`` or an
    absolute path is never opened.
    """
    if not isinstance(rel, str) or not _SPILL_PATH.fullmatch(rel) or ".." in rel:
        return None
    return Path(session_dir) / rel


def _read_head(path: Path | None, size: int) -> bytes:
    if path is None:
        raise UnsafePathError("the log names a file outside this session's tool-results/")
    fd = safeio.open_file(path)  # no link followed, regular files only
    try:
        return os.read(fd, size)
    finally:
        os.close(fd)


SHOW_CAP = 1_000_000  # bytes shown by "full text": a browser tab holds this comfortably


def _calls(session_dir: Path) -> dict[str, dict[str, Any]]:
    """Arguments of every tool call in the physical log, by call id (compacted ones too)."""
    calls: dict[str, dict[str, Any]] = {}
    try:
        fd = safeio.open_file(log_path(session_dir))  # no link followed, regular files only
        with os.fdopen(fd, "rb") as f:
            for raw in f:
                if b'"tool_calls"' not in raw:
                    continue
                entry = parse_line(raw)  # the one parser of log lines
                if isinstance(entry, MessageEntry):
                    for call in entry.message.tool_calls:
                        calls[call.id] = call.arguments
    except OSError:
        pass
    return calls


def call_target(arguments: dict[str, Any]) -> str:
    """What a call worked on, in a few words: its file, command, pattern or query."""
    for key in ("path", "command", "pattern", "query", "code", "name"):
        if key in arguments:
            text = " ".join(str(arguments[key]).split())
            return text if len(text) <= 60 else text[:59] + "…"
    return ""


def spill_rows(session_dir: Path) -> list[dict[str, Any]]:
    """Spill entries of the log, with what the call worked on and a preview of each file."""
    calls = _calls(Path(session_dir))
    rows = []
    for entry in load_session(session_dir, full=True).spills:  # every spill, not just the recent ones
        path = spill_path(session_dir, entry.path)
        try:
            head = _read_head(path, 300).decode("utf-8", "replace")
        except OSError as exc:
            head = f"(file unreadable: {exc.strerror or exc})"
        rows.append(
            {
                "tool": str(entry.tool),
                "call_id": str(entry.call_id),
                "target": call_target(calls.get(str(entry.call_id), {})),
                "bytes": entry.bytes if 0 <= entry.bytes < 1 << 62 else 0,
                "path": path if path is not None else Path(session_dir) / SPILL_DIR / "(refused)",
                "preview": head,
            }
        )
    return rows


def image_rows(session_dir: Path) -> list[dict[str, Any]]:
    """The session's image parts (issue-14), each file once, checked, with its bytes for a preview."""
    rows, seen = [], set()
    for m in load_session(session_dir, full=True).messages:
        for part in m.parts:
            if part.path in seen:
                continue
            seen.add(part.path)
            try:
                data, problem = images.read(session_dir, part), ""
            except images.ImageError as exc:
                data, problem = b"", str(exc)
            rows.append({"part": part, "data": data, "problem": problem})
    return rows


def images_text(rows: list[dict[str, Any]]) -> str:
    lines = [f"{len(rows)} image(s):"]
    for r in rows:
        p = r["part"]
        lines.append(
            f"  {p.path}  {p.media_type} {p.width}x{p.height} {p.bytes:>10,} bytes  {r['problem']}".rstrip()
        )
    return "\n".join(lines)


def spills_text(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "no spilled tool results in this session"
    lines = [f"{len(rows)} spilled tool result(s):"]
    for r in rows:
        first = " ".join(r["preview"].split())[:60]
        target = r.get("target") or r["call_id"]
        lines.append(f"  {r['tool']}({target}) · {r['bytes']:,} bytes → {r['path'].name}")
        lines.append(f"      {first}")
    return "\n".join(lines)


def spills_html(rows: list[dict[str, Any]]) -> str:
    """The saved-notebook form: one line per spilled result, with its preview."""
    items = "".join(
        f"<li><code>{html.escape(str(r['tool']))}({html.escape(r.get('target') or str(r['call_id']))})</code>"
        f" · {r['bytes']:,} bytes → <code>{html.escape(r['path'].name)}</code>"
        f"<pre style='margin:0;font-size:85%;max-height:5em;overflow:hidden'>{html.escape(r['preview'])}</pre></li>"
        for r in rows
    )
    return f"<div class='pc-spills-static'><b>{len(rows)} spilled tool result(s)</b><ul>{items}</ul></div>"


class SpillBrowser(Settles, ipywidgets.VBox):
    """One row per spilled result: what the call worked on, its size and file, a preview,
    and a button that shows the full text below (press again to hide it)."""

    def __init__(self, session_dir: Path, **kwargs: Any) -> None:
        self.rows = spill_rows(session_dir)
        self.full = ipywidgets.HTML()
        self.showing: dict[str, Any] | None = None
        self.buttons: list[Any] = []
        children: list[Any] = [ipywidgets.HTML(value=f"<b>{len(self.rows)} spilled tool result(s)</b>")]
        for r in self.rows:
            button = ipywidgets.Button(
                description="full text", tooltip=str(r["path"].name), layout={"width": "90px"}
            )
            button.on_click(lambda _b, r=r: self.toggle(r))
            self.buttons.append(button)
            target = html.escape(r.get("target") or str(r["call_id"]))
            info = ipywidgets.HTML(
                value=(
                    f"<code>{html.escape(str(r['tool']))}({target})</code> · {r['bytes']:,} bytes → "
                    f"<code>{html.escape(r['path'].name)}</code> "
                    f"<span style='color:{FG2}'>(call {html.escape(str(r['call_id']))})</span><br>"
                    f"<pre style='margin:0;font-size:85%;max-height:5em;overflow:hidden'>"
                    f"{html.escape(r['preview'])}</pre>"
                )
            )
            children.append(ipywidgets.HBox([button, info]))
        self.images = image_rows(session_dir)
        if self.images:
            previews = []
            for r in self.images:
                p = r["part"]
                label = f"{p.path} · {p.media_type} {p.width}x{p.height} · {p.bytes:,} bytes"
                shown = thumbnail(r["data"], p.media_type, px=96, title=label) if r["data"] else ""
                problem = f" <b>{html.escape(r['problem'])}</b>" if r["problem"] else ""
                previews.append(
                    f"<div class='pc-image-row'>{shown} <code>{html.escape(label)}</code>{problem}</div>"
                )
            children.append(ipywidgets.HTML(value=f"<b>{len(self.images)} image(s)</b>" + "".join(previews)))
        children.append(self.full)
        super().__init__(children=children, **kwargs)

    def toggle(self, row: dict[str, Any]) -> None:
        if self.showing is row:
            self.hide()
        else:
            self.show(row)

    def hide(self) -> None:
        self.showing, self.full.value = None, ""
        for b in self.buttons:
            b.description = "full text"

    def show(self, row: dict[str, Any]) -> None:
        for b, r in zip(self.buttons, self.rows, strict=True):
            b.description = "hide" if r is row else "full text"
        self.showing = row
        try:
            data = _read_head(
                spill_path(row["path"].parents[1], f"{SPILL_DIR}/{row['path'].name}"), SHOW_CAP + 1
            )
        except OSError as exc:
            self.full.value = f"<b>cannot read {html.escape(str(row['path']))}: {html.escape(str(exc))}</b>"
            return
        text = data[:SHOW_CAP].decode("utf-8", "replace")
        more = f"\n… (first {SHOW_CAP:,} bytes shown)" if len(data) > SHOW_CAP else ""
        lines = text.count("\n") + 1
        self.full.value = (
            f"<details open class='pc-spill-full'><summary><b>{html.escape(str(row['path'].name))}</b>"
            f" · {len(data[:SHOW_CAP]):,} bytes, {lines:,} lines (click to fold)</summary>"
            f"<pre style='max-height:30em;overflow:auto'>{html.escape(text + more)}</pre></details>"
        )

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = super()._repr_mimebundle_(**kwargs) or {}
        bundle["text/plain"] = printable(  # previews of what a tool read: a terminal may print it
            spills_text(self.rows) + ("\n" + images_text(self.images) if self.images else "")
        )
        bundle["text/html"] = spills_html(self.rows)
        return bundle
