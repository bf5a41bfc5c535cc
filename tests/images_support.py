"""Test images made with zlib and struct (no Pillow): valid files of any size."""

from __future__ import annotations

import os
import struct
import zlib


def _chunk(kind: bytes, body: bytes) -> bytes:
    return (
        struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)
    )


def png(width: int = 4, height: int = 3, *, seed: int = 0, noise: bool = False) -> bytes:
    """An RGB PNG; ``noise`` makes it incompressible (a big file), ``seed`` makes it distinct."""
    rows = []
    for y in range(height):
        pixels = os.urandom(width * 3) if noise else bytes((x + y * 3 + seed) % 256 for x in range(width * 3))
        rows.append(b"\x00" + pixels)
    raw = b"".join(rows)
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", ihdr)
        + _chunk(b"IDAT", zlib.compress(raw, 1))
        + _chunk(b"IEND", b"")
    )


def gif(width: int = 5, height: int = 7) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\x00\x00\x00" + b"\x3b"


def jpeg(width: int = 9, height: int = 6) -> bytes:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app0 + sof + b"\xff\xda\x00\x02" + b"\xff\xd9"


def webp_vp8x(width: int = 300, height: int = 200) -> bytes:
    body = (
        b"VP8X"
        + struct.pack("<I", 10)
        + b"\x00\x00\x00\x00"
        + (width - 1).to_bytes(3, "little")
        + (height - 1).to_bytes(3, "little")
    )
    return b"RIFF" + struct.pack("<I", 4 + len(body)) + b"WEBP" + body
