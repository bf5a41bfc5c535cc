"""Validating an import archive completely before anything is written (SPEC §6.4).

An import trusts nothing in the archive. Every member's name, type and declared size, the
manifest and every hash are checked here; no member is read past its declared size or the
limits (a zip bomb stops there), and a member that inflates more than ``max_ratio`` times is
refused before it is read. A refusal is an ``ArchiveError`` saying nothing was imported.
"""

from __future__ import annotations

import hashlib
import json
import re
import stat
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ...errors import ArchiveError
from ...nesting import text_nesting
from ...workspace import LOG_NAME, META_NAME, SPILL_DIR
from ..images import IMAGE_DIR
from .format import (
    CHUNK,
    FORMAT,
    IMAGE_NAME,
    MANIFEST,
    SESSION_ID,
    SHA256,
    SPILL_NAME,
    VERSION,
    ImportLimits,
)


@dataclass
class Plan:
    session_id: str
    members: dict[str, tuple[zipfile.ZipInfo, str, int]]  # path -> (info, sha256, size)


def reject(archive: Path, why: str) -> ArchiveError:
    return ArchiveError(f"rejected {archive.name}: {why}; nothing was imported")


def validate(zf: zipfile.ZipFile, archive: Path, limits: ImportLimits) -> Plan:
    infos = zf.infolist()
    if len(infos) > limits.max_members:
        raise reject(archive, f"{len(infos):,} members, more than the limit of {limits.max_members:,}")
    files: dict[str, zipfile.ZipInfo] = {}
    declared = 0
    for info in infos:
        _check_member(info, archive, limits)
        if info.is_dir():
            continue
        if info.filename in files:
            raise reject(archive, f"member {info.filename!r} appears twice")
        files[info.filename] = info
        declared += info.file_size
        if info.file_size > limits.min_ratio_bytes and info.file_size > limits.max_ratio * max(
            info.compress_size, 1
        ):
            raise reject(
                archive,
                f"member {info.filename!r} inflates {info.file_size / max(info.compress_size, 1):,.0f} "
                f"times, more than the limit of {limits.max_ratio:,} (a zip bomb?)",
            )
        if declared > limits.max_total_bytes:
            raise reject(archive, f"members total more than the limit of {limits.max_total_bytes:,} bytes")
    if MANIFEST not in files:
        raise reject(archive, f"no {MANIFEST}: it is not a pseudoclaude session export")
    session_id, listed = _read_manifest(zf, files.pop(MANIFEST), archive, limits)
    missing = sorted(set(listed) - set(files))
    extra = sorted(set(files) - set(listed))
    if missing:
        raise reject(archive, f"{', '.join(missing[:5])} listed in the manifest but missing")
    if extra:
        raise reject(archive, f"{', '.join(extra[:5])} not listed in the manifest")
    if LOG_NAME not in files:
        raise reject(archive, f"no {LOG_NAME}")
    members = {}
    for path, info in files.items():
        sha, size = listed[path]
        if info.file_size != size:
            raise reject(archive, f"{path} is {info.file_size:,} bytes but the manifest says {size:,}")
        got_sha, got_size = hash_member(zf, info, archive, size, None)
        if got_size != size or got_sha != sha:
            raise reject(archive, f"{path} does not match its sha256 in the manifest")
        members[path] = (info, sha, size)
    return Plan(session_id, members)


