"""A model that plays the strategy lab's task over the wire, for the lab on a real model (issue 46).

``LabPlayer`` is a ``FakeServer`` responder (``FakeServer(respond=...)``): it reads each request
as the provider sent it — Anthropic Messages, OpenAI chat completions or the Responses API —
and answers as a model doing the lab's task would, in that protocol:

- a summary request (the package's summarizing system prompt) gets a summary of the must-keep
  facts the request holds, all but those it was told to ``forget``: what the lab's fidelity
  figures must then find in the context, and no more;
- a request whose window holds a rollover reminder (or fallback) the model has not answered
  yet gets a ``new_context`` call with its handoff;
- any other request gets the task's next turn (``lab.task``: the same tool calls the lab's
  scripted model plays), so a run goes module by module to its end; a request that holds only
  the task's first prompt starts the task again (the lab's next arm).

Usage is reported as each provider bills it, from the request's own bytes (about 4 a token):
Anthropic reads from the prompt cache the longest prefix written at an earlier breakpoint
(looking back up to 20 blocks from each ``cache_control`` breakpoint, tools then system then
messages), writes up to its last breakpoint, and bills the rest as input; OpenAI (both APIs)
reads the longest prefix of an earlier request, in 128-token steps from 1,024 on, and writes
nothing. A prefix under 1,024 tokens is never cached.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from typing import Any, Literal

from pseudoclaude_nb.context.policies import FALLBACK_MARK, REMIND_MARK
from pseudoclaude_nb.context.summarize import SUMMARY_SYSTEM
from pseudoclaude_nb.lab.task import FIRST_PROMPT, MUST_KEEP, Fact, build_task

from . import Answer, Recorded, anthropic_server, openai_responses_server, openai_server

Wire = Literal["anthropic", "chat", "responses"]
MIN_CACHED = 1024
LOOKBACK = 20  # blocks the Anthropic API looks back from a breakpoint for an earlier cache entry


def tokens(text: str) -> int:
    return max(1, len(text) // 4)


def _canonical(block: Any) -> str:
    if isinstance(block, dict):
        block = {k: v for k, v in block.items() if k != "cache_control"}
    return json.dumps(block, sort_keys=True, ensure_ascii=False)


@dataclass
class Said:
    """One message of a request, read: its role, its text (tool calls and results too), the tools it calls."""

    role: str
    text: str
    calls: list[str] = field(default_factory=list)


def read_messages(body: dict[str, Any], wire: Wire) -> tuple[str, list[Said]]:
    """(system prompt, messages) of a request in ``wire``'s shape."""
    if wire == "anthropic":
        system = body.get("system") or ""
        if isinstance(system, list):
            system = "".join(b.get("text", "") for b in system)
        out = []
        for m in body.get("messages", []):
            content = (
                m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}]
            )
            texts, calls = [], []
            for b in content:
                if b.get("type") == "text":
                    texts.append(b["text"])
                elif b.get("type") == "tool_use":
                    calls.append(b["name"])
                    texts.append(json.dumps(b.get("input")))
                elif b.get("type") == "tool_result":
                    inner = b.get("content")
                    texts.append(
                        inner if isinstance(inner, str) else "".join(x.get("text", "") for x in inner or [])
                    )
                elif b.get("type") == "compaction":
                    texts.append(b.get("content") or "")
            out.append(Said(m["role"], "\n".join(texts), calls))
        return system, out
    if wire == "chat":
        system, out = "", []
        for m in body.get("messages", []):
            content = m.get("content") or ""
            if isinstance(content, list):
                content = "".join(p.get("text", "") for p in content)
            if m["role"] in ("system", "developer"):
                system += content
                continue
            calls = [c["function"]["name"] for c in m.get("tool_calls") or []]
            args = [c["function"]["arguments"] for c in m.get("tool_calls") or []]
            out.append(Said(m["role"], "\n".join([content, *args]), calls))
        return system, out
    system, out = body.get("instructions") or "", []
    items = body.get("input") or []
    for item in items if isinstance(items, list) else [{"role": "user", "content": items}]:
        kind = item.get("type", "message")
        if kind == "message":
            content = item.get("content") or ""
            if isinstance(content, list):
                content = "".join(p.get("text", "") for p in content)
            if item.get("role") in ("system", "developer"):
                system += content
            else:
                out.append(Said(item["role"], content))
        elif kind == "function_call":
            out.append(Said("assistant", item.get("arguments", ""), [item["name"]]))
        elif kind == "function_call_output":
            output = item.get("output")
            out.append(Said("user", output if isinstance(output, str) else json.dumps(output)))
    return system, out


