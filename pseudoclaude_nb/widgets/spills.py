"""The spill browser: which tool results Layer 1 moved to files, and their full text."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import ipywidgets

from ..session.loader import load_session

SHOW_CAP = 1_000_000  # bytes shown by "full text": a browser tab holds this comfortably


def spill_rows(session_dir: Path) -> list[dict[str, Any]]:
    """Spill entries of the log, with a preview read from each file."""
    rows = []
    for entry in load_session(session_dir, full=True).spills:  # every spill, not just the recent ones
        path = Path(session_dir) / (entry.path or "")
        try:
            with open(path, "rb") as f:
                head = f.read(300).decode("utf-8", "replace")
        except OSError as exc:
            head = f"(file unreadable: {exc.strerror or exc})"
        rows.append(
            {
                "tool": entry.tool,
                "call_id": entry.call_id,
                "bytes": entry.bytes,
                "path": path,
                "preview": head,
            }
        )
    return rows


def spills_text(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "no spilled tool results in this session"
    lines = [f"{len(rows)} spilled tool result(s):"]
    for r in rows:
        first = " ".join(r["preview"].split())[:60]
        lines.append(f"  {r['tool']:<10} {r['call_id']:<24} {r['bytes']:>10,} bytes  {first}")
    return "\n".join(lines)


class SpillBrowser(ipywidgets.VBox):
    def __init__(self, session_dir: Path, **kwargs: Any) -> None:
        self.rows = spill_rows(session_dir)
        self.full = ipywidgets.HTML()
        children: list[Any] = [ipywidgets.HTML(value=f"<b>{len(self.rows)} spilled tool result(s)</b>")]
        for r in self.rows:
            button = ipywidgets.Button(
                description="full text", tooltip=str(r["path"]), layout={"width": "90px"}
            )
            button.on_click(lambda _b, r=r: self.show(r))
            info = ipywidgets.HTML(
                value=(
                    f"<code>{html.escape(str(r['tool']))}</code> · {html.escape(str(r['call_id']))} · "
                    f"{r['bytes']:,} bytes<br><pre style='margin:0;font-size:85%;max-height:5em;overflow:hidden'>"
                    f"{html.escape(r['preview'])}</pre>"
                )
            )
            children.append(ipywidgets.HBox([button, info]))
        children.append(self.full)
        super().__init__(children=children, **kwargs)

    def show(self, row: dict[str, Any]) -> None:
        try:
            with open(row["path"], "rb") as f:
                data = f.read(SHOW_CAP + 1)
        except OSError as exc:
            self.full.value = f"<b>cannot read {html.escape(str(row['path']))}: {html.escape(str(exc))}</b>"
            return
        text = data[:SHOW_CAP].decode("utf-8", "replace")
        more = f"\n… (first {SHOW_CAP:,} bytes shown)" if len(data) > SHOW_CAP else ""
        self.full.value = (
            f"<div class='pc-spill-full'><b>{html.escape(str(row['path'].name))}</b>"
            f"<pre style='max-height:30em;overflow:auto'>{html.escape(text + more)}</pre></div>"
        )

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = super()._repr_mimebundle_(**kwargs) or {}
        bundle["text/plain"] = spills_text(self.rows)
        return bundle
