"""The session's image store: content-addressed files under ``images/`` (SPEC §18).

An image is stored once per session as ``images/<sha256>.<ext>``, written atomically and
never through a link (``safeio``); a message refers to it by an ``ImagePart`` (path
relative to the session directory, media type, size, sha256, width, height), so the log
never holds image bytes. Width and height come from the file's header (PNG, JPEG, GIF,
WebP), read without Pillow (``image_fit``); an image over ``image_fit.MAX_PIXELS`` is
refused from its header, never decoded. Reading an image back checks its size and hash: a
missing or altered file is an ``ImageError``, and whoever reads it sends the part's text note instead.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from .. import safeio
from ..image_fit import sniff, too_many_pixels
from ..messages import ImagePart

IMAGE_DIR = "images"
EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp"}
MEDIA_TYPES = tuple(EXTENSIONS)
# Nothing larger is kept: a display this big is a bug in the code that made it.
MAX_IMAGE_BYTES = 50 << 20


class ImageError(Exception):
    """An image part whose file cannot be used; the message says why, for the text note."""


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
    # Refused from the header, before anything decodes it: a decompression bomb never enters
    # the session, so no request can pay for it.
    why = too_many_pixels(width, height)
    if why is not None:
        raise ImageError(why)
    digest = hashlib.sha256(data).hexdigest()
    rel = f"{IMAGE_DIR}/{digest}.{EXTENSIONS[kind]}"
    path = Path(session_dir) / rel
    if not _intact(path, digest, len(data)):
        safeio.write_atomic(path, data, create_dirs=True)
    return ImagePart(path=rel, media_type=kind, bytes=len(data), sha256=digest, width=width, height=height)


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
