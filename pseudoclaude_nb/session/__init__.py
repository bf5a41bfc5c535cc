"""Sessions: the durable, append-only log of a conversation, and the catalog of logs."""

from .catalog import SessionInfo, list_sessions, session_info, write_meta
from .loader import LoadResult, load_session
from .paths import new_session_dir, resolve_workspace, session_dir
from .writer import SessionWriter

__all__ = [
    "LoadResult",
    "SessionInfo",
    "SessionWriter",
    "list_sessions",
    "load_session",
    "new_session_dir",
    "resolve_workspace",
    "session_dir",
    "session_info",
    "write_meta",
]
