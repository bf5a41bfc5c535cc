"""The session's image store: content-addressed files under ``images/`` (SPEC §18).

An image is stored once per session as ``images/<sha256>.<ext>``, written atomically and
never through a link (``safeio``); a message refers to it by an ``ImagePart`` (path
relative to the session directory, media type, size, sha256, width, height), so the log
never holds image bytes. Width and height come from the file's header (PNG, JPEG, GIF,
WebP), read here without Pillow. Reading an image back checks its size and hash: a missing
or altered file is an ``ImageError``, and whoever reads it sends the part's text note instead.
"""

from __future__ import annotations

import hashlib
import os
import struct
from pathlib import Path

from ..messages import ImagePart
from . import safeio

IMAGE_DIR = "images"
EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp"}
MEDIA_TYPES = tuple(EXTENSIONS)
# Nothing larger is kept: a display this big is a bug in the code that made it.
MAX_IMAGE_BYTES = 50 << 20


class ImageError(Exception):
    """An image part whose file cannot be used; the message says why, for the text note."""


def sniff(data: bytes) -> tuple[str, int, int] | None:
    """(media type, width, height) from the header of a PNG, JPEG, GIF or WebP; else None."""
    try:
        if data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR":
            w, h = struct.unpack(">II", data[16:24])
            return "image/png", w, h
        if data[:6] in (b"GIF87a", b"GIF89a"):
            w, h = struct.unpack("<HH", data[6:10])
            return "image/gif", w, h
        if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
            return _webp(data)
        if data[:2] == b"\xff\xd8":
            return _jpeg(data)
    except (struct.error, IndexError):
        return None
    return None


def _webp(data: bytes) -> tuple[str, int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8 " and data[23:26] == b"\x9d\x01\x2a":
        w, h = struct.unpack("<HH", data[26:30])
        return "image/webp", w & 0x3FFF, h & 0x3FFF
    if chunk == b"VP8L" and data[20:21] == b"\x2f":
        bits = int.from_bytes(data[21:25], "little")
        return "image/webp", (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X":
        w = int.from_bytes(data[24:27], "little") + 1
        h = int.from_bytes(data[27:30], "little") + 1
        return "image/webp", w, h
    return None


_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


def _jpeg(data: bytes) -> tuple[str, int, int] | None:
    i = 2
    while i + 4 <= len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            i += 2
            continue
        (length,) = struct.unpack(">H", data[i + 2 : i + 4])
        if marker in _SOF:
            h, w = struct.unpack(">HH", data[i + 5 : i + 9])
            return "image/jpeg", w, h
        if marker == 0xDA:  # start of scan: no frame header before it
            return None
        i += 2 + length
    return None


def image_dir(session_dir: Path) -> Path:
    return Path(session_dir) / IMAGE_DIR


def store(session_dir: Path, data: bytes, media_type: str | None = None) -> ImagePart:
    """Store ``data`` once (content-addressed) and return its part. Raises ``ImageError``/``OSError``.

    The media type and dimensions come from the header; ``media_type`` is only a hint (a
    display's claimed type loses to what the bytes are).
    """
    found = sniff(data)
    if found is None:
        raise ImageError(f"not a PNG, JPEG, GIF or WebP image ({media_type or 'unknown type'})")
    if len(data) > MAX_IMAGE_BYTES:
        raise ImageError(f"{len(data):,} bytes, over the {MAX_IMAGE_BYTES:,} bytes an image may have")
    kind, width, height = found
    digest = hashlib.sha256(data).hexdigest()
    rel = f"{IMAGE_DIR}/{digest}.{EXTENSIONS[kind]}"
    path = Path(session_dir) / rel
    if not _intact(path, digest, len(data)):
        safeio.write_atomic(path, data, create_dirs=True)
    return ImagePart(
        path=rel, media_type=kind, bytes=len(data), sha256=digest, width=width, height=height
    )


def _intact(path: Path, digest: str, size: int) -> bool:
    try:
        data = safeio.read_bytes(path, limit=size)
    except OSError:
        return False
    return hashlib.sha256(data).hexdigest() == digest


def read(session_dir: Path, part: ImagePart) -> bytes:
    """The part's bytes from the session's own copy, checked; ``ImageError`` saying why not."""
    rel = Path(part.path)
    if rel.is_absolute() or ".." in rel.parts or rel.parts[:1] != (IMAGE_DIR,):
        raise ImageError("its path is not inside the session's images folder")
    path = Path(session_dir) / rel
    try:
        data = safeio.read_bytes(path, limit=max(part.bytes, 0))
    except FileNotFoundError:
        raise ImageError("its file is missing from the session") from None
    except OSError as exc:  # UnsafePathError (a link, too large) is an OSError too
        raise ImageError(f"its file cannot be read ({exc})") from None
    if len(data) != part.bytes or hashlib.sha256(data).hexdigest() != part.sha256:
        raise ImageError("its file was altered (sha256 mismatch)")
    return data


def problem(session_dir: Path, part: ImagePart) -> str | None:
    try:
        read(session_dir, part)
    except ImageError as exc:
        return str(exc)
    return None


def stored_files(session_dir: Path) -> list[Path]:
    """The image files of a session, oldest first (for the spill browser and handoffs)."""
    folder = image_dir(session_dir)
    try:
        names = [n for n in os.listdir(folder) if not safeio.is_temp_name(n)]
    except OSError:
        return []
    files = [folder / n for n in names if (folder / n).is_file() and not (folder / n).is_symlink()]
    return sorted(files, key=lambda p: p.stat().st_mtime)
