"""Export a session to a zip (SPEC §6.4): everything in it passes through the redactor.

An export can be shared: the log is streamed line by line and redacted as a whole line
(key/value splits included), spill files are redacted and their log entries follow the
redacted file's size and hash, ``meta.json`` is redacted; images are binary and referenced
by hash, so they go as they are. The zip is written to a temporary file, fsynced, then
renamed, so ``dest`` is either absent or whole; the temporary file is noted while it exists
(``pending``), so one a killed export left is removed by the next export.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import stat
import time
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

from ... import safeio
from ...errors import SessionError, UnsafePathError
from ...redact import Redactor
from ...workspace import LOG_NAME, META_NAME, SPILL_DIR, session_dir
from ..catalog import session_info
from ..entries import SpillEntry, decode, parse_entry
from ..images import IMAGE_DIR
from ..writer import EncodeError, encode_entry
from . import pending
from .format import FORMAT, IMAGE_NAME, MANIFEST, SPILL_NAME, VERSION, ExportReport


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
    pending.sweep(workspace)  # what killed exports left (issue 41)
    # Named, and noted, before it exists: a kill at any point leaves nothing a later export
    # cannot find.
    tmp = dest.parent / f"{pending.temp_prefix(dest)}{secrets.token_hex(4)}.tmp"
    with pending.noted(workspace, tmp):
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
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
            tmp.unlink(missing_ok=True)
            raise
    counts = redactor.counts if redactor is not None else Counter()
    return ExportReport(dest, session_id, len(files) + 1, dest.stat().st_size, counts)  # + manifest


def _spill_files(src: Path) -> list[Path]:
    folder = src / SPILL_DIR
    if not folder.is_dir():
        return []
    # Regular files with a layout name only: no links, no ".spill-" temporaries of a crash.
    return sorted(
        p for p in folder.iterdir() if SPILL_NAME.fullmatch(p.name) and stat.S_ISREG(p.lstat().st_mode)
    )


def _image_files(src: Path) -> list[Path]:
    folder = src / IMAGE_DIR
    if not folder.is_dir() or folder.is_symlink():
        return []
    return sorted(
        p for p in folder.iterdir() if IMAGE_NAME.fullmatch(p.name) and stat.S_ISREG(p.lstat().st_mode)
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
