"""The handoff: what the model (or, at the hard limit, the host) passes to the next window.

Four sections keep evidence apart, so a guess made in one window does not arrive in the
next as a fact: confirmed requirements (each with its source), agent inferences,
unresolved conflicts, unverified acceptance criteria. ``related_files`` stay structured
so the host can check each path against the workspace without parsing prose.

This module is pure: models, rendering, and the host-written handoff built from messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..messages import Message

FileRole = Literal["spec", "test", "implementation", "other"]

# Tools whose ``path`` argument names a workspace file the window worked on.
_FILE_TOOLS = {"read_file": "read", "write_file": "written", "edit_file": "edited"}
RECENT_TEXTS = 3
RECENT_TEXT_CHARS = 1_500
TOUCHED_FILES = 20


class Requirement(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, description="the requirement, as stated")
    source: str = Field(
        min_length=1, description="where it is confirmed: 'user', a spec file and section, or a test"
    )


class Handoff(BaseModel):
    """The four sections. Empty lists are allowed; an entirely empty handoff is not."""

    model_config = ConfigDict(extra="forbid")

    confirmed_requirements: list[Requirement] = Field(
        default_factory=list, description="requirements from the user or a spec, each with its source"
    )
    agent_inferences: list[str] = Field(
        default_factory=list, description="your own conclusions and assumptions (unverified)"
    )
    unresolved_conflicts: list[str] = Field(
        default_factory=list, description="errors, failing checks and contradictions not yet resolved"
    )
    unverified_acceptance_criteria: list[str] = Field(
        default_factory=list, description="next actions and checks that have not passed yet"
    )

    @model_validator(mode="after")
    def _not_empty(self) -> Handoff:
        if not (
            self.confirmed_requirements
            or self.agent_inferences
            or self.unresolved_conflicts
            or self.unverified_acceptance_criteria
        ):
            raise ValueError("all four sections are empty; the next window would start from nothing")
        return self


class RelatedFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(min_length=1, description="path relative to the workspace")
    role: FileRole = Field(description="spec, test, implementation or other")
    note: str = Field("", description="why the next window needs this file")


@dataclass(frozen=True)
class CheckedFile:
    """A related file after the workspace check: the path as shown, and whether it exists."""

    path: str
    role: str
    note: str
    exists: bool

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "role": self.role, "note": self.note, "exists": self.exists}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CheckedFile:
        return cls(
            path=str(data.get("path", "")),
            role=str(data.get("role", "other")),
            note=str(data.get("note", "")),
            exists=bool(data.get("exists", True)),
        )


@dataclass(frozen=True)
class Intent:
    """A declared rollover, waiting for the pre-step boundary."""

    handoff: Handoff
    related_files: list[CheckedFile] = field(default_factory=list)
    call_id: str | None = None
    message_uuid: str | None = None  # the assistant message that called new_context


# --- rendering ------------------------------------------------------------------------------------

SECTION_TITLES = (
    "1. Confirmed requirements (from the user or a spec, with the source)",
    "2. Agent inferences (unverified: never promote these to requirements)",
    "3. Unresolved conflicts",
    "4. Unverified acceptance criteria (next actions, checks not yet passing)",
)


def render_handoff(handoff: Handoff) -> str:
    sections = (
        [f"{r.text} (source: {r.source})" for r in handoff.confirmed_requirements],
        handoff.agent_inferences,
        handoff.unresolved_conflicts,
        handoff.unverified_acceptance_criteria,
    )
    out = []
    for title, items in zip(SECTION_TITLES, sections, strict=True):
        out.append(f"### {title}")
        if items:
            out.extend(_bullet(item) for item in items)
        else:
            out.append("- (none)")
    return "\n".join(out)


def _bullet(text: str) -> str:
    lines = text.strip().splitlines() or [""]
    return "\n".join([f"- {lines[0]}", *(f"  {line}" for line in lines[1:])])


def render_related_files(files: list[CheckedFile]) -> str:
    if not files:
        return "- (none)"
    lines = []
    for f in files:
        note = f" - {f.note}" if f.note else ""
        missing = "" if f.exists else " [did not exist at handoff time]"
        lines.append(f"- {f.path} ({f.role}){note}{missing}")
    return "\n".join(lines)


def first_message(
    *,
    session_id: str,
    message_uuid: str | None,
    pinned_request: str | None,
    handoff: Handoff,
    related_files: list[CheckedFile],
    reason: str,
    later_user_text: Sequence[str] = (),
    images: Sequence[str] = (),
) -> str:
    """The one user message a new window starts with.

    The two anchors are named like ``search_history``'s arguments, so the model can use
    them as they are; the original request is pinned verbatim in every window, so that
    intent does not drift from handoff to handoff.
    """
    parts = [
        "Previous context is available in durable storage.",
        f"session_id: {session_id}",
        f"message_uuid: {message_uuid or '(none)'}",
        "",
    ]
    if reason == "hard-limit":
        parts += [
            "The previous window reached its hard limit before a handoff was written, so the",
            "host wrote the handoff below from that window; all of it is unverified.",
            "",
        ]
    if pinned_request is not None:
        parts += ["<original_request>", pinned_request, "</original_request>", ""]
    parts += ["<handoff>", render_handoff(handoff), "</handoff>", ""]
    listed = render_related_files(related_files)
    if images:  # issue-14: the window's images, listed like related files (kept in the session)
        lines = [f"- {shown} (image) - shown in the previous window" for shown in images]
        listed = "\n".join(lines) if not related_files else listed + "\n" + "\n".join(lines)
    parts += ["<related_files>", listed, "</related_files>", ""]
    for text in later_user_text:
        parts += ["<user_message_after_handoff>", text, "</user_message_after_handoff>", ""]
    parts.append(
        "Continue the task from this handoff. The workspace on disk is the source of truth: "
        "re-read the related files before you change them. If one specific detail from before "
        "is missing, make one targeted search_history lookup with the session_id above; on a "
        "miss, go back to the workspace instead of searching again."
    )
    return "\n".join(parts)


# --- the host-written handoff (hard limit) ------------------------------------------------------------


def forced_handoff(messages: list[Message]) -> tuple[Handoff, list[tuple[str, str]]]:
    """A handoff the host writes when the model did not: everything under agent inferences.

    Returns the handoff and the files the window touched as (path, how) pairs, newest last.
    """
    texts = [m.content.strip() for m in messages if m.role == "assistant" and m.content.strip()]
    touched: dict[str, set[str]] = {}
    for m in messages:
        for call in m.tool_calls:
            how = _FILE_TOOLS.get(call.name)
            path = call.arguments.get("path") if isinstance(call.arguments, dict) else None
            if how and isinstance(path, str) and path:
                touched.setdefault(path, set()).add(how)
                touched[path] = touched.pop(path)  # keep newest last
    inferences = [
        "The host switched windows at the hard limit; the model did not write this handoff. "
        "Nothing here is confirmed: check the workspace (files, tests) before relying on it."
    ]
    for text in texts[-RECENT_TEXTS:]:
        if len(text) > RECENT_TEXT_CHARS:
            text = text[:RECENT_TEXT_CHARS] + " […]"
        inferences.append(f"The agent said recently: {text}")
    files = [(p, ", ".join(sorted(how))) for p, how in list(touched.items())[-TOUCHED_FILES:]]
    if files:
        inferences.append(
            "Files touched in the previous window: " + ", ".join(f"{p} ({h})" for p, h in files)
        )
    return Handoff(agent_inferences=inferences), files


def first_user_text(messages: list[Message]) -> str | None:
    for m in messages:
        if m.role == "user" and m.tool_result is None:
            return m.content
    return None
