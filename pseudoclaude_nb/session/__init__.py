"""Sessions: the durable, append-only log of a conversation, the catalog of logs, and their lifecycle.

The log layer: ``entries`` (the format and its one parser), ``writer`` (the one owner of
``conversation.jsonl``), ``loader`` with ``replay`` and ``fast_load``, ``catalog`` and
``sidecar`` (``meta.json``), ``lifecycle`` (trash, restore, purge, gc), ``fork``, ``steps``
and ``spend``; two read models in subfolders, ``timeline/`` (the timeline's pass over a
log and its ``timeline.idx``) and ``archive/`` (export to a zip and import back). What is
derived across sessions lives outside: the full-text index in ``history/``, told about
trash and restore through ``lifecycle.IndexHook``. Where things live (``workspace``) and
safe opening (``safeio``) are top-level modules, shared with tools, memory and MCP.

The names below are imported on first use (``lazy.exports``): importing one module of this
package (``session.catalog``) must not import the writer, the loader and
pydantic's message models with it, so ``%sessions list`` in a fresh kernel reads sidecars
without paying for the agent's world (issue 34).
"""

from typing import TYPE_CHECKING

from ..lazy import exports

if TYPE_CHECKING:
    from ..workspace import new_session_dir, resolve_workspace, session_dir
    from .archive import (
        ArchiveError,
        ExportReport,
        ImportLimits,
        ImportReport,
        export_session,
        import_session,
    )
    from .catalog import SessionInfo, list_sessions, session_info, write_meta
    from .lifecycle import (
        GcReport,
        PurgePlan,
        TrashedSession,
        gc_sessions,
        list_trash,
        plan_purge,
        purge,
        restore_session,
        trash_session,
    )
    from .loader import LoadResult, load_session
    from .writer import SessionWriter

__all__ = [
    "ArchiveError",
    "ExportReport",
    "GcReport",
    "ImportLimits",
    "ImportReport",
    "LoadResult",
    "PurgePlan",
    "SessionInfo",
    "SessionWriter",
    "TrashedSession",
    "export_session",
    "gc_sessions",
    "import_session",
    "list_sessions",
    "list_trash",
    "load_session",
    "new_session_dir",
    "plan_purge",
    "purge",
    "resolve_workspace",
    "restore_session",
    "session_dir",
    "session_info",
    "trash_session",
    "write_meta",
]

__getattr__, __dir__ = exports(
    __name__,
    {
        ".archive": (
            "ArchiveError",
            "ExportReport",
            "ImportLimits",
            "ImportReport",
            "export_session",
            "import_session",
        ),
        ".catalog": ("SessionInfo", "list_sessions", "session_info", "write_meta"),
        ".lifecycle": (
            "GcReport",
            "PurgePlan",
            "TrashedSession",
            "gc_sessions",
            "list_trash",
            "plan_purge",
            "purge",
            "restore_session",
            "trash_session",
        ),
        ".loader": ("LoadResult", "load_session"),
        "..workspace": ("new_session_dir", "resolve_workspace", "session_dir"),
        ".writer": ("SessionWriter",),
    },
)
