"""Sessions: the durable, append-only log of a conversation, the catalog of logs, and their lifecycle.

The names below are imported on first use (``lazy.exports``): importing one module of this
package (``session.paths``, ``session.catalog``) must not import the writer, the loader and
pydantic's message models with it, so ``%sessions list`` in a fresh kernel reads sidecars
without paying for the agent's world (issue 34).
"""

from typing import TYPE_CHECKING

from ..lazy import exports

if TYPE_CHECKING:
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
    from .paths import new_session_dir, resolve_workspace, session_dir
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
        ".archive": ("ArchiveError", "ExportReport", "ImportLimits", "ImportReport", "export_session", "import_session"),
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
        ".paths": ("new_session_dir", "resolve_workspace", "session_dir"),
        ".writer": ("SessionWriter",),
    },
)
