"""Export a session to a zip and import one back (SPEC §6.4), safely both ways.

The public names live here (``pseudoclaude_nb.session.archive``): ``export_session`` (in
``export``), ``import_session`` and the format's limits and reports (``format``).

An import trusts nothing in the archive: ``import_check`` validates every member, the
manifest and every hash *before* anything is written; then the members are written,
hashing again, with the log last, so a session appears in the catalog only once it is
whole. An id that is taken gets a new one.

The package: this ``__init__`` imports (``import_session``) and is the public face;
``format`` holds the archive's names, limits and reports, ``export`` writes a zip (through
the redactor) and ``import_check`` validates one before anything is written.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import zipfile
from pathlib import Path

from ...errors import ArchiveError
from ...workspace import LOG_NAME as _LOG_NAME  # private: __all__ lists what the archive exports
from ...workspace import ensure_state_dir, new_session_dir, sessions_dir
from ..catalog import write_meta
from ..lifecycle import trash_dir
from ..loader import load_session
from . import import_check
from .export import export_session
from .format import FORMAT, MANIFEST, VERSION, ExportReport, ImportLimits, ImportReport

__all__ = [
    "FORMAT",
    "MANIFEST",
    "VERSION",
    "ArchiveError",
    "ExportReport",
    "ImportLimits",
    "ImportReport",
    "export_session",
    "import_session",
]


def import_session(
    workspace: Path, archive: str | os.PathLike[str], *, limits: ImportLimits | None = None
) -> ImportReport:
    """Validate ``archive`` completely, then add it as a session (a new id if its id is taken)."""
    limits = limits or ImportLimits()
    archive = Path(archive)
    try:
        # O_NONBLOCK: a FIFO does not block the open; fstat then refuses anything not regular
        # (a symlink to /dev/zero is followed here, the user named it, but never read).
        fd = os.open(archive, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ArchiveError(f"cannot read {archive}: {exc.strerror or exc}; check the path") from None
    st = os.fstat(fd)  # before fdopen, which refuses a directory with an error naming the fd
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise import_check.reject(archive, "it is not a regular file (a FIFO, device or directory)")
    raw = os.fdopen(fd, "rb")
    size = st.st_size
    if size > limits.max_total_bytes:
        raw.close()
        raise import_check.reject(
            archive, f"{size:,} bytes is over the import limit of {limits.max_total_bytes:,}"
        )
    try:
        zf = zipfile.ZipFile(raw)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raw.close()
        raise import_check.reject(archive, f"not a readable zip archive ({exc})") from None
    with raw, zf:
        plan = import_check.validate(zf, archive, limits)
        target = _claim(workspace, plan.session_id)
        try:
            _extract(zf, archive, plan, target)
        except BaseException:
            shutil.rmtree(target, ignore_errors=True)
            raise
    loaded = load_session(target, full=True)
    write_meta(target, loaded)  # the archive's meta.json names the old id; the sidecar is derived anyway
    total = sum(member_size for _, _, member_size in plan.members.values())
    return ImportReport(target.name, plan.session_id, len(plan.members), total, loaded.problems())


def _claim(workspace: Path, session_id: str) -> Path:
    """``sessions/<id>/`` claimed with an exclusive mkdir, or a fresh id if it is taken."""
    ensure_state_dir(workspace)
    # An id in the trash counts as taken: restoring that one later must not conflict.
    if not (trash_dir(workspace) / session_id).exists():
        try:
            path = sessions_dir(workspace) / session_id
            path.mkdir()
            return path
        except FileExistsError:
            pass
    return new_session_dir(workspace)


def _extract(zf: zipfile.ZipFile, archive: Path, plan: import_check.Plan, target: Path) -> None:
    """Second pass: write every member, hashing again (the file may have changed since)."""
    order = sorted(plan.members, key=lambda p: p == _LOG_NAME)  # the log last
    for path in order:
        info, sha, size = plan.members[path]
        dest = target / path
        dest.parent.mkdir(exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".import-", dir=dest.parent)
        try:
            with os.fdopen(fd, "wb") as out:
                got_sha, got_size = import_check.hash_member(zf, info, archive, size, out)
                if (got_sha, got_size) != (sha, size):
                    raise import_check.reject(archive, f"{path} changed while it was imported")
                out.flush()
                os.fsync(out.fileno())
            os.chmod(tmp, 0o600)
            os.replace(tmp, dest)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
