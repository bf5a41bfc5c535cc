"""Opening the package's own files without following links (``.pseudoclaude/``, ``$PSEUDOCLAUDE_HOME``).

A workspace is untrusted input: a cloned repository or an unpacked tarball can carry a
``.pseudoclaude/`` whose files are symlinks (to ``/etc/passwd``, to another user's folder),
FIFOs (a read that never returns) or devices (``/dev/zero``: a read that never ends). So
every path the package itself opens there goes through this module:

* the directories from the *trusted root* down are opened one component at a time with
  ``O_NOFOLLOW | O_DIRECTORY`` relative to the previous directory's fd (``openat``), so a
  component swapped for a symlink between a check and the open is refused, not followed;
* the file is opened relative to its directory's fd with ``O_NOFOLLOW | O_NONBLOCK`` (a FIFO
  does not block the open) and accepted only if ``fstat`` says it is a regular file; a file
  opened for writing must also have a single hard link (another name could be anywhere);
* a refusal raises ``UnsafePathError`` naming the path and why.

The trusted root is ``$PSEUDOCLAUDE_HOME`` for paths below it, else the folder holding the
last ``.pseudoclaude`` component of the path (the workspace: chosen by the user), else the
path's own folder. Nothing above the root is checked: the user chose it.

Limits: the SQLite index is opened by path by SQLite itself; it is checked here just before
(``check_no_links``), which a process racing the check could still defeat.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path

from .errors import UnsafePathError

STATE_DIR = ".pseudoclaude"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR


def _home() -> Path:
    configured = os.environ.get("PSEUDOCLAUDE_HOME")
    return Path(configured).expanduser() if configured else Path.home() / ".pseudoclaude"


def trusted_root(path: str | os.PathLike[str]) -> Path:
    """The folder from which ``path``'s components are checked (see the module docstring)."""
    path = Path(os.path.abspath(path))
    home = Path(os.path.abspath(_home()))
    if path != home and path.is_relative_to(home):
        return home
    parts = path.parts
    for i in range(len(parts) - 2, 0, -1):  # never the last component: that is what is opened
        if parts[i] == STATE_DIR:
            return Path(*parts[:i])
    return path.parent


def _refuse(path: Path, why: str) -> UnsafePathError:
    return UnsafePathError(
        f"refused {path}: {why}. pseudoclaude_nb does not follow links or read special files in "
        "its own folders; if this folder came with the workspace (a clone, an archive), remove it"
    )


