"""The dataset card: `mnistconv card DATA -o card.html` and `convert --card`, one
self-contained HTML page, rendered by headless Chromium (Debian's `chromium`, as
test_browser.py runs it) and checked in the DOM it builds: counts, class names, the
number of sample and mean images, the conversion's figures."""

import hashlib
import os
import re
import shutil
import subprocess

import numpy as np
import pytest

from helpers import make_idx_dir, run, small_digits, stderr_of

BROWSER = os.environ.get("CHROMIUM") or shutil.which("chromium") or \
    shutil.which("chromium-browser")
NAMES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight",
         "nine <&>"]


def named_idx(folder):
    """IDX train (57 examples) and test (20) with classes.txt naming the classes; class
    9 has 3 training examples (fewer than the 8 samples a card shows)."""
    images, labels = small_digits(60, seed=2)
    keep = np.ones(60, bool)
    keep[np.flatnonzero(labels == 9)[3:]] = False
    make_idx_dir(folder, images[keep], labels[keep], "train")
    make_idx_dir(folder, *small_digits(20, seed=3), "test")
    (folder / "classes.txt").write_text("\n".join(NAMES) + "\n")
    return images[keep], labels[keep]


def dom(page):
    """The DOM Chromium builds from the page (no network: the page needs none)."""
    if BROWSER is None:
        pytest.skip("chromium is not installed (make test installs it)")
    r = subprocess.run([BROWSER, "--headless", "--no-sandbox", "--disable-gpu",
                        "--disable-background-networking", "--disable-extensions",
                        "--no-first-run", "--dump-dom", page.resolve().as_uri()],
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    return r.stdout.decode()


def split_section(text, name):
    m = re.search(rf'<section class="split" data-split="{name}".*?</section>', text, re.S)
    assert m, name
    return m.group(0)


def test_card_of_an_idx_dataset_in_chromium(tmp_path):
    images, labels = named_idx(tmp_path / "data")
    out = tmp_path / "card.html"
    r = run("card", tmp_path / "data", "-o", out)
    assert r.returncode == 0, stderr_of(r)
    html = out.read_text()
    # Self-contained: nothing fetched from anywhere.
    assert not re.search(r"<(script|link|iframe)|\b(src|href)=\"(?!data:)", html)
    page = dom(out)
    train = split_section(page, "train")
    assert len(labels) == 57 and 'data-count="57"' in train
    counts = np.bincount(labels, minlength=10)
    rows = re.findall(r'<tr class="class" data-label="(\d+)">(.*?)</tr>', train, re.S)
    assert [int(label) for label, _ in rows] == list(range(10))
    for label, row in rows:
        label = int(label)
        assert f'<td class="name">{NAMES[label].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")}</td>' in row
        assert f'<td class="n">{counts[label]:,}</td>' in row
        assert row.count('class="sample"') == min(8, counts[label])
        assert row.count('class="mean"') == 1
    assert train.count('class="sample"') == sum(min(8, int(c)) for c in counts)
    mean = float(re.search(r'data-pixel="mean">([\d.]+)<', train).group(1))
    assert mean == pytest.approx(images.mean(), abs=1e-3)
    assert 'data-count="20"' in split_section(page, "test")
    # The files read, with their SHA-256.
    for name in ("train-images-idx3-ubyte", "classes.txt"):
        digest = hashlib.sha256((tmp_path / "data" / name).read_bytes()).hexdigest()
        assert digest in page


def test_convert_card_says_what_was_converted(tmp_path):
    named_idx(tmp_path / "data")
    dst = tmp_path / "m.tfrecord"
    r = run("convert", tmp_path / "data", dst, "--card", "--jpeg-quality", "90",
            "--split", "train", "--json")
    assert r.returncode == 0, stderr_of(r)
    import json
    summary = json.loads(r.stdout)
    card = tmp_path / "m.tfrecord.card.html"
    assert summary["card"] == str(card)
    page = dom(card)
    conversion = re.search(r'<section id="conversion">.*?</section>', page, re.S).group(0)
    assert f"<code>{tmp_path / 'data'}</code> (idx)" in conversion
    assert f"<code>{dst}</code> (tfrecord)" in conversion
    assert "<code>jpeg_quality=90</code>" in conversion and \
        "<code>splits=train</code>" in conversion
    error = re.search(r'data-stat="jpeg_mean_abs_error">([\d.]+)<', conversion).group(1)
    assert float(error) == summary["stats"]["jpeg_mean_abs_error"]
    assert 'data-count="57"' in split_section(page, "train")
    assert 'data-split="test"' not in page
    assert hashlib.sha256(dst.read_bytes()).hexdigest() in page


def test_card_is_refused_before_anything_is_written(tmp_path):
    named_idx(tmp_path / "data")
    (tmp_path / "m.npz.card.html").write_text("mine")
    r = run("convert", tmp_path / "data", tmp_path / "m.npz", "--card")
    assert r.returncode == 2
    assert stderr_of(r).strip().startswith(f"Error: {tmp_path / 'm.npz.card.html'}: ")
    assert not (tmp_path / "m.npz").exists()
    r = run("convert", tmp_path / "data", "-", "--to", "npz", "--card")
    assert r.returncode == 2 and "--card writes beside a local output" in stderr_of(r)
    (tmp_path / "card.html").write_text("mine")
    r = run("card", tmp_path / "data", "-o", tmp_path / "card.html")
    assert r.returncode == 2 and (tmp_path / "card.html").read_text() == "mine"


def test_card_help_loads_no_image_codec(tmp_path):
    """`card --help` stays light: Pillow is imported only when a card is drawn."""
    from test_startup import heavy_in, modules_at_exit
    names, result = modules_at_exit(tmp_path, "-m", "card", "--help")
    assert b"Write a dataset card for PATH" in result.stdout
    assert heavy_in(names) == []


def _card_in_a_process(*args, timeout=60):
    """`mnistconv card ARGS` in its own process, killed if it hangs (a FIFO read)."""
    import sys

    from helpers import REPO
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "mnistconv", "card", *map(str, args)],
                          capture_output=True, env=env, timeout=timeout)


