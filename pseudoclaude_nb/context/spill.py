"""Layer 1: move huge tool results to files and leave the model a preview.

A result over ``spill_bytes`` is spilled when it is appended, so the session log never
holds its raw body. Before each request, the results of the latest tool batch may total
at most ``spill_batch_bytes``; the largest are spilled first until the rest fits. A
ledger remembers every call's decision, so a result is never re-decided (which would
change old messages and defeat the provider's prompt cache).
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypedDict

from .. import safeio
from ..messages import Message
from ..redact import Redactor
from ..workspace import SPILL_DIR

PREVIEW_BYTES = 2_000
Decision = Literal["kept", "spilled"]


class SpillFields(TypedDict):
    """A spill's entry in the log: ``SessionWriter.spill(**fields)`` checks each name."""

    call_id: str
    tool: str
    path: str
    bytes: int
    sha256: str


@dataclass(frozen=True)
class Spill:
    call_id: str
    tool: str
    path: str  # relative to the session directory, as logged
    bytes: int
    sha256: str

    def entry_fields(self) -> SpillFields:
        return {
            "call_id": self.call_id,
            "tool": self.tool,
            "path": self.path,
            "bytes": self.bytes,
            "sha256": self.sha256,
        }


class Ledger:
    """Each call id's Layer 1 decision; frozen once made."""

    def __init__(self) -> None:
        self._decisions: dict[str, Decision] = {}
        self._spilled = 0  # kept with each decision: read every step, never recounted

    def decision(self, call_id: str) -> Decision | None:
        return self._decisions.get(call_id)

    def record(self, call_id: str, decision: Decision) -> None:
        if call_id not in self._decisions:
            self._decisions[call_id] = decision
            self._spilled += decision == "spilled"

    def force(self, call_id: str, decision: Decision) -> None:
        """Only for an explicit user request (``%compact --layer1``)."""
        self._spilled += (decision == "spilled") - (self._decisions.get(call_id) == "spilled")
        self._decisions[call_id] = decision

    @property
    def spilled(self) -> int:
        return self._spilled


def safe_name(call_id: str) -> str:
    """A file name for a call id: provider ids are not promised to be path-safe."""
    clean = re.sub(r"[^A-Za-z0-9_-]", "_", call_id)[:80]
    if clean != call_id:
        clean += "-" + hashlib.sha256(call_id.encode()).hexdigest()[:8]
    return clean


def write_spill(session_dir: Path, call_id: str, tool: str, text: str, *, redact: bool = True) -> Spill:
    """Write the full text to ``tool-results/``; an existing identical file is reused.

    Written to a temporary file, fsynced and renamed, so a crash never leaves half a
    file that a later run would take for the whole result. Raises ``OSError``.

    With ``redact`` (SPEC §6.2) the file holds the redacted text, and the returned
    ``bytes``/``sha256`` describe that file as it is on disk, not the original text.
    """
    if redact:
        text = Redactor().text(text)
    data = text.encode("utf-8")
    digest = hashlib.sha256(data).hexdigest()
    folder = Path(session_dir) / SPILL_DIR
    path = folder / f"{safe_name(call_id)}.txt"
    if _sha256_of(path) != digest:
        # Relative to the folder's fd, no link followed (a symlinked tool-results/ or spill
        # file is refused, not written through); the temporary file is renamed over.
        safeio.write_atomic(path, data, create_dirs=True)
    return Spill(call_id, tool, f"{SPILL_DIR}/{path.name}", len(data), digest)


def _sha256_of(path: Path) -> str | None:
    """The digest of the spill file already there, or None (missing, or not a safe regular file)."""
    try:
        fd = safeio.open_file(path)
    except OSError:
        return None
    h = hashlib.sha256()
    with os.fdopen(fd, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def head_at_boundary(text: str, limit: int = PREVIEW_BYTES) -> str:
    """The first ``limit`` bytes, cut at a character and, where one is near, a line end."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    head = data[:limit].decode("utf-8", errors="ignore")  # drops a split character
    cut = head.rfind("\n")
    return head[: cut + 1] if cut >= len(head) // 2 else head


def preview_bytes(spill_bytes: int) -> int:
    """The head a preview shows: 2,000 bytes, at most a third of the spill limit (a small
    window's limit is ~1,200 bytes; its preview must be well under it)."""
    return min(PREVIEW_BYTES, max(256, spill_bytes // 3))


def preview(text: str, shown_path: str, *, redact: bool = True, limit: int = PREVIEW_BYTES) -> str:
    """What the model sees instead of a spilled result.

    The text is redacted *before* its head is cut (``redact``), so the cut cannot leave a
    secret's value without the label that identifies it.
    """
    size = len(text.encode("utf-8"))
    head = head_at_boundary(Redactor().text(text) if redact else text, limit)
    return (
        f"[Tool result too large for the context: {size:,} bytes, saved in full to {shown_path}]\n"
        f"Read it in parts with read_file(path={shown_path!r}, offset=N, limit=M), or search "
        f"it with grep(pattern, path={shown_path!r}). The first {len(head.encode('utf-8')):,} "
        f"bytes follow.\n\n{head}" + ("" if head.endswith("\n") else "\n") + "[… preview ends here …]"
    )


def unsaved_preview(text: str, reason: str, *, redact: bool = True) -> str:
    """What the conversation (and the log) get for a huge result whose spill file could not
    be written: its head and a note, never the raw body (the log must stay bounded)."""
    size = len(text.encode("utf-8"))
    head = head_at_boundary(Redactor().text(text) if redact else text)
    return (
        f"[Tool result too large for the context: {size:,} bytes. It could not be saved to a file "
        f"({reason}), so only its first {len(head.encode('utf-8')):,} bytes are kept here.]\n\n"
        f"{head}" + ("" if head.endswith("\n") else "\n") + "[… the rest is not in the context …]"
    )


def batch_to_spill(batch: list[Message], ledger: Ledger, limit: int) -> list[Message]:
    """The results of one tool batch to spill, largest first, until the rest fits ``limit``.

    Results already decided keep their decision: a kept result is never spilled later.
    """
    sizes = {m.id: len(m.tool_result.content.encode("utf-8")) for m in batch if m.tool_result}
    total = sum(sizes.values())
    if total <= limit:
        return []
    chosen = []
    for msg in sorted(batch, key=lambda m: sizes.get(m.id, 0), reverse=True):
        if total <= limit:
            break
        if msg.tool_result is None or ledger.decision(msg.tool_result.call_id) is not None:
            continue
        chosen.append(msg)
        total -= sizes[msg.id]
    return chosen


def latest_batch(messages: list[Message]) -> list[Message]:
    """The tool results that follow the last assistant tool-call message."""
    i = len(messages)
    while i > 0 and messages[i - 1].tool_result is not None:
        i -= 1
    if i == 0 or not messages[i - 1].tool_calls:
        return []
    return messages[i:]