def _check_member(info: zipfile.ZipInfo, archive: Path, limits: ImportLimits) -> None:
    name = info.filename
    if "\0" in info.orig_filename:  # zipfile cuts the name at a NUL; the original shows it
        raise reject(archive, f"member name {info.orig_filename!r} holds a NUL byte")
    if name.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", name):
        raise reject(archive, f"absolute path {name!r}")
    if "\\" in name:
        raise reject(archive, f"backslash in member name {name!r}")
    parts = name.rstrip("/").split("/")
    if ".." in parts:
        raise reject(archive, f"member {name!r} climbs out with '..'")
    mode = info.external_attr >> 16
    if stat.S_ISLNK(mode):
        raise reject(archive, f"member {name!r} is a symbolic link")
    if mode and stat.S_IFMT(mode) not in (0, stat.S_IFREG, stat.S_IFDIR):
        raise reject(archive, f"member {name!r} is not a regular file")
    if info.is_dir():
        if name not in (f"{SPILL_DIR}/", f"{IMAGE_DIR}/"):
            raise reject(archive, f"directory {name!r} is outside the session layout")
        return
    if not (
        name in (MANIFEST, LOG_NAME, META_NAME)
        or (len(parts) == 2 and parts[0] == SPILL_DIR and SPILL_NAME.fullmatch(parts[1]))
        or (len(parts) == 2 and parts[0] == IMAGE_DIR and IMAGE_NAME.fullmatch(parts[1]))
    ):
        raise reject(archive, f"member {name!r} is outside the session layout")
    if info.flag_bits & 0x1:
        raise reject(archive, f"member {name!r} is encrypted")
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise reject(archive, f"member {name!r} uses an unsupported compression")
    limit = limits.max_manifest_bytes if name == MANIFEST else limits.max_member_bytes
    if info.file_size > limit:
        raise reject(
            archive, f"member {name!r} declares {info.file_size:,} bytes, over the limit of {limit:,}"
        )


def _read_manifest(
    zf: zipfile.ZipFile, info: zipfile.ZipInfo, archive: Path, limits: ImportLimits
) -> tuple[str, dict[str, tuple[str, int]]]:
    chunks: list[bytes] = []
    hash_member(zf, info, archive, info.file_size, chunks)
    data = b"".join(chunks)
    if text_nesting(data) > limits.max_manifest_depth:
        raise reject(archive, f"{MANIFEST} nests deeper than {limits.max_manifest_depth} levels")
    try:
        manifest = json.loads(data)
    except (ValueError, RecursionError):
        raise reject(archive, f"{MANIFEST} is not valid JSON") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise reject(archive, f"{MANIFEST} is not of format {FORMAT!r}")
    version = manifest.get("version")
    if version != VERSION:
        hint = (
            "made by a newer pseudoclaude_nb; upgrade to import it" if isinstance(version, int) else "unknown"
        )
        raise reject(archive, f"format version {version!r} ({hint}); this version reads {VERSION}")
    session_id = manifest.get("session_id")
    if not isinstance(session_id, str) or not SESSION_ID.fullmatch(session_id):
        raise reject(archive, f"session id {session_id!r} in {MANIFEST} is not a valid id")
    entries = manifest.get("files")
    if not isinstance(entries, list):
        raise reject(archive, f"{MANIFEST} has no list of files")
    listed: dict[str, tuple[str, int]] = {}
    for item in entries:
        ok = (
            isinstance(item, dict)
            and isinstance(item.get("path"), str)
            and isinstance(item.get("sha256"), str)
            and SHA256.fullmatch(item["sha256"])
            and isinstance(item.get("size"), int)
            and not isinstance(item["size"], bool)
            and item["size"] >= 0
        )
        if not ok:
            raise reject(archive, f"{MANIFEST} has a malformed file entry: {str(item)[:100]}")
        if item["path"] in listed or item["path"] == MANIFEST:
            raise reject(archive, f"{MANIFEST} lists {item['path']!r} twice")
        listed[item["path"]] = (item["sha256"], item["size"])
    return session_id, listed


def hash_member(
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
                chunk = f.read(min(CHUNK, limit + 1 - size))
                if not chunk:
                    break
                size += len(chunk)
                if size > limit:
                    raise reject(archive, f"member {info.filename!r} inflates past its declared size")
                digest.update(chunk)
                if isinstance(sink, list):
                    sink.append(chunk)
                elif sink is not None:
                    sink.write(chunk)
    except ArchiveError:
        raise
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, RuntimeError) as exc:
        # A bad CRC, a truncated or corrupt deflate stream, an unsupported feature.
        raise reject(archive, f"member {info.filename!r} is damaged ({exc})") from None
    return digest.hexdigest(), size
