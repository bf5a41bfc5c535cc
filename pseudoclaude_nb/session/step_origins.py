"""Which replace first brought each message of a step's request (``steps.Row.origin``).

Read back from the log by offset, as far as the request's messages need, never the whole
history (issue 47); see ``Origins``. No IPython here; nothing is written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from .step_index import MESSAGE_KINDS, Marker, StepIndex

ORIGIN_HORIZON = 64 << 20  # log bytes read back for a message carried through many replaces


class Origins:
    """Which replace first brought each message of a request (``Row.origin``), worked out
    when a row is first shown.

    A message the replace the request was replayed from (``start``) wrote was either carried
    from before it — appended plainly (no origin) or brought by an earlier replace — or new
    (a summary, a handoff: that replace's reason). The log is read back from ``start`` one
    replace at a time, and only for the messages still undecided: in the first region every
    message line is read; further back each id is looked for in the region's bytes
    (``bytes.find``), so a message carried through every rollover costs a search, not a parse.
    A message the walk has not placed within ``ORIGIN_HORIZON`` bytes keeps the earliest
    replace it was seen in. Messages appended after ``start`` have no origin.
    """

    def __init__(
        self,
        index: StepIndex,
        markers: list[Marker],
        start: Marker | None,
        snapshot: Callable[[], list[str]],
    ) -> None:
        self._index = index
        # A replace that never completed replaced nothing: the walk steps over it.
        self._markers = [m for m in markers if start is not None and m.entry < start.entry and m.committed]
        self._start = start
        self._snapshot = snapshot
        self._found: dict[str, str | None] | None = None

    def get(self, mid: str) -> str | None:
        if self._start is None:
            return None
        if self._found is None:
            self._found = self._walk()
        return self._found.get(mid)

    def _walk(self) -> dict[str, str | None]:
        start = self._start
        assert start is not None
        t = self._index.timeline
        found: dict[str, str | None] = {}
        candidate = dict.fromkeys(self._snapshot(), start.reason)  # its ids, read when first needed
        end, read = start.entry, 0
        previous = list(reversed(self._markers)) + [None]
        first = True
        for marker in previous:
            if not candidate:
                break
            begin = marker.entry if marker is not None else 0
            lo, hi = t.offsets[begin], t.offsets[end]
            read += hi - lo
            if read > ORIGIN_HORIZON:
                break
            rid = marker.replace_id if marker is not None else None
            plain, carried = self._region(begin, end, rid, set(candidate), every_line=first)
            first = False
            for mid in list(candidate):
                if mid in plain:
                    found[mid] = None
                elif mid in carried and marker is not None:
                    candidate[mid] = marker.reason
                    continue
                else:
                    found[mid] = candidate[mid]
                del candidate[mid]
            end = begin
        found.update(candidate)  # beyond the horizon: the earliest replace seen
        return found

    def _region(
        self, begin: int, end: int, rid: str | None, wanted: set[str], *, every_line: bool
    ) -> tuple[set[str], set[str]]:
        """The ids among ``wanted`` appended plainly in entries [begin, end), and those in the
        snapshot of the replace ``rid`` (the marker at ``begin``)."""
        index, t = self._index, self._index.timeline
        plain: set[str] = set()
        carried: set[str] = set()
        if every_line:
            messages = [i for i in range(begin, end) if t.kinds[i] in MESSAGE_KINDS]
            for raw in index.lines(messages):
                try:
                    obj = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    continue
                if type(obj) is not dict or obj.get("id") not in wanted:
                    continue
                got = obj.get("replace_id")
                if got is None:
                    plain.add(obj["id"])
                elif got == rid:
                    carried.add(obj["id"])
            return plain, carried
        data = index.read_bytes(t.offsets[begin], t.offsets[end])
        for mid in wanted:
            at = data.find(b'"id":"' + mid.encode() + b'"')
            while at >= 0:
                line_start = data.rfind(b"\n", 0, at) + 1
                line_end = data.find(b"\n", at)
                line = data[line_start : len(data) if line_end < 0 else line_end]
                obj = _decode(line)
                if obj is not None and obj.get("type") == "message" and obj.get("id") == mid:
                    got = obj.get("replace_id")
                    if got is None:
                        plain.add(mid)
                    elif got == rid:
                        carried.add(mid)
                    break
                at = data.find(b'"id":"' + mid.encode() + b'"', at + 1)
        return plain, carried


def _decode(raw: bytes) -> dict[str, Any] | None:
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return obj if type(obj) is dict else None
