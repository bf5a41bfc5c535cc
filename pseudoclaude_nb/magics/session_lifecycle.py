"""``%sessions`` trash, restore, purge, gc, export and import: the actions that move, delete or
copy whole sessions (``session.lifecycle``, ``session.archive``), and what they tell the history
index. ``magics`` is the ``SessionMagics`` (its host, shell and path rules); the listing and the
readers stay in ``sessions``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from ..errors import UnsafePathError
from ..session.lifecycle import gc_sessions, list_trash, plan_purge, purge, restore_session, trash_session
from .session_text import _count, _size, _when, safe_line
from .tables import Column, Note, Table, emit

if TYPE_CHECKING:
    from ..session.lifecycle import IndexHook


# --- trash, restore, purge, gc ---------------------------------------------------------------


def show_trash(magics: Any) -> None:
    trashed = list_trash(magics._host.workspace)
    if not trashed:
        print("the trash is empty (.pseudoclaude/trash/)")
        return
    table = Table(
        (
            Column("trash id", mono=True),
            Column("trashed"),
            Column("last activity"),
            Column("size", right=True),
            Column("title"),
        ),
        indent="  ",
    )
    for t in trashed:
        via = " (gc)" if t.reason == "gc" else ""
        table.add(
            safe_line(t.id),
            _when(t.trashed_at),
            _when(t.last_activity),
            _size(t.bytes),
            safe_line(t.title) + via,
        )
    total = sum(t.bytes for t in trashed)
    emit(
        magics.shell,
        table,
        Note(
            f"{_count(len(trashed), 'trashed session')}, {_size(total)}. %sessions restore ID · "
            "%sessions purge ID --yes · %sessions purge --all-trash --yes"
        ),
    )


def trash(magics: Any, session_id: str) -> None:
    t = trash_session(magics._host.workspace, session_id, open_id=magics._open_id(), index=index_hook())
    title = f" ({safe_line(t.title)})" if t.title else ""
    print(
        f"moved session {session_id}{title} to the trash: .pseudoclaude/trash/{t.id}. "
        f"Undo with %sessions restore {t.id}; delete it for good with %sessions purge {t.id} --yes"
    )


def restore(magics: Any, trash_id: str) -> None:
    path = restore_session(magics._host.workspace, trash_id, index=index_hook())
    print(f"restored session {path.name}; continue it with %sessions resume {path.name}")


def purge_trashed(magics: Any, trash_id: str | None, *, all_trash: bool, yes: bool) -> None:
    if bool(trash_id) == all_trash:
        raise UsageError("%sessions purge needs one trashed session ID or --all-trash (not both)")
    plan = plan_purge(magics._host.workspace, trash_id)
    if not plan.count:
        print("the trash is empty; nothing to purge")
        return
    what = f"{_count(plan.count, 'trashed session')} ({_size(plan.bytes)}): " + ", ".join(
        safe_line(t.id) for t in plan.sessions
    )
    if not yes:
        again = f"%sessions purge {trash_id or '--all-trash'} --yes"
        print(f"would permanently delete {what}. Nothing was deleted; to confirm, run {again}")
        return
    purge(plan, index=index_hook())
    print(f"permanently deleted {what}")


def gc(magics: Any, days: int) -> None:
    if days < 1:
        raise UsageError(f"--days must be at least 1, not {days}")
    report = gc_sessions(magics._host.workspace, days, open_id=magics._open_id(), index=index_hook())
    for info, why in report.skipped:
        print(f"kept {safe_line(info.id)} (idle since {_when(info.last_activity)}, but {why})")
    if not report.moved:
        print(f"no session idle for more than {days} days; nothing moved")
        return
    table = Table((Column("id", mono=True), Column("last activity"), Column("title")), indent="  ")
    for t in report.moved:
        table.add(safe_line(t.original_id), _when(t.last_activity), safe_line(t.title))
    emit(
        magics.shell,
        f"moved {_count(len(report.moved), 'session')} idle for more than {days} days to the trash:",
        table,
        Note("Nothing was deleted: %sessions restore ID brings one back; %sessions trash lists them"),
    )


# --- export and import -----------------------------------------------------------------------


def export(magics: Any, session_id: str, dest: str, *, spills: bool) -> None:
    from ..session.archive import export_session

    report = export_session(magics._host.workspace, session_id, magics._path(dest), spills=spills)
    if report.redactions:
        kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(report.redactions.items()))
        redacted = f"{_count(sum(report.redactions.values()), 'secret')} redacted ({kinds})"
    else:
        redacted = "no secrets found to redact"
    left_out = "; spilled results left out" if not spills else ""
    print(
        f"exported session {session_id} to {report.path} "
        f"({_count(report.files, 'file')}, {_size(report.bytes)}); {redacted}{left_out}"
    )


def import_archive(magics: Any, source: str) -> None:
    from ..session.archive import import_session

    report = import_session(magics._host.workspace, magics._path(source))
    sid = report.session_id
    print(f"imported {source} as session {sid}; continue it with %sessions resume {sid}")
    if report.renamed:
        print(f"(its id {report.original_id} is already taken here, so it got the new id {sid})")
    for problem in report.problems:
        print(f"! {safe_line(problem)}")


def index_hook() -> IndexHook:
    """The history index's part in trash, restore, purge and gc, imported only by those actions:
    a listing in a fresh kernel stays without the index's modules (issue 34)."""
    from ..history import LIFECYCLE_HOOK

    return LIFECYCLE_HOOK


def trash_line(workspace: Path) -> str | None:
    """The listing's line about the trash: how many it holds, or why it was not read."""
    try:
        trashed = list_trash(workspace)
    except UnsafePathError as exc:  # a linked trash/ (a clone's): the sessions still list
        return safe_line(str(exc))
    return f"{_count(len(trashed), 'session')} in the trash: %sessions list --trash" if trashed else None