class PromptCache:
    """What one provider's prompt cache holds, and what a request reads from it and writes to it."""

    def __init__(self, wire: Wire) -> None:
        self.wire = wire
        self.written: set[str] = set()

    def blocks(self, body: dict[str, Any]) -> list[tuple[str, bool]]:
        """The request's prefix as (canonical block, carries a breakpoint), in the order cached."""
        out = [(_canonical(t), "cache_control" in t) for t in body.get("tools") or []]
        if self.wire == "anthropic":
            system = body.get("system") or []
            for b in system if isinstance(system, list) else [{"type": "text", "text": system}]:
                out.append((_canonical(b), "cache_control" in b))
            for m in body.get("messages", []):
                content = (
                    m["content"]
                    if isinstance(m["content"], list)
                    else [{"type": "text", "text": m["content"]}]
                )
                out += [(_canonical({"role": m["role"], **b}), "cache_control" in b) for b in content]
        elif self.wire == "chat":
            out += [(_canonical(m), False) for m in body.get("messages", [])]
        else:
            out.append((_canonical(body.get("instructions")), False))
            items = body.get("input") or []
            out += [(_canonical(i), False) for i in (items if isinstance(items, list) else [items])]
        return out

    def usage(self, body: dict[str, Any]) -> tuple[int, int, int]:
        """(uncached input, cache read, cache write) tokens of the request; the cache learns it."""
        blocks = self.blocks(body)
        keys, sizes, h, total = [], [], hashlib.sha256(), 0
        for text, _ in blocks:
            h.update(text.encode())
            keys.append(h.copy().hexdigest())
            total += tokens(text)
            sizes.append(total)
        if self.wire == "anthropic":
            marks = [i for i, (_, mark) in enumerate(blocks) if mark]
            read = 0
            for b in marks:
                for i in range(b, max(b - LOOKBACK, -1), -1):
                    if keys[i] in self.written:
                        read = max(read, sizes[i])
                        break
            last = sizes[marks[-1]] if marks else 0
            write = last - read if last >= MIN_CACHED else 0
            for b in marks:
                if sizes[b] >= MIN_CACHED:
                    self.written.add(keys[b])
            return total - read - write, read, write
        read = 0
        for i in range(len(keys) - 1, -1, -1):
            if keys[i] in self.written and sizes[i] >= MIN_CACHED:
                read = sizes[i] // 128 * 128
                break
        self.written.update(keys)
        return total - read, read, 0


@dataclass
class Played:
    """What the player answered, for the test to compare the lab's figures with."""

    turns: int = 0
    summaries: list[str] = field(default_factory=list)
    handoffs: list[dict[str, Any]] = field(default_factory=list)
    usages: list[tuple[str, int, int, int, int]] = field(default_factory=list)  # (kind, in, read, write, out)