def _imagefolder(tmp_path):
    named_idx(tmp_path / "data")
    tree = tmp_path / "folder"
    r = run("convert", tmp_path / "data", tree, "--to", "imagefolder")
    assert r.returncode == 0, stderr_of(r)
    return tree


def test_card_lists_no_hidden_link_out_and_never_opens_a_fifo(tmp_path):
    """Issue 35: the card walked the tree with its own os.walk, publishing the size and
    SHA-256 of a hidden link to /etc/passwd, and hung on a hidden FIFO. It now lists
    what the reader reads, through the guard."""
    tree = _imagefolder(tmp_path)
    some_class = sorted(p for p in (tree / "train").iterdir() if p.is_dir())[0]
    os.symlink("/etc/passwd", some_class / ".secret.png")
    os.symlink("/etc/passwd", tree / ".passwd")
    os.mkfifo(tree / "train" / ".pipe")
    out = tmp_path / "card.html"
    r = _card_in_a_process(tree, "-o", out)
    assert r.returncode == 0, r.stderr.decode()
    html = out.read_text()
    secret = hashlib.sha256(open("/etc/passwd", "rb").read()).hexdigest()
    assert secret not in html and ".secret.png" not in html and ".pipe" not in html
    listed = sorted(p for p in tree.rglob("*") if p.is_file() and not p.is_symlink()
                    and not any(part.startswith(".") for part in p.relative_to(tree).parts))
    shown = [p for p in listed if hashlib.sha256(p.read_bytes()).hexdigest() in html]
    assert shown and len(shown) == min(len(listed), 100)


def test_card_refuses_a_visible_link_out_and_a_visible_fifo_in_one_line(tmp_path):
    tree = _imagefolder(tmp_path)
    os.symlink("/etc/passwd", tree / "notes.txt")
    r = _card_in_a_process(tree, "-o", tmp_path / "card.html")
    assert r.returncode == 2, r.stderr.decode()
    assert r.stderr.decode().startswith(f"Error: {tree / 'notes.txt'}: leads outside ")
    assert len(r.stderr.decode().strip().splitlines()) == 1
    assert not (tmp_path / "card.html").exists()
    os.unlink(tree / "notes.txt")
    os.mkfifo(tree / "notes.txt")
    r = _card_in_a_process(tree, "-o", tmp_path / "card.html")
    assert r.returncode == 2, r.stderr.decode()
    assert r.stderr.decode().strip() == (
        f"Error: {tree / 'notes.txt'}: is not a regular file (device, FIFO or socket); "
        "name a regular file or a directory")


def _pixels(page, split):
    """{stat: value} of a split's pixel-value row in the card's text."""
    section = split_section(page, split)
    return {k: float(v) for k, v in
            re.findall(r'data-pixel="(\w+)">([-\d.]+)<', section)}


@pytest.mark.parametrize("to, args", [
    ("imagefolder", ["--image-format", "jpeg", "--jpeg-quality", "50"]),
    ("tfrecord", []),  # the recipe preset: JPEG at quality 95
])
def test_card_of_a_jpeg_conversion_counts_the_outputs_pixels(tmp_path, to, args):
    import mnistconv
    from mnistconv.describe import card
    named_idx(tmp_path / "data")
    dst = tmp_path / ("out" if to == "imagefolder" else "out.tfrecord")
    r = run("convert", tmp_path / "data", dst, "--to", to, "--card", "--split", "train",
            "-q", *args)
    assert r.returncode == 0, stderr_of(r)
    page = (tmp_path / (dst.name + ".card.html")).read_text()
    written = mnistconv.read(dst, to, split_name="train")
    output = card.collect(written)["train"].pixel_stats()
    given = card.collect(mnistconv.read(tmp_path / "data"))["train"].pixel_stats()
    assert _pixels(page, "train") == pytest.approx(output, abs=1e-4)
    assert output["mean"] != given["mean"]  # JPEG changed them: the card says so
    means = card.collect(written)["train"].means()
    ours = {int(k): v for k, v in re.findall(
        r'data-label="(\d+)".*?<img class="mean" src="(data:[^"]+)"',
        split_section(page, "train"))}
    from mnistconv.describe import card_html
    assert [ours[k] for k in sorted(means)] == card_html._png_uris(
        [means[k] for k in sorted(means)])


def test_card_options_row_shows_no_empty_choice(tmp_path):
    named_idx(tmp_path / "data")
    r = run("convert", tmp_path / "data", tmp_path / "m.npz", "--card", "-q")
    assert r.returncode == 0, stderr_of(r)
    page = (tmp_path / "m.npz.card.html").read_text()
    conversion = re.search(r'<section id="conversion">.*?</section>', page, re.S).group(0)
    assert "splits=" not in conversion
    assert "<tr><th>Options</th><td>defaults</td></tr>" in conversion


def test_jpeg_quality_of_each_lossy_write():
    from mnistconv.describe.card import jpeg_quality
    assert jpeg_quality("tfrecord", {}) == 95
    assert jpeg_quality("tfrecord", {"preset": "tfds"}) is None
    assert jpeg_quality("tfrecord", {"image_format": "png"}) is None
    assert jpeg_quality("webdataset", {"image_format": "jpeg", "jpeg_quality": 70}) == 70
    assert jpeg_quality("imagefolder", {}) is None and jpeg_quality("npz", {}) is None
