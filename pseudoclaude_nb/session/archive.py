"""Export a session to a zip and import one back (SPEC §6.4), safely both ways.

An export holds ``manifest.json`` (format, version, session id, and every file with its
sha256 and size), ``conversation.jsonl``, ``meta.json`` and, unless left out,
``tool-results/``. Everything in it passes through the redactor, so an export can be shared.

An import trusts nothing in the archive. It checks every member's name, type and declared
size, the manifest and every hash *before* writing anything; it reads no member past its
declared size or the limits (a zip bomb stops there), and writes the log last, so a session
appears in the catalog only once it is whole. An id that is taken gets a new one.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
import time
import zipfile
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ..errors import ArchiveError, SessionError, UnsafePathError
from ..nesting import text_nesting
from ..redact import Redactor
from . import safeio
from .catalog import session_info, write_meta
from .entries import SpillEntry, decode, parse_entry
from .images import IMAGE_DIR
from .lifecycle import trash_dir
from .loader import load_session
from .paths import (
    LOG_NAME,
    META_NAME,
    SPILL_DIR,
    ensure_state_dir,
    new_session_dir,
    session_dir,
    sessions_dir,
)
from .writer import EncodeError, encode_entry

FORMAT = "pseudoclaude-session"
VERSION = 1
MANIFEST = "manifest.json"
_CHUNK = 1 << 20
_SPILL_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.~-]{0,199}")  # safe_name() + ".txt"; never hidden
_IMAGE_NAME = re.compile(r"[0-9a-f]{64}\.(?:png|jpg|gif|webp)")  # issue-14: images/<sha256>.<ext>
_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_~-]{0,79}")
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class ImportLimits:
    max_members: int = 10_000
    max_member_bytes: int = 512 << 20
    max_total_bytes: int = 2 << 30
    max_manifest_bytes: int = 8 << 20
    # A member over min_ratio_bytes may inflate at most max_ratio times (text logs deflate
    # ~5-20x; 300 MB of one repeated byte from 292 KB is ~1,000x).
    max_ratio: int = 200
    min_ratio_bytes: int = 1 << 20
    max_manifest_depth: int = 32


@dataclass
class ExportReport:
    path: Path
    session_id: str
    files: int  # zip members, the manifest included
    bytes: int  # of the zip file
    redactions: Counter[str] = field(default_factory=Counter)


@dataclass
class ImportReport:
    session_id: str
    original_id: str
    files: int
    bytes: int  # uncompressed
    problems: list[str] = field(default_factory=list)  # what the loader had to recover

    @property
    def renamed(self) -> bool:
        return self.session_id != self.original_id


# --- export ---------------------------------------------------------------------------------------


def export_session(
    workspace: Path,
    session_id: str,
    dest: str | os.PathLike[str],
    *,
    spills: bool = True,
    redact: bool = True,
) -> ExportReport:
    """Write session ``session_id`` to the zip ``dest`` (which must not exist yet)."""
    src = session_dir(workspace, session_id)
    dest = Path(dest)
    if dest.exists():
        raise SessionError(f"{dest} already exists; choose another path or delete it first")
    if not dest.parent.is_dir():
        raise SessionError(f"folder {dest.parent} does not exist; create it or choose another path")
    info = session_info(src)  # brings meta.json up to date with the log
    if info.status == "unsafe":
        raise UnsafePathError(f"session {session_id} is not exported: {info.title}")
    redactor = Redactor() if redact else None
    files: list[dict[str, Any]] = []
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    try:
        with os.fdopen(fd, "wb") as raw, zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as zf:
            changed: dict[str, tuple[int, str]] = {}  # spill path -> (bytes, sha256) once redacted
            if spills:
                for path in _spill_files(src):
                    rel = f"{SPILL_DIR}/{path.name}"
                    data = safeio.read_bytes(path)
                    out = _redact_bytes(data, redactor)
                    if out is not data:
                        changed[rel] = (len(out), hashlib.sha256(out).hexdigest())
                    files.append(_add(zf, rel, out))
            for path in _image_files(src):  # issue-14: binary, referenced by hash: not redacted
                files.append(_add(zf, f"{IMAGE_DIR}/{path.name}", safeio.read_bytes(path)))
            files.append(_add_log(zf, src / LOG_NAME, redactor, changed))
            meta = json.loads(safeio.read_bytes(src / META_NAME, limit=1 << 20))
            # The replay state is of this copy of the log only (an import rebuilds it).
            meta = {k: v for k, v in meta.items() if k not in ("replay", "offset", "head")}
            if redactor is not None:
                meta = redactor.value(meta)
            files.append(_add(zf, META_NAME, json.dumps(meta, ensure_ascii=False, indent=1).encode()))
            manifest = {
                "format": FORMAT,
                "version": VERSION,
                "session_id": session_id,
                "exported_at": time.time(),
                "redacted": redact,
                "spills": spills,
                "files": files,
            }
            zf.writestr(MANIFEST, json.dumps(manifest, ensure_ascii=False, indent=1))
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    counts = redactor.counts if redactor is not None else Counter()
    return ExportReport(dest, session_id, len(files) + 1, dest.stat().st_size, counts)  # + manifest


def _spill_files(src: Path) -> list[Path]:
    folder = src / SPILL_DIR
    if not folder.is_dir():
        return []
    # Regular files with a layout name only: no links, no ".spill-" temporaries of a crash.
    return sorted(
        p for p in folder.iterdir() if _SPILL_NAME.fullmatch(p.name) and stat.S_ISREG(p.lstat().st_mode)
    )


def _image_files(src: Path) -> list[Path]:
    folder = src / IMAGE_DIR
    if not folder.is_dir() or folder.is_symlink():
        return []
    return sorted(
        p for p in folder.iterdir() if _IMAGE_NAME.fullmatch(p.name) and stat.S_ISREG(p.lstat().st_mode)
    )


def _add(zf: zipfile.ZipFile, name: str, data: bytes) -> dict[str, Any]:
    zf.writestr(name, data)
    return {"path": name, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}


def _redact_bytes(data: bytes, redactor: Redactor | None) -> bytes:
    """Redact text that may not be valid UTF-8; bytes nobody changed come back as they were."""
    if redactor is None or not redactor.may_contain(data):
        return data
    text = data.decode("utf-8", "surrogateescape")
    out = redactor.text(text)
    return data if out is text else out.encode("utf-8", "surrogateescape")


def _add_log(
    zf: zipfile.ZipFile, log: Path, redactor: Redactor | None, changed: dict[str, tuple[int, str]]
) -> dict[str, Any]:
    """Stream the log line by line, redacted; a spill entry follows its redacted file."""
    digest, size = hashlib.sha256(), 0
    with os.fdopen(safeio.open_file(log), "rb") as f, zf.open(LOG_NAME, "w", force_zip64=True) as out:
        # Up to the size seen now: a writer appending meanwhile adds at most a torn tail.
        remaining = os.fstat(f.fileno()).st_size
        while remaining > 0:
            line = f.readline(remaining)
            if not line:
                break
            remaining -= len(line)
            line = _export_line(line, redactor, changed)
            out.write(line)
            digest.update(line)
            size += len(line)
    return {"path": LOG_NAME, "sha256": digest.hexdigest(), "size": size}


def _export_line(line: bytes, redactor: Redactor | None, changed: dict[str, tuple[int, str]]) -> bytes:
    is_spill = bool(changed) and b'"spill"' in line
    if not is_spill and (redactor is None or not redactor.may_contain(line)):
        return line
    entry = decode(line)
    if entry is None:
        return _redact_bytes(line, redactor)  # a torn or corrupt line: redact it as text
    new = dict(entry)
    spill = parse_entry(entry)
    if isinstance(spill, SpillEntry) and spill.path is not None and spill.path in changed:
        new["bytes"], new["sha256"] = changed[spill.path]
    try:
        out = encode_entry(new)
    except EncodeError:
        return _redact_bytes(line, redactor)
    if redactor is not None:
        out = redactor.line(new, out)  # each string, then the whole line (key/value splits)
    if not line.endswith(b"\n"):
        out = out[:-1]
    return line if out.rstrip(b"\n") == line.rstrip(b"\n") else out


# --- import ---------------------------------------------------------------------------------------


@dataclass
class _Plan:
    session_id: str
    members: dict[str, tuple[zipfile.ZipInfo, str, int]]  # path -> (info, sha256, size)


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
    raw = os.fdopen(fd, "rb")
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raw.close()
        raise _reject(archive, "it is not a regular file (a FIFO, device or directory)")
    size = st.st_size
    if size > limits.max_total_bytes:
        raw.close()
        raise _reject(archive, f"{size:,} bytes is over the import limit of {limits.max_total_bytes:,}")
    try:
        zf = zipfile.ZipFile(raw)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raw.close()
        raise _reject(archive, f"not a readable zip archive ({exc})") from None
    with raw, zf:
        plan = _validate(zf, archive, limits)
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


def _reject(archive: Path, why: str) -> ArchiveError:
    return ArchiveError(f"rejected {archive.name}: {why}; nothing was imported")


def _validate(zf: zipfile.ZipFile, archive: Path, limits: ImportLimits) -> _Plan:
    infos = zf.infolist()
    if len(infos) > limits.max_members:
        raise _reject(archive, f"{len(infos):,} members, more than the limit of {limits.max_members:,}")
    files: dict[str, zipfile.ZipInfo] = {}
    declared = 0
    for info in infos:
        _check_member(info, archive, limits)
        if info.is_dir():
            continue
        if info.filename in files:
            raise _reject(archive, f"member {info.filename!r} appears twice")
        files[info.filename] = info
        declared += info.file_size
        if info.file_size > limits.min_ratio_bytes and info.file_size > limits.max_ratio * max(
            info.compress_size, 1
        ):
            raise _reject(
                archive,
                f"member {info.filename!r} inflates {info.file_size / max(info.compress_size, 1):,.0f} "
                f"times, more than the limit of {limits.max_ratio:,} (a zip bomb?)",
            )
        if declared > limits.max_total_bytes:
            raise _reject(archive, f"members total more than the limit of {limits.max_total_bytes:,} bytes")
    if MANIFEST not in files:
        raise _reject(archive, f"no {MANIFEST}: it is not a pseudoclaude session export")
    session_id, listed = _read_manifest(zf, files.pop(MANIFEST), archive, limits)
    missing = sorted(set(listed) - set(files))
    extra = sorted(set(files) - set(listed))
    if missing:
        raise _reject(archive, f"{', '.join(missing[:5])} listed in the manifest but missing")
    if extra:
        raise _reject(archive, f"{', '.join(extra[:5])} not listed in the manifest")
    if LOG_NAME not in files:
        raise _reject(archive, f"no {LOG_NAME}")
    members = {}
    for path, info in files.items():
        sha, size = listed[path]
        if info.file_size != size:
            raise _reject(archive, f"{path} is {info.file_size:,} bytes but the manifest says {size:,}")
        got_sha, got_size = _hash_member(zf, info, archive, size, None)
        if got_size != size or got_sha != sha:
            raise _reject(archive, f"{path} does not match its sha256 in the manifest")
        members[path] = (info, sha, size)
    return _Plan(session_id, members)


def _check_member(info: zipfile.ZipInfo, archive: Path, limits: ImportLimits) -> None:
    name = info.filename
    if "\0" in info.orig_filename:  # zipfile cuts the name at a NUL; the original shows it
        raise _reject(archive, f"member name {info.orig_filename!r} holds a NUL byte")
    if name.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", name):
        raise _reject(archive, f"absolute path {name!r}")
    if "\\" in name:
        raise _reject(archive, f"backslash in member name {name!r}")
    parts = name.rstrip("/").split("/")
    if ".." in parts:
        raise _reject(archive, f"member {name!r} climbs out with '..'")
    mode = info.external_attr >> 16
    if stat.S_ISLNK(mode):
        raise _reject(archive, f"member {name!r} is a symbolic link")
    if mode and stat.S_IFMT(mode) not in (0, stat.S_IFREG, stat.S_IFDIR):
        raise _reject(archive, f"member {name!r} is not a regular file")
    if info.is_dir():
        if name not in (f"{SPILL_DIR}/", f"{IMAGE_DIR}/"):
            raise _reject(archive, f"directory {name!r} is outside the session layout")
        return
    if not (
        name in (MANIFEST, LOG_NAME, META_NAME)
        or (len(parts) == 2 and parts[0] == SPILL_DIR and _SPILL_NAME.fullmatch(parts[1]))
        or (len(parts) == 2 and parts[0] == IMAGE_DIR and _IMAGE_NAME.fullmatch(parts[1]))
    ):
        raise _reject(archive, f"member {name!r} is outside the session layout")
    if info.flag_bits & 0x1:
        raise _reject(archive, f"member {name!r} is encrypted")
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise _reject(archive, f"member {name!r} uses an unsupported compression")
    limit = limits.max_manifest_bytes if name == MANIFEST else limits.max_member_bytes
    if info.file_size > limit:
        raise _reject(
            archive, f"member {name!r} declares {info.file_size:,} bytes, over the limit of {limit:,}"
        )


def _read_manifest(
    zf: zipfile.ZipFile, info: zipfile.ZipInfo, archive: Path, limits: ImportLimits
) -> tuple[str, dict[str, tuple[str, int]]]:
    chunks: list[bytes] = []
    _hash_member(zf, info, archive, info.file_size, chunks)
    data = b"".join(chunks)
    if text_nesting(data) > limits.max_manifest_depth:
        raise _reject(archive, f"{MANIFEST} nests deeper than {limits.max_manifest_depth} levels")
    try:
        manifest = json.loads(data)
    except (ValueError, RecursionError):
        raise _reject(archive, f"{MANIFEST} is not valid JSON") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise _reject(archive, f"{MANIFEST} is not of format {FORMAT!r}")
    version = manifest.get("version")
    if version != VERSION:
        hint = (
            "made by a newer pseudoclaude_nb; upgrade to import it" if isinstance(version, int) else "unknown"
        )
        raise _reject(archive, f"format version {version!r} ({hint}); this version reads {VERSION}")
    session_id = manifest.get("session_id")
    if not isinstance(session_id, str) or not _SESSION_ID.fullmatch(session_id):
        raise _reject(archive, f"session id {session_id!r} in {MANIFEST} is not a valid id")
    entries = manifest.get("files")
    if not isinstance(entries, list):
        raise _reject(archive, f"{MANIFEST} has no list of files")
    listed: dict[str, tuple[str, int]] = {}
    for item in entries:
        ok = (
            isinstance(item, dict)
            and isinstance(item.get("path"), str)
            and isinstance(item.get("sha256"), str)
            and _SHA256.fullmatch(item["sha256"])
            and isinstance(item.get("size"), int)
            and not isinstance(item["size"], bool)
            and item["size"] >= 0
        )
        if not ok:
            raise _reject(archive, f"{MANIFEST} has a malformed file entry: {str(item)[:100]}")
        if item["path"] in listed or item["path"] == MANIFEST:
            raise _reject(archive, f"{MANIFEST} lists {item['path']!r} twice")
        listed[item["path"]] = (item["sha256"], item["size"])
    return session_id, listed


def _hash_member(
    zf: zipfile.ZipFile,
    info: zipfile.ZipInfo,
    archive: Path,
    limit: int,
    sink: list[bytes] | IO[bytes] | None,
) -> tuple[str, int]:
    """sha256 and size of a member, reading at most ``limit`` + 1 bytes of it (zip bombs)."""
    digest, size = hashlib.sha256(), 0
    try:
        with zf.open(info) as f:
            while True:
                chunk = f.read(min(_CHUNK, limit + 1 - size))
                if not chunk:
                    break
                size += len(chunk)
                if size > limit:
                    raise _reject(archive, f"member {info.filename!r} inflates past its declared size")
                digest.update(chunk)
                if isinstance(sink, list):
                    sink.append(chunk)
                elif sink is not None:
                    sink.write(chunk)
    except ArchiveError:
        raise
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, RuntimeError) as exc:
        # A bad CRC, a truncated or corrupt deflate stream, an unsupported feature.
        raise _reject(archive, f"member {info.filename!r} is damaged ({exc})") from None
    return digest.hexdigest(), size


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


def _extract(zf: zipfile.ZipFile, archive: Path, plan: _Plan, target: Path) -> None:
    """Second pass: write every member, hashing again (the file may have changed since)."""
    order = sorted(plan.members, key=lambda p: p == LOG_NAME)  # the log last
    for path in order:
        info, sha, size = plan.members[path]
        dest = target / path
        dest.parent.mkdir(exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".import-", dir=dest.parent)
        try:
            with os.fdopen(fd, "wb") as out:
                got_sha, got_size = _hash_member(zf, info, archive, size, out)
                if (got_sha, got_size) != (sha, size):
                    raise _reject(archive, f"{path} changed while it was imported")
                out.flush()
                os.fsync(out.fileno())
            os.chmod(tmp, 0o600)
            os.replace(tmp, dest)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
