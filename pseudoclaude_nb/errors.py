"""One exception hierarchy for the whole package.

Every message says what happened *and* what to do next, because the magics show
``str(error)`` to the user as a one-line error, without a traceback::

    PseudoClaudeError
    ├── ConfigError              bad setting, unknown provider, missing key, a strategy that does not load
    ├── SessionError
    │   ├── SessionNotFoundError
    │   ├── SessionLockedError   another process holds writer.lock
    │   ├── IndexBusy            another process is writing the history index (try again)
    │   ├── UnsafePathError      a link or special file in the package's own folders (also an OSError)
    │   ├── SessionWriteError    the log could not be written (writer is now "failed")
    │   │   └── SpillWriteError  a huge tool result's spill file could not be written
    │   └── ArchiveError         an import archive was rejected; nothing was written
    ├── ProviderError            the model could not be asked
    │   ├── ContextTooLong       the provider says the prompt exceeds the window
    │   ├── ScriptError          a scripted provider's script is malformed or used up
    │   └── StreamError          a response stream ended without a stop reason
    ├── ProtocolError            a request would break tool call <-> result pairing
    ├── HookError                a conversation hook raised; the run stops
    ├── StrategyError            a strategy raised, or answered something that is not an action; the run stops
    ├── ServerGone               an MCP server exited or closed its connection (the hub makes it a ToolError)
    ├── InvalidOperation         a memory operation (model or %memory) that cannot be applied
    └── ToolError                raised inside tools; becomes an error *result*
        └── BoundaryError        a path leaves the workspace

``UsageError`` (mistakes in magic arguments) is IPython's own and is raised only by
the magics; the core stays free of IPython.
"""

from __future__ import annotations


class PseudoClaudeError(Exception):
    """Base of every error this package raises on purpose."""


class ConfigError(PseudoClaudeError):
    """A setting, provider name, key or script path is wrong or missing."""


class SessionError(PseudoClaudeError):
    """Something is wrong with a session on disk."""


class SessionNotFoundError(SessionError):
    pass


class SessionLockedError(SessionError):
    """Another process is writing this session (it holds ``writer.lock``)."""

    def __init__(self, session_id: str, pid: int | None) -> None:
        who = f"pid {pid}" if pid else "pid unknown"
        super().__init__(
            f"session {session_id} is open for writing in another process ({who}); "
            "close that kernel, or open this session read-only (%sessions show)"
        )
        self.session_id = session_id
        self.pid = pid


class IndexBusy(SessionError):
    """Another process (a second kernel in the folder) is writing the history index: nothing
    is wrong with the file, and what was not indexed is read from the log next time."""


class UnsafePathError(SessionError, OSError):
    """A path under ``.pseudoclaude/`` or ``$PSEUDOCLAUDE_HOME`` is a link, a special file or hard-linked.

    Also an ``OSError``, so code that copes with an unreadable file copes with this one too.
    """

    def __init__(self, message: str) -> None:
        SessionError.__init__(self, message)

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class SessionWriteError(SessionError):
    """The session log could not be written; the conversation is kept in memory.

    The next successful write is a ``resync`` replace, so the log converges again.
    """


class SpillWriteError(SessionWriteError):
    """A tool result over the spill limit could not be written to its file (Layer 1).

    ``kept`` (a ``ToolResult``) is what the conversation and the log get instead: the
    result's head and a note, never the raw body. The full text waits in memory and is
    written (and the note replaced by the usual preview) once the disk has room again.
    """

    def __init__(self, message: str, kept: object) -> None:
        super().__init__(message)
        self.kept = kept


class ArchiveError(SessionError):
    """An import archive was rejected; nothing was written."""


class ProviderError(PseudoClaudeError):
    """The provider could not answer (network, status, authentication)."""

    # The server's own error code and the parameter it blamed, where it named them (issue 43:
    # OpenAI's ``previous_response_not_found`` on ``previous_response_id``).
    code: str | None = None
    param: str | None = None

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ContextTooLong(ProviderError):
    """The provider refused the request as longer than the model's window.

    ``window`` is the window the error named, when it named one (issue 32: llama.cpp's
    400 says ``"n_ctx":2048``); the runner adopts it before it compacts and retries.
    ``prompt`` is the prompt's size the error named (``n_prompt_tokens``).
    """

    def __init__(
        self, message: str, *, status: int | None = None, window: int | None = None, prompt: int | None = None
    ) -> None:
        super().__init__(message, status=status)
        self.window = window
        self.prompt = prompt  # the prompt's tokens as the server counted them, when it said


class ScriptError(ProviderError):
    """A scripted provider's script is malformed or has run out of turns."""


class StreamError(ProviderError):
    """A response stream stopped before its stop reason; nothing partial was kept (what the
    provider reported it used is logged as spend by the runner: issue 43)."""


class ProtocolError(PseudoClaudeError):
    """A request would contain a tool call without its result, or a result without its call."""


class HookError(PseudoClaudeError):
    """A conversation hook raised: the conversation and the log may now differ, so the run stops."""


class StrategyError(PseudoClaudeError):
    """A context strategy raised in ``decide`` (or another of its methods), or answered something
    that is not an action. Raised before anything of that answer was applied: the run stops
    with the conversation and the log as they were."""


class ServerGone(PseudoClaudeError):
    """An MCP server went away (exited, or closed the connection); its message quotes why.

    The MCP hub turns it into a ``ToolError`` for the model and marks the server crashed.
    """


class InvalidOperation(PseudoClaudeError):
    """A memory operation (from the model or from ``%memory``) that cannot be applied."""


class ToolError(PseudoClaudeError):
    """Raised by a tool; the runner turns it into an error result the model can read."""


class BoundaryError(ToolError):
    """A path resolves outside the workspace (``..``, absolute path or symlink)."""
