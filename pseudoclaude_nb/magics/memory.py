"""``%memory``: see, add, edit and remove memory notes; switch memory on and off.

Thin: it parses, calls ``memory.MemoryManager`` (through the agent) and prints. Every
mistake is a ``UsageError`` that says what to type instead.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.display import display

from ..agent import Agent
from ..errors import PseudoClaudeError
from ..memory import TYPES, MemoryStore, Topic
from ..memory.index import HEADINGS, entry_line, entry_parts
from ..memory.store import INDEX_NAME, read_topic_file
from ..textsafe import printable
from .agent import _unquote
from .args import parse, unknown
from .render import in_notebook
from .tables import markdown_text

ACTIONS = ("show", "list", "add", "edit", "rm", "on", "off", "verify", "stale", "rebuild")
NAMED = ("add", "edit", "rm", "verify", "stale")
USAGE = {
    "add": '%memory add NAME [-d "description"] [--type fact] [--user] BODY…  (or %%memory add NAME with the body as the cell)',
    "edit": '%memory edit NAME [-d "description"] [--type T] [BODY…]  (or %%memory edit NAME with the new body as the cell)',
    "rm": "%memory rm NAME [--user|--project]",
    "verify": "%memory verify NAME [--user|--project]",
    "stale": "%memory stale NAME [--user|--project]",
}


@magics_class
class MemoryMagics(Magics):
    def __init__(self, shell: Any, agent: Agent) -> None:
        super().__init__(shell)
        self._agent = agent
        self._policy_before_off = "explicit"

    @magic_arguments()
    @argument("--user", action="store_true", help="the user memory ($PSEUDOCLAUDE_HOME/memory)")
    @argument("--project", action="store_true", help="the project memory (.pseudoclaude/memory)")
    @argument("-d", "--description", metavar="TEXT", help="with add/edit: the one-line description")
    @argument("--type", choices=TYPES, help="with add/edit: preference, fact, convention or reference")
    @argument("action", nargs="?", default="show", help=" | ".join(ACTIONS))
    @argument("words", nargs="*", help="NAME, then for add/edit the body (or the %%memory cell)")
    # A note is written as typed (SPEC §20): IPython would write a variable's value for {x}
    # and $x to disk. (deferred.AS_TYPED says so before the class is imported.)
    @no_var_expand
    @line_cell_magic
    def memory(self, line: str, cell: str | None = None) -> None:
        """Memory: short notes kept across sessions, per project and per user.

        Only an index (name, description, age) goes into the system prompt; the agent reads
        a note with its read_memory tool. After a run that ends normally, a model request
        saves what you explicitly asked it to remember (%config PseudoClaude.memory_policy:
        explicit, auto or off).

        %memory                       (or %memory show, %memory list) both indexes, the policy, the last update
        %memory show NAME             one note: its header and body
        %memory add NAME -d "…" BODY  a project note (--user: a user note); --type fact|…
        %%memory add NAME -d "…"      the same, the cell is the body
        %memory edit NAME -d "…"      change the description, --type, or the body
        %memory rm NAME               delete a note
        %memory verify NAME           mark it checked now (its age starts again)
        %memory stale NAME            mark it stale (kept, flagged to the model)
        %memory off | on              leave memory out of requests entirely | bring it back
        %memory rebuild               rewrite MEMORY.md from the note files

        Project notes live in .pseudoclaude/memory/, user notes in $PSEUDOCLAUDE_HOME/memory/
        (default ~/.pseudoclaude/memory/); MEMORY.md in each is generated from the notes.
        """
        try:
            args = parse(self.memory, line, intermixed=True)
        except ValueError as exc:
            raise UsageError(f"{exc}; quote the name, or put the body in a %%memory cell") from None
        words = [_unquote(w) for w in args.words]
        if args.description is not None:
            args.description = _unquote(args.description)
        action = args.action
        if action not in ACTIONS:
            raise unknown("action", action, ACTIONS)
        if args.user and args.project:
            raise UsageError("pass --user or --project, not both")
        if (args.description is not None or args.type) and action not in ("add", "edit"):
            raise UsageError("--description and --type go with %memory add or %memory edit")
        if cell is not None and action not in ("add", "edit"):
            raise UsageError("only %%memory add and %%memory edit take a cell (the note's body)")
        if action in NAMED and not words:
            raise UsageError(f"%memory {action} needs a NAME; usage: {USAGE[action]}")
        if action in ("on", "off", "rebuild", "list") and words:
            hint = "; %memory show NAME shows one note" if action == "list" else ""
            raise UsageError(f"%memory {action} takes no name{hint}")
        level = "user" if args.user else "project" if args.project else None
        try:
            self._dispatch(action, level, words, args, cell)
        except PseudoClaudeError as exc:
            raise UsageError(str(exc)) from None
        except OSError as exc:
            where = f" ({exc.filename})" if exc.filename else ""
            raise UsageError(
                f"%memory {action} failed: {exc.strerror or exc}{where}; check the folder"
            ) from None

    # --- actions ---------------------------------------------------------------------------

    def _dispatch(
        self, action: str, level: str | None, words: list[str], args: Any, cell: str | None
    ) -> None:
        memory = self._agent.memory
        if action == "list":  # as %mcp list lists the servers
            self._show(level)
        elif action == "show":
            if words:
                self._show_one(" ".join(words), level)
            else:
                self._show(level)
        elif action == "add":
            name, body = words[0], _body(words[1:], cell)
            if not body:
                raise UsageError(f"%memory add needs the note's text; usage: {USAGE['add']}")
            target = level or "project"
            if memory.find(name, target):
                raise UsageError(f"there is already a {target} note {name!r}; change it with %memory edit")
            description = args.description or _first_line(body)
            print(memory.add(target, name, description, args.type or "fact", body))
        elif action == "edit":
            name, body = words[0], _body(words[1:], cell)
            topic = self._resolve(name, level)
            if body is None and args.description is None and args.type is None:
                path = memory.store(topic.level).root / topic.file_name
                raise UsageError(
                    f"nothing to change: pass -d/--description, --type or a new body (words, or the "
                    f"%%memory edit cell); or edit {path} by hand: the index follows"
                )
            print(
                memory.edit(topic.level, topic.name, description=args.description, type=args.type, body=body)
            )
        elif action == "rm":
            topic = self._resolve(" ".join(words), level)
            print(memory.remove(topic.level, topic.name))
        elif action in ("verify", "stale"):
            topic = self._resolve(" ".join(words), level)
            changed = memory.set_status(
                topic.level, topic.name, "verified" if action == "verify" else "stale"
            )
            print(f"{changed.level}/{changed.name} is now {changed.status}")
        elif action == "off":
            if self._agent.settings.memory_policy != "off":
                self._policy_before_off = self._agent.settings.memory_policy
            self._agent.settings.memory_policy = "off"
            print(
                "memory is off: requests carry neither the memory index nor any note, and runs "
                "save nothing (%memory on to undo)"
            )
        elif action == "on":
            if self._agent.settings.memory_policy == "off":
                self._agent.settings.memory_policy = self._policy_before_off
            print(f"memory is on (policy {self._agent.settings.memory_policy})")
        elif action == "rebuild":
            levels = [level] if level else ["project", "user"]
            for lv, count, problems in memory.rebuild(levels):
                store = memory.store(lv)
                where = self._agent.memory.shown(store.root / INDEX_NAME)
                if count:
                    print(f"{lv}: {where} rebuilt from {count} note{'s' if count != 1 else ''}")
                else:
                    print(f"{lv}: no notes in {self._agent.memory.shown(store.root)}, so no {INDEX_NAME}")
                for problem in problems:
                    print(f"  skipped {problem}")

    def _resolve(self, name: str, level: str | None) -> Topic:
        found = self._agent.memory.find(name, level)
        if not found:
            where = f"{level} memory" if level else "project or user memory"
            raise UsageError(f"there is no note {name!r} in {where}; see %memory show")
        if len(found) > 1:
            raise UsageError(f"{name!r} is both a project and a user note; pass --project or --user")
        return found[0]

    def _show(self, level: str | None) -> None:
        """Both indexes: text in a terminal; in a notebook Markdown too (a heading per level, a
        list of notes), with everything read from the notes escaped as literal text."""
        agent, memory = self._agent, self._agent.memory
        memory.wait(agent.memory_wait)  # the last run's update, so what is shown is settled
        text: list[str] = []
        md: list[str] = []

        def say(line: str, markdown: str | None = None) -> None:
            text.append(printable(line))  # notes can come with a cloned repo
            md.append(markdown_text(line) if markdown is None else markdown)

        policy = agent.settings.memory_policy
        if policy == "off":
            say("memory is off: requests carry no memory (%memory on to bring it back)")
        else:
            say(f"memory is on (policy {policy}): the index below goes into each request")
        now = dt.datetime.now(dt.timezone.utc)
        topics = memory.topics()
        for lv in [level] if level else ["project", "user"]:
            store = memory.store(lv)
            items = topics[lv]
            count = f"{len(items)} note{'s' if len(items) != 1 else ''}"
            where = self._agent.memory.shown(store.root)
            heading = HEADINGS[lv].lstrip("# ")
            say(f"{HEADINGS[lv]}  ({where}, {count})", f"\n**{heading}** ({markdown_text(where)}, {count})\n")
            for topic in items:
                name, description, details = entry_parts(topic, now)
                say(
                    entry_line(topic, now),
                    f"- **{markdown_text(name)}** — {markdown_text(description)} {markdown_text(details)}",
                )
            if not items:
                say("(none)", "*(none)*")
        notices = [f"! {notice}" for notice in memory.take_notices()]
        report = memory.last_report
        if notices or report is not None:
            md.append("")
        for notice in notices:
            say(notice, markdown_text(notice) + "  ")
        if report is not None:
            say(f"last update: {report.summary()}")
        if in_notebook(self.shell):
            display({"text/markdown": "\n".join(md), "text/plain": "\n".join(text)}, raw=True)
        else:
            print("\n".join(text))

    def _show_one(self, name: str, level: str | None) -> None:
        topic = self._resolve(name, level)
        store: MemoryStore = self._agent.memory.store(topic.level)
        path = store.locate(topic.name) or store.path_of(topic.name)
        print(f"{self._agent.memory.shown(path)}:")
        print(printable(read_topic_file(path)), end="")


def _body(words: list[str], cell: str | None) -> str | None:
    if cell is not None and cell.strip():
        return cell.strip("\n")
    return " ".join(words) if words else None


def _first_line(body: str) -> str:
    line = next((ln.strip(" #-*") for ln in body.splitlines() if ln.strip()), "")
    return line[:199] + "…" if len(line) > 200 else line


__all__ = ["MemoryMagics"]