class LabPlayer:
    """Plays the lab's task of ``modules`` modules in ``wire``'s protocol; ``forget``: the keys
    of the must-keep facts its summaries and handoffs leave out."""

    def __init__(self, modules: int, wire: Wire, *, forget: tuple[str, ...] = ()) -> None:
        self.wire = wire
        self.turns = build_task(modules).turns
        self.forget = set(forget)
        self.cache = PromptCache(wire)
        self.played = Played()
        self._calls = 0
        self._at = 0  # the next turn of the task
        self._lock = threading.Lock()

    def __call__(self, recorded: Recorded) -> Answer:
        with self._lock:
            return self._answer(recorded.body)

    # --- what to answer ------------------------------------------------------------------------

    def _answer(self, body: dict[str, Any]) -> Answer:
        system, said = read_messages(body, self.wire)
        uncached, read, write = self.cache.usage(body)
        if system.startswith(SUMMARY_SYSTEM[:40]):
            text, calls, kind = self._summary(said), [], "summary"
            self.played.summaries.append(text)
        elif self._reminded(said):
            handoff = self._handoff(said)
            self.played.handoffs.append(handoff)
            text, calls, kind = "Handing over to a fresh window.", [("new_context", handoff)], "handoff"
        else:
            if len(said) == 1 and said[0].text.startswith(FIRST_PROMPT):
                self._at = 0  # the next arm begins the task
            turn = self.turns[self._at] if self._at < len(self.turns) else {"text": "Done."}
            self._at += 1
            self.played.turns += 1
            text, kind = turn.get("text", ""), "turn"
            calls = [(c["name"], c["arguments"]) for c in turn.get("tool_calls", [])]
        out = tokens(text + "".join(json.dumps(a) for _, a in calls))
        self.played.usages.append((kind, uncached, read, write, out))
        return self._wire_answer(body, text, calls, (uncached, read, write, out))

    def _facts(self, said: list[Said]) -> list[Fact]:
        heard = "\n".join(s.text for s in said).casefold()
        return [f for f in MUST_KEEP if f.key not in self.forget and f.needle.casefold() in heard]

    def _summary(self, said: list[Said]) -> str:
        facts = self._facts(said)

        def section(title: str, kinds: tuple[str, ...]) -> list[str]:
            return [f"## {title}", *([f"- {f.text}" for f in facts if f.kind in kinds] or ["- (none)"])]

        return "\n".join(
            section("Confirmed requirements", ("constraint", "rule"))
            + ["## Agent inferences (unverified)", "- the modules so far each have a smoke test"]
            + section("Unresolved problems", ("error",))
            + section("Files and changes", ("path",))
            + ["## Next steps", "- Continue with the next module."]
        )

    def _reminded(self, said: list[Said]) -> bool:
        for s in reversed(said):
            if "new_context" in s.calls:
                return False
            if REMIND_MARK in s.text or FALLBACK_MARK in s.text:
                return True
        return False

    def _handoff(self, said: list[Said]) -> dict[str, Any]:
        facts = self._facts(said)
        return {
            "handoff": {
                "confirmed_requirements": [
                    {"text": f.text, "source": "user"} for f in facts if f.kind in ("constraint", "rule")
                ],
                "agent_inferences": ["the modules reviewed so far each have a smoke test"],
                "unresolved_conflicts": [f.text for f in facts if f.kind == "error"],
                "unverified_acceptance_criteria": ["continue with the next module"],
            },
            "related_files": [
                {"path": f.needle, "role": "other", "note": f.text} for f in facts if f.kind == "path"
            ],
        }

    # --- in the provider's words ---------------------------------------------------------------

    def _wire_answer(
        self, body: dict[str, Any], text: str, calls: list[tuple[str, Any]], usage: tuple[int, int, int, int]
    ) -> Answer:
        uncached, read, write, out = usage
        ids = []
        for _ in calls:
            self._calls += 1
            ids.append(f"call_lab_{self._calls}")
        wired = [(i, name, args) for i, (name, args) in zip(ids, calls, strict=True)]
        stream = bool(body.get("stream"))
        if self.wire == "anthropic":
            u = {
                "input_tokens": uncached,
                "cache_read_input_tokens": read,
                "cache_creation_input_tokens": write,
                "output_tokens": out,
            }
            if stream:
                return anthropic_server.answer(text, wired, usage=u)
            return anthropic_server.message(text, wired, usage=u)
        if self.wire == "chat":
            u2 = {
                "prompt_tokens": uncached + read,
                "completion_tokens": out,
                "total_tokens": uncached + read + out,
                "prompt_tokens_details": {"cached_tokens": read},
            }
            if stream:
                return openai_server.answer(text, wired, usage=u2)
            return openai_server.completion(text, wired, usage=u2)
        u3 = openai_responses_server.usage(uncached + read, out, cached=read)
        if stream:
            return openai_responses_server.answer(text, wired, u=u3)
        return openai_responses_server.response(text, wired, u=u3)
