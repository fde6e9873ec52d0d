"""The demo page in headless Chromium (Debian's `chromium`), against a pack this test
builds and serves on 127.0.0.1 with mnistconv's own server: what gdmnist.js decoded
(counts, labels, CRC-32 of pixels, labels and indices) equals the file's bytes, and a
corrupt file shows the module's error. `make test` installs chromium (system-test-deps).
"""

import gzip
import html
import json
import os
import re
import shutil
import subprocess
import threading
import zlib

import numpy as np
import pytest

from mnistconv.views.serve import make_server
from mnistconv.formats import gdmnist
from helpers import REPO, SAMPLE, run

BROWSER = os.environ.get("CHROMIUM") or shutil.which("chromium") or \
    shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(not BROWSER, reason="Chromium not installed "
                                                    "(make system-test-deps)")
PAGE_FILES = ["index.html", "demo.js", "gdmnist.js"]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """examples/browser with a freshly built pack in pack/, served on 127.0.0.1."""
    root = tmp_path_factory.mktemp("site")
    for name in PAGE_FILES:
        shutil.copy(REPO / "examples" / "browser" / name, root / name)
    r = run("pack", "browser", SAMPLE, root / "pack", "--train-per-class", "50",
            "--validation-size", "300", "--validation-per-class", "20",
            "--test-per-class", "10", "-q")
    assert r.returncode == 0, r.stderr
    pack_dir = root / "pack"
    bad = root / "bad"
    bad.mkdir()
    good = bytearray((pack_dir / "test.bin").read_bytes())
    (bad / "magic.bin").write_bytes(b"GDMNIST0" + good[8:])
    count_off = bytearray(good)
    count_off[8] += 1  # count 101 while the offsets say 100
    (bad / "count.bin").write_bytes(count_off)
    (bad / "truncated.bin").write_bytes(good[:-7])
    broken_gz = bytearray(gzip.compress(bytes(good)))
    broken_gz[len(broken_gz) // 2] ^= 0xFF
    (bad / "broken.bin.gz").write_bytes(broken_gz)
    (bad / "truncated.bin.gz").write_bytes(gdmnist.gzip_bytes(bytes(good[:-4])))
    server = make_server(root, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield root, f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def open_page(url, profile):
    """Load the page headless, let its fetches and decoding finish (virtual time waits
    for network), and return (status, result JSON, DOM)."""
    command = [BROWSER, "--headless", "--no-sandbox", "--disable-gpu",
               "--disable-dev-shm-usage", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run",
               "--no-default-browser-check", f"--user-data-dir={profile}",
               "--virtual-time-budget=30000", "--dump-dom", url]
    done = subprocess.run(command, capture_output=True, timeout=120)
    dom = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    status = re.search(r'<body data-status="(\w+)"', dom)
    result = re.search(r'<pre id="result">(.*?)</pre>', dom, re.S)
    assert status and result, dom[-2000:]
    return status.group(1), json.loads(html.unescape(result.group(1))), dom


def crc(data) -> int:
    return zlib.crc32(bytes(data))


@pytest.mark.parametrize("split,form", [("train", "gz"), ("validation", "bin"),
                                        ("test", "gz"), ("test-full", "bin")])
def test_page_decodes_exactly_what_the_file_holds(site, tmp_path, split, form):
    root, base = site
    status, result, dom = open_page(f"{base}index.html?split={split}&form={form}",
                                    tmp_path / "profile")
    assert status == "ok", result
    data = (root / "pack" / f"{split}.bin").read_bytes()
    h = gdmnist.parse_header(data, split)
    pixels = data[32:h.label_offset]
    labels = np.frombuffer(data, np.uint8, h.count, h.label_offset)
    indices = data[h.index_offset:]
    manifest = json.loads((root / "pack" / "manifest.json").read_text())
    entry = {**manifest["splits"], **manifest.get("optional_splits", {})}[
        split.replace("-", "_")]
    suffix = ".bin.gz" if form == "gz" else ".bin"
    assert result["file"] == f"{base}pack/{split}{suffix}"
    assert result["compressed"] is (form == "gz")
    assert (result["count"], result["rows"], result["columns"]) == (entry["count"], 28, 28)
    assert result["pixelBytes"] == len(pixels) == entry["count"] * 784
    assert result["pixelCrc32"] == crc(pixels)
    assert result["labelCrc32"] == crc(labels)
    assert result["indexCrc32"] == crc(indices)
    assert result["classCounts"] == entry["class_counts"]
    assert result["firstLabels"] == labels[:20].tolist()
    assert result["firstIndices"] == np.frombuffer(indices, "<u4")[:20].tolist()
    assert result["drawn"] == min(100, entry["count"])
    # the preview (20 digits) was drawn before the split
    preview = dom.split('id="preview"')[1].split("</div>")[0]
    assert preview.count("<canvas") == 20


@pytest.mark.parametrize("name,message", [
    ("magic.bin", 'not a GDMNIST1 file: magic "GDMNIST0"'),
    ("count.bin", "label offset 78432 disagrees with count 101 of 28 x 28 images "
                  "(expected 79216)"),
    ("truncated.bin", "truncated: the header declares 100 images (78932 bytes), the file "
                      "holds 78925"),
    ("truncated.bin.gz", "truncated: the header declares 100 images (78932 bytes), the "
                         "file holds 78928"),
    ("broken.bin.gz", "not a valid gzip stream ("),
    ("missing.bin", "HTTP 404"),
])
def test_page_shows_the_error_for_a_bad_file(site, tmp_path, name, message):
    _, base = site
    url = f"{base}bad/{name}"
    status, result, dom = open_page(f"{base}index.html?file=bad/{name}",
                                    tmp_path / "profile")
    assert status == "error"
    assert result["name"] == "GdmnistError"
    assert result["error"].startswith(f"{url}: {message}"), result["error"]
    shown = re.search(r'<p id="error">(.*?)</p>', dom, re.S).group(1)
    assert html.unescape(shown) == result["error"]
    grid = dom.split('id="grid"')[1].split("</div>")[0]
    assert "<canvas" not in grid
