"""Headless Chromium (Debian's `chromium` package) for the job pages: a screenshot and the DOM after scripts
ran; and a small PNG reader, to tell a drawn chart from a blank page."""
from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import numpy as np

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
         "--no-first-run", "--window-size=900,900", "--virtual-time-budget=5000"]


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "headless Chromium is needed: `apt-get install -y chromium` (.ci/run installs it)"
    return exe


def screenshot(url: str, path: Path) -> Path:
    subprocess.run([chromium(), *FLAGS, f"--screenshot={path}", url], capture_output=True, timeout=120, check=True)
    return path


def dom(url: str) -> str:
    return subprocess.run([chromium(), *FLAGS, "--dump-dom", url], capture_output=True, text=True, timeout=120,
                          check=True).stdout


def render(url: str, path: Path) -> str:
    """The DOM after scripts ran and a screenshot to ``path``, from one Chromium start (each start is seconds);
    a Chromium that takes only one of the two flags per run gets a second run for the screenshot."""
    path.unlink(missing_ok=True)
    page = subprocess.run([chromium(), *FLAGS, "--dump-dom", f"--screenshot={path}", url], capture_output=True,
                          text=True, timeout=120, check=True).stdout
    if not path.is_file():
        screenshot(url, path)
    return page


def pixels(path: Path) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB(A) bytes) of an 8-bit, non-interlaced PNG, as Chromium writes them."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", chunk[:10])
            assert depth == 8 and color in (2, 6)
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], np.zeros(width * bpp, np.uint8)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = np.frombuffer(raw, np.uint8, stride, y * (stride + 1) + 1).copy()
        if f == 1:  # Sub: each byte adds the one bpp to its left, a running sum per channel
            line = (np.cumsum(line.reshape(width, bpp), axis=0, dtype=np.uint64) % 256).astype(np.uint8).ravel()
        elif f == 2:  # Up
            line += prev
        elif f in (3, 4):  # Average and Paeth depend on the byte just decoded: byte by byte
            out, up = bytearray(line.tobytes()), prev.tobytes()
            for i in range(stride):
                a = out[i - bpp] if i >= bpp else 0
                b, c = up[i], up[i - bpp] if i >= bpp else 0
                if f == 3:
                    out[i] = (out[i] + (a + b) // 2) & 255
                else:
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    out[i] = (out[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
            line = np.frombuffer(bytes(out), np.uint8)
        rows.append(line.tobytes())
        prev = line
    return width, bpp, rows


def count_color(path: Path, rgb: tuple[int, int, int], tol: int = 40) -> int:
    width, bpp, rows = pixels(path)
    image = np.frombuffer(b"".join(rows), np.uint8).reshape(len(rows), width, bpp)[..., :3].astype(np.int16)
    return int((np.abs(image - np.array(rgb, np.int16)) <= tol).all(axis=-1).sum())
