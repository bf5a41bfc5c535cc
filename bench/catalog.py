"""Listing sessions (SPEC §15: 1,000 sessions in ≤ 0.2 s) from their ``meta.json`` sidecars.

Measured twice: with every sidecar fresh (the usual ``%sessions list``), and after a run
appended to a few sessions (their sidecars are stale and are brought up to date).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from pseudoclaude_nb.conversation import Conversation
from pseudoclaude_nb.messages import Message
from pseudoclaude_nb.session import entries, list_sessions
from pseudoclaude_nb.session.writer import SessionWriter
from pseudoclaude_nb.workspace import LOG_NAME, new_session_dir

from .common import Row, Sizes, median_time, timed
from .workload import Workload


def _make_sessions(ws: Path, count: int) -> list[Path]:
    work = Workload(21, big_every=0)
    template = list(work.messages(24))[:24]
    folders = []
    for i in range(count):
        folder = new_session_dir(ws, now=1_790_000_000 + i * 60)
        conversation = Conversation()
        with SessionWriter(folder, model="bench-model", fsync=False) as writer:
            writer.attach(conversation)
            conversation.append(Message(role="user", content=f"task {i}: " + template[0].content))
            for m in template[1:]:
                conversation.append(m.model_copy(update={"id": f"{i:05d}{m.id[5:]}"}))
        folders.append(folder)
    return folders


def list_many(root: Path, sizes: Sizes) -> list[Row]:
    ws = Path(tempfile.mkdtemp(dir=root, prefix="catalog-"))
    folders = _make_sessions(ws, sizes.sessions)
    first = timed(lambda: list_sessions(ws))  # builds every sidecar
    fresh = median_time(lambda: list_sessions(ws), sizes.repeat)
    stale_share = 0.05
    touched = folders[:: int(1 / stale_share)]

    def run_some() -> None:
        # A run in each: its writer keeps meta.json current as it goes and on close.
        for folder in touched:
            with SessionWriter(folder, fsync=False) as writer:
                conversation = Conversation()
                writer.attach(conversation)
                conversation.add_user("one more")

    def grow_behind() -> None:
        # Lines no writer accounted for (a kernel killed mid-run): each sidecar is stale and is
        # caught up from its offset by the listing.
        line = entries.encode(entries.message_entry(Message(role="user", content="one more")))
        for folder in touched:
            with open(folder / LOG_NAME, "ab") as f:
                f.write(line * 5)

    stale = median_time(lambda: list_sessions(ws), sizes.repeat, setup=grow_behind)
    scale = 1_000 / sizes.sessions
    listed = len(list_sessions(ws))
    magic = median_time(_magic_list(ws), sizes.repeat, setup=run_some)
    return [
        Row(
            key="list",
            what=f"list {sizes.sessions:,} sessions (sidecars fresh)",
            target="≤ 0.2 s for 1,000",
            value=round(fresh * scale, 4),
            unit="s per 1,000",
            ok=fresh * scale <= 0.2 and listed == sizes.sessions,
            detail={
                "sessions": sizes.sessions,
                "list_s": round(fresh, 4),
                "first_list_building_every_sidecar_s": round(first, 3),
            },
        ),
        Row(
            key="list_magic",
            what=f"%sessions list of {sizes.sessions:,} sessions right after {len(touched)} of them ran",
            target="≤ 0.2 s for 1,000; never a whole-log replay",
            value=round(magic * scale, 4),
            unit="s per 1,000",
            ok=magic * scale <= 0.2,
            detail={
                "list_s": round(magic, 4),
                "method": "the magic's own listing (printing included, to a buffer) after writer runs; "
                "the writer keeps meta.json current, a stale one is caught up from its offset",
            },
        ),
        Row(
            key="list_stale",
            what=f"… after {len(touched)} logs grew behind their sidecars (caught up from their offsets)",
            target="",
            value=round(stale * scale, 4),
            unit="s per 1,000",
            ok=None,
            detail={"list_s": round(stale, 4), "stale_sessions": len(touched)},
        ),
    ]


def _magic_list(ws: Path):
    """``%sessions list`` as the magic runs it, output to a buffer."""
    import contextlib
    import io

    from pseudoclaude_nb.agent import Agent
    from pseudoclaude_nb.config import PseudoClaude
    from pseudoclaude_nb.magics.sessions import SessionMagics

    agent = Agent(PseudoClaude(workspace=str(ws), provider="scripted", fsync=False))
    magics = SessionMagics(None, agent)

    def run() -> None:
        with contextlib.redirect_stdout(io.StringIO()):
            magics.sessions("list")  # the magic's own entry: options parsed, the table printed

    return run