def open_dir(path: str | os.PathLike[str], *, create: bool = False, mode: int = 0o700) -> int:
    """An fd of directory ``path``, every component below the trusted root opened without following links.

    ``create`` makes missing components (with ``mode``). The caller closes the fd.
    """
    path = Path(os.path.abspath(path))
    root = trusted_root(path) if path != Path(os.path.abspath(_home())) else path
    rest: tuple[str, ...]
    if path == root or not path.is_relative_to(root):
        root, rest = path, ()
    else:
        rest = path.relative_to(root).parts
    try:
        if create:
            os.makedirs(root, mode=mode, exist_ok=True)
        fd = os.open(root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    except OSError as exc:
        raise _os_error(root, exc) from exc
    at = root
    for name in rest:
        at = at / name
        try:
            if create:
                try:
                    os.mkdir(name, mode, dir_fd=fd)
                except FileExistsError:
                    pass
            nxt = os.open(name, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.ELOOP, errno.ENOTDIR) or (
                exc.errno == errno.EEXIST and os.path.islink(at)
            ):
                raise _refuse(at, _what_is(at)) from None
            raise _os_error(at, exc) from exc
        os.close(fd)
        fd = nxt
    return fd


def open_subdir(dfd: int, name: str, *, shown: Path) -> int:
    """An fd of the directory ``name`` in the directory ``dfd``, not following a link (``open_dir``'s step)."""
    try:
        return os.open(name, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=dfd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise _refuse(shown, _what_is(shown)) from None
        raise _os_error(shown, exc) from exc


def _os_error(path: Path, exc: OSError) -> OSError:
    """The OSError again, with the path named (FileNotFoundError stays FileNotFoundError)."""
    return type(exc)(exc.errno, exc.strerror, str(path))


def _what_is(path: Path) -> str:
    try:
        st = os.lstat(path)
    except OSError:
        return "it changed while it was opened"
    if stat.S_ISLNK(st.st_mode):
        return "it is a symbolic link"
    if stat.S_ISFIFO(st.st_mode):
        return "it is a FIFO (named pipe)"
    if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        return "it is a device"
    if stat.S_ISSOCK(st.st_mode):
        return "it is a socket"
    if stat.S_ISDIR(st.st_mode):
        return "it is a directory"
    if stat.S_ISREG(st.st_mode):  # where a folder must be (a clone's file named .pseudoclaude)
        return "it is a file, not a folder"
    return "it is not a regular file"


def open_file(
    path: str | os.PathLike[str], flags: int = os.O_RDONLY, mode: int = 0o600, *, create_dirs: bool = False
) -> int:
    """An fd of the regular file ``path``, opened without following a link anywhere below the root."""
    path = Path(os.path.abspath(path))
    dfd = open_dir(path.parent, create=create_dirs)
    try:
        return open_at(dfd, path.name, flags, mode, shown=path)
    finally:
        os.close(dfd)


def open_at(dfd: int, name: str, flags: int, mode: int = 0o600, *, shown: Path | None = None) -> int:
    """``open_file`` of ``name`` in the directory ``dfd``."""
    shown = shown if shown is not None else Path(name)
    try:
        fd = os.open(name, flags | _NOFOLLOW | _NONBLOCK | _CLOEXEC, mode, dir_fd=dfd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR, errno.EOPNOTSUPP):
            raise _refuse(shown, _what_is_at(dfd, name, shown)) from None
        raise _os_error(shown, exc) from exc

    def refuse(st: os.stat_result) -> UnsafePathError:
        if not stat.S_ISREG(st.st_mode):
            return _refuse(shown, _kind(st.st_mode))
        return _refuse(shown, f"it has {st.st_nlink} hard links (another name for it may be anywhere)")

    return accept_regular(fd, single_link=bool(flags & _WRITE_FLAGS), refuse=refuse)


def accept_regular(fd: int, *, single_link: bool, refuse: Callable[[os.stat_result], BaseException]) -> int:
    """The fd just opened (``O_NOFOLLOW | O_NONBLOCK``), if ``fstat`` says it is a regular file
    (with one link, when ``single_link``), made blocking again; else it is closed and the
    error ``refuse(stat)`` makes is raised.

    The shared tail of every open of this package: this module's (``UnsafePathError``, for
    its own folders) and the tools' (``tools.workspace``: ``ToolError``/``BoundaryError``,
    which the model reads).
    """
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (single_link and st.st_nlink > 1):
            raise refuse(st)
        if _NONBLOCK:
            import fcntl

            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _what_is_at(dfd: int, name: str, shown: Path) -> str:
    try:
        st = os.lstat(name, dir_fd=dfd)
    except OSError:
        return _what_is(shown)
    return "it is a symbolic link" if stat.S_ISLNK(st.st_mode) else _kind(st.st_mode)


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "it is a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "it is a device"
    if stat.S_ISSOCK(mode):
        return "it is a socket"
    if stat.S_ISDIR(mode):
        return "it is a directory"
    if stat.S_ISLNK(mode):
        return "it is a symbolic link"
    return "it is not a regular file"


def read_bytes(path: str | os.PathLike[str], *, limit: int | None = None) -> bytes:
    """The whole regular file (``UnsafePathError`` beyond ``limit`` bytes, when given)."""
    fd = open_file(path)
    try:
        return _read_fd(fd, Path(path), limit)
    finally:
        os.close(fd)


def _read_fd(fd: int, path: Path, limit: int | None) -> bytes:
    size = os.fstat(fd).st_size
    if limit is not None and size > limit:
        raise _refuse(path, f"it is {size:,} bytes, over the limit of {limit:,} for this file")
    chunks, total = [], 0
    while True:
        chunk = os.read(fd, max(size - total, 1 << 16) if limit is None else min(1 << 20, limit + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
        if limit is not None and total > limit:
            raise _refuse(path, f"it grew past the limit of {limit:,} bytes while it was read")
    return b"".join(chunks)


def read_head(path: str | os.PathLike[str], size: int) -> bytes:
    """Up to the first ``size`` bytes of the regular file (``b""`` when it cannot be opened):
    a derived file's header, read before deciding whether the rest is worth reading."""
    try:
        fd = open_file(path)
    except OSError:
        return b""
    try:
        return os.read(fd, size)
    finally:
        os.close(fd)


def read_text(path: str | os.PathLike[str], *, limit: int | None = None) -> str:
    return read_bytes(path, limit=limit).decode("utf-8")


def write_atomic(
    path: str | os.PathLike[str],
    data: bytes | str,
    *,
    mode: int = 0o600,
    create_dirs: bool = False,
    fsync: bool = True,
) -> None:
    """Write a temporary file beside ``path`` (relative to the folder's fd), fsync it, rename it over.

    The rename replaces a symlink at ``path`` itself, never its target. The file gets ``mode``
    exactly (``fchmod``: no umask, no window with another mode). ``fsync=False`` is for
    derived files (a sidecar): a crash may leave it empty or old, and it is rebuilt then.
    """
    path = Path(os.path.abspath(path))
    dfd = open_dir(path.parent, create=create_dirs)
    try:
        write_atomic_at(dfd, path.name, data, mode=mode, fsync=fsync)
    finally:
        os.close(dfd)


def write_atomic_at(dfd: int, name: str, data: bytes | str, *, mode: int = 0o600, fsync: bool = True) -> None:
    """``write_atomic`` of ``name`` in a folder already opened with ``open_dir``: for a file
    rewritten often (the run marker, at every step), whose folder is walked to once."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    tmp = f".{name[:100]}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o600, dir_fd=dfd)
    try:
        try:
            view = memoryview(raw)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, mode)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dfd)
        except OSError:
            pass
        raise


def make_dirs(path: str | os.PathLike[str], *, mode: int = 0o700) -> None:
    """``mkdir -p`` below the trusted root, refusing links."""
    os.close(open_dir(path, create=True, mode=mode))


def check_no_links(path: str | os.PathLike[str]) -> None:
    """Refuse ``path`` if it or a component below its trusted root is a link or not what it should be.

    For paths another library opens by name (SQLite); a missing last component is fine.
    """
    path = Path(os.path.abspath(path))
    os.close(open_dir(path.parent))
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode):
        raise _refuse(path, _kind(st.st_mode))
    if st.st_nlink > 1:
        raise _refuse(path, f"it has {st.st_nlink} hard links (another name for it may be anywhere)")


def tree_problem(folder: str | os.PathLike[str]) -> str | None:
    """Why ``folder`` (a session directory) is unsafe to read or write, or None.

    Unsafe: the folder or a component above it (to the trusted root) is a link, or anything
    inside it is a symbolic link, a special file, or a regular file with several hard links.
    """
    folder = Path(os.path.abspath(folder))
    try:
        os.close(open_dir(folder))
    except UnsafePathError as exc:
        return str(exc)
    except OSError:
        return None  # missing: not unsafe, just gone
    stack = [folder]
    while stack:
        current = stack.pop()
        try:
            entries = list(os.scandir(current))
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            where = Path(entry.path)
            if stat.S_ISDIR(st.st_mode):
                stack.append(where)
            elif not stat.S_ISREG(st.st_mode):
                return f"{where} {_kind(st.st_mode).removeprefix('it ')}"
            elif st.st_nlink > 1:
                return f"{where} has {st.st_nlink} hard links"
    return None


# What a crash can leave: write_atomic's and older versions' temporaries, import temporaries.
TEMP_PREFIXES = (".spill-", ".import-")
STALE_SECONDS = 60.0


def is_temp_name(name: str) -> bool:
    return name.startswith(TEMP_PREFIXES) or (name.startswith(".") and name.endswith(".tmp"))


def remove_stale_temps(folder: str | os.PathLike[str], *, older_than: float = STALE_SECONDS) -> int:
    """Delete crash leftovers (temporary files older than ``older_than`` seconds) in ``folder``.

    Only regular files with a temporary's name, relative to the folder's fd; returns how many.
    Young ones are left: another process may be about to rename it.
    """
    import time

    try:
        dfd = open_dir(folder)
    except OSError:
        return 0
    removed = 0
    cutoff = time.time() - older_than
    try:
        for name in os.listdir(dfd):
            if not is_temp_name(name):
                continue
            try:
                st = os.lstat(name, dir_fd=dfd)
                if stat.S_ISREG(st.st_mode) and st.st_mtime < cutoff:
                    os.unlink(name, dir_fd=dfd)
                    removed += 1
            except OSError:
                continue
    finally:
        os.close(dfd)
    return removed
