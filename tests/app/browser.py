"""Headless Chromium (Debian's `chromium` package) for the job pages: a screenshot and the DOM after scripts
ran; and a small PNG reader, to tell a drawn chart from a blank page."""
from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from pathlib import Path

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
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, bpp, rows


def count_color(path: Path, rgb: tuple[int, int, int], tol: int = 40) -> int:
    width, bpp, rows = pixels(path)
    n = 0
    for row in rows:
        for x in range(0, width * bpp, bpp):
            if all(abs(row[x + k] - rgb[k]) <= tol for k in range(3)):
                n += 1
    return n
