"""What an image costs, read from its header before anything decodes it, and a copy of it that
fits a provider's limits.

An image's pixel count comes from its header (PNG IHDR, JPEG SOF, GIF logical screen, WebP
VP8/VP8L/VP8X), read here in pure Python, so the bounds hold without Pillow: a 164 KB PNG can
claim 13,000 x 13,000 pixels and take 1.5 GB to decode. Above ``MAX_PIXELS`` an image is
refused outright, never decoded. Below it, ``fit`` makes a smaller JPEG with Pillow (optional,
the ``images`` extra) when a provider's byte or side limit asks for one, decoding JPEGs at a
reduced scale; the result is kept in memory by the image's sha256, so an image in the window
costs one decode per process, not one per request. Nothing here knows sessions or providers.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import io
import math
import struct
import threading
from collections import OrderedDict
from typing import Any

# Refused outright above this, with or without Pillow: 50 MP of RGBA is 200 MB decoded, and no
# provider takes such an image (Anthropic refuses sides over 8,000 px, and scales anything over
# ~1.15 MP down on its side anyway).
MAX_PIXELS = 50_000_000
# What a downscaled copy aims at: Anthropic's recommended size (1,092 x 1,092 and the like);
# sending more only costs upload time, as the API scales it down to this itself.
TARGET_PIXELS = 1_150_000
# Only the formats the store accepts are handed to Pillow: a file of another format whose hash
# matches a hand-edited log never reaches a decoder that would read its (unchecked) size.
PILLOW_FORMATS = ("PNG", "JPEG", "GIF", "WEBP")
# The downscaled copies kept per process: a few requests' worth of images.
CACHE_BYTES = 64 << 20
CACHE_ENTRIES = 256


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


def too_many_pixels(width: int, height: int) -> str | None:
    """Why an image of this size is refused outright (the text of its note), or None."""
    if width * height <= MAX_PIXELS:
        return None
    return (
        f"{width:,}x{height:,} pixels ({width * height / 1e6:,.0f} megapixels), over the "
        f"{MAX_PIXELS / 1e6:,.0f} megapixels an image may have (refused without decoding it)"
    )


def refusal(data: bytes) -> str | None:
    """Why ``data`` is refused from its header alone, or None (also for an unknown format)."""
    found = sniff(data)
    return too_many_pixels(found[1], found[2]) if found is not None else None


_cache: OrderedDict[tuple[str, int, int], tuple[bytes, str] | None] = OrderedDict()
_cache_bytes = 0
_cache_lock = threading.Lock()


def fit(data: bytes, limit: int, max_side: int = 0) -> tuple[bytes, str] | None:
    """A JPEG of ``data`` within ``limit`` bytes and ``max_side`` pixels a side; None if none can
    be made (no Pillow, too many pixels, a file Pillow cannot read). Computed once per image."""
    if importlib.util.find_spec("PIL") is None:
        return None  # nothing cached: Pillow may be installed later in the same kernel
    if refusal(data) is not None:
        return None
    key = (hashlib.sha256(data).hexdigest(), limit, max_side)
    with _cache_lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    made = _downscale(data, limit, max_side)
    _remember(key, made)
    return made


def _remember(key: tuple[str, int, int], made: tuple[bytes, str] | None) -> None:
    global _cache_bytes
    with _cache_lock:
        if key in _cache:
            return
        _cache[key] = made
        _cache_bytes += len(made[0]) if made else 0
        while _cache and (_cache_bytes > CACHE_BYTES or len(_cache) > CACHE_ENTRIES):
            _, old = _cache.popitem(last=False)
            _cache_bytes -= len(old[0]) if old else 0


def clear_cache() -> None:
    global _cache_bytes
    with _cache_lock:
        _cache.clear()
        _cache_bytes = 0


def _extent(tile: Any) -> tuple[int, int]:
    try:
        x0, y0, x1, y1 = tile[1]
        return int(x1) - int(x0), int(y1) - int(y0)
    except (TypeError, ValueError, IndexError):
        return 0, 0


def _downscale(data: bytes, limit: int, max_side: int) -> tuple[bytes, str] | None:
    # Pillow is optional (the ``images`` extra in pyproject.toml, never a runtime dependency):
    # loaded by name, only here, and only when an image is too big to send as is.
    pil: Any = importlib.import_module("PIL.Image")
    try:
        with pil.open(io.BytesIO(data), formats=PILLOW_FORMATS) as img:
            width, height = img.size
            # Pillow's own reading of the header decides, and so do the first frame's extents
            # (a GIF frame may outgrow the logical screen the header reader saw).
            boxes = [(width, height), *(_extent(t) for t in img.tile)]
            if width <= 0 or height <= 0 or any(too_many_pixels(w, h) for w, h in boxes):
                return None
            longest = max(width, height)
            scale = min(1.0, (max_side or longest) / longest, math.sqrt(TARGET_PIXELS / (width * height)))
            side = max(1, int(longest * scale))
            if img.mode not in ("RGB", "RGBA", "L", "LA"):
                img = img.convert("RGBA" if img.mode in ("P", "PA") or "transparency" in img.info else "RGB")
            for _ in range(8):
                # thumbnail() asks the decoder for a draft first: a JPEG is decoded at 1/2 to
                # 1/8 of its size, never whole; then reduce() before the resampling.
                img.thumbnail((side, side), reducing_gap=2.0)
                buf = io.BytesIO()
                img.convert("RGB").save(buf, "JPEG", quality=85)
                if buf.tell() <= limit:
                    return buf.getvalue(), "image/jpeg"
                side = int(side * 0.7)
    except Exception:  # noqa: BLE001 - an image Pillow cannot read is refused like a huge one
        return None
    return None
