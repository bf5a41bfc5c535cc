"""Fork a session at a step: a new session whose log starts with the request of that step.

The new log is one ``replace`` (reason ``fork``, naming ``source_session`` and
``source_step``: readers ignore fields they do not know) with the step's messages, then the
pin entries in force at that step, copied as they are. Files the messages point to (spilled
results, images) are copied into the new session, checked. The source is only read. The
log is written whole, atomically, into a directory nobody else knows yet — before any
writer opens it — so no second writer ever touches a live log.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .. import safeio
from ..messages import Message, new_id
from ..workspace import LOG_NAME, SPILL_DIR, new_session_dir
from . import images
from .entries import ReplaceEntry, encode, message_entry
from .loader import log_path
from .step_fast import LogMessages
from .steps import StepRequest, request_at


@dataclass(frozen=True)
class ForkReport:
    source_id: str
    step: int
    steps: int
    session_id: str
    path: Path
    messages: int
    pins: int
    missing: tuple[str, ...]  # files the messages point to that could not be copied


def fork_session(workspace: Path, source: str | Path, step: int | None = None) -> ForkReport:
    """Fork the session at ``source`` (its directory or log) at ``step`` (default: the last)."""
    request = request_at(source, step)
    source_dir = log_path(source).parent
    path = new_session_dir(workspace)
    try:
        # Only a message with image parts or a spilled result points to a file.
        messages = request.messages
        missing = _copy_files(
            source_dir, path, messages.spilled() if isinstance(messages, LogMessages) else messages
        )
        safeio.write_atomic(path / LOG_NAME, fork_log(request))
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)  # ours alone: claimed above, never made current
        raise
    return ForkReport(
        source_id=request.session_id,
        step=request.step.number,
        steps=request.steps,
        session_id=path.name,
        path=path,
        messages=len(request.messages),
        pins=len(request.pins),
        missing=tuple(missing),
    )


def fork_log(request: StepRequest) -> bytes:
    """The new log's bytes: the fork replace with its snapshot, then the pins.

    A request told from the step figures (``step_fast.LogMessages``) has its lines copied
    from the log, each changed only where the writer's encoding of the message would differ
    (its replace id, no model), instead of each message built and encoded again."""
    rid = new_id()
    marker = ReplaceEntry.new("fork", rid, len(request.messages)).raw
    marker.update(source_session=request.session_id, source_step=request.step.number)
    lines = [encode(marker)]
    if isinstance(request.messages, LogMessages):
        lines.append(request.messages.snapshot_lines(rid, request.step.model))
    else:
        for i, m in enumerate(request.messages):
            lines.append(
                encode(message_entry(m, replace_id=rid, model=request.step.model if i == 0 else None))
            )
    lines.extend(encode(pin) for pin in request.pins)
    return b"".join(lines)


def _copy_files(source: Path, dest: Path, messages: Sequence[Message]) -> list[str]:
    """Copy the spill files and images the messages refer to; the paths that could not be."""
    missing = []
    for m in messages:
        for part in m.parts:
            try:
                data = images.read(source, part)
            except images.ImageError:
                missing.append(part.path)
                continue
            safeio.write_atomic(dest / part.path, data, create_dirs=True)
        spilled = m.tool_result.spilled if m.tool_result is not None else None
        if spilled:
            rel = Path(spilled)
            if rel.is_absolute() or ".." in rel.parts or rel.parts[:1] != (SPILL_DIR,):
                missing.append(spilled)
                continue
            try:
                data = safeio.read_bytes(source / rel)
            except OSError:
                missing.append(spilled)
                continue
            safeio.write_atomic(dest / rel, data, create_dirs=True)
    return missing


__all__ = ["ForkReport", "fork_log", "fork_session"]
