"""show, preview and info's histogram and orientation hint: what a person sees.

Golden snapshots live in tests/golden/; after an intended change to the drawing,
regenerate them with MNISTCONV_UPDATE_GOLDEN=1 and review the diff."""

import gzip
import io
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from mnistconv.views import view
from helpers import SAMPLE, make_idx_dir, run, small_digits

GOLDEN = Path(__file__).parent / "golden"
# Empty values count as unset for rich (an empty FORCE_COLOR means "detect"), so these
# pin the environment whatever the test runner's own terminal settings are.
PLAIN = {"COLUMNS": "80", "NO_COLOR": "", "FORCE_COLOR": "", "TTY_COMPATIBLE": "",
         "TERM": "xterm", "COLORTERM": ""}
# A hand-drawn 8 x 6 seven: known pixels, small enough to read in the snapshot.
SEVEN = np.array([
    [0, 0, 0, 0, 0, 0],
    [0, 255, 255, 255, 255, 0],
    [0, 0, 0, 0, 200, 0],
    [0, 0, 0, 128, 64, 0],
    [0, 0, 0, 255, 0, 0],
    [0, 0, 90, 180, 0, 0],
    [0, 0, 255, 0, 0, 0],
    [0, 0, 0, 0, 0, 0],
], np.uint8)


def golden(name, actual: str):
    path = GOLDEN / name
    if os.environ.get("MNISTCONV_UPDATE_GOLDEN"):
        path.write_text(actual, encoding="utf-8")
    assert actual == path.read_text(encoding="utf-8")


def sample_arrays(split="train"):
    """The bundled sample decoded independently of mnistconv."""
    stem = "t10k" if split == "test" else split
    images = np.frombuffer(gzip.decompress(
        (SAMPLE / f"{stem}-images-idx3-ubyte.gz").read_bytes()), np.uint8, offset=16)
    labels = np.frombuffer(gzip.decompress(
        (SAMPLE / f"{stem}-labels-idx1-ubyte.gz").read_bytes()), np.uint8, offset=8)
    return images.reshape(-1, 28, 28), labels


def run_clean(*args, **extra):
    """The CLI with stdout a pipe and the terminal-related environment pinned."""
    return run(*args, env={**PLAIN, **extra})


# --- terminal text -----------------------------------------------------------------

def test_ascii_snapshot_of_a_known_digit():
    text = view.render_ascii(SEVEN[None], ["7 #0"], width=80)
    golden("seven.txt", text)
    # Each character is the ramp level of the mean of two rows, e.g. (0 + 255) / 2
    # -> level 4 '=', (128 + 0) / 2 -> ':', (0 + 180)... -> '%'.
    assert text.splitlines() == [" ====", "   :+", "  .%", "  =", "7 #0"]


def test_half_block_snapshot_of_a_known_digit():
    from rich.console import Console
    console = Console(file=io.StringIO(), force_terminal=True, color_system="truecolor",
                      width=80, legacy_windows=False)
    console.print(view.render_blocks(SEVEN[None], ["7 #0"], width=80), end="")
    golden("seven.ansi", console.file.getvalue())


def decode_blocks(text, height, width):
    """Read the pixels back out of a half-block rich Text: foreground is the upper
    pixel, background the lower."""
    image = np.zeros((height + height % 2, width), np.uint8)
    plain = text.plain.split("\n")
    offsets = np.cumsum([0] + [len(line) + 1 for line in plain])
    for span in text.spans:
        row = np.searchsorted(offsets, span.start, side="right") - 1
        col = span.start - offsets[row]
        top = span.style.color.triplet
        bottom = span.style.bgcolor.triplet
        assert top.red == top.green == top.blue and bottom.red == bottom.green == bottom.blue
        image[2 * row, col:col + span.end - span.start] = top.red
        image[2 * row + 1, col:col + span.end - span.start] = bottom.red
    return image


@pytest.mark.parametrize("height", [28, 7])
def test_half_blocks_carry_every_pixel(height):
    rng = np.random.default_rng(3)
    image = rng.integers(0, 256, (height, 28), dtype=np.uint8)
    image[:, :5] = 0  # runs of equal cells are merged into one span
    text = view.render_blocks(image[None], ["1 #9"], width=80)
    assert text.plain.count(view.UPPER_HALF) == 28 * -(-height // 2)
    decoded = decode_blocks(text, height, 28)
    np.testing.assert_array_equal(decoded[:height], image)
    if height % 2:
        assert not decoded[height:].any()  # the odd last row is padded with black
    assert text.plain.splitlines()[-1] == "1 #9"


def test_ascii_wraps_to_the_width():
    images, labels = small_digits(7)
    captions = [view.caption(int(l), i) for i, l in enumerate(labels)]
    for width, per_line in ((80, 2), (200, 6), (20, 1)):
        text = view.render_ascii(images, captions, width=width)
        lines = text.splitlines()
        assert max(map(len, lines)) <= max(width, 28)
        caption_lines = [ln for ln in lines if re.match(r"^\d #\d", ln)]
        assert len(caption_lines) == -(-7 // per_line)
        assert caption_lines[0].split() == " ".join(captions[:per_line]).split()
    # --grid asks for fewer columns than fit
    text = view.render_ascii(images, captions, width=200, columns=3)
    assert len([ln for ln in text.splitlines() if re.match(r"^\d #\d", ln)]) == 3


def test_to_gray_uint8_layouts_and_floats():
    img = np.arange(12, dtype=np.uint8).reshape(1, 3, 4) * 20
    for variant in (img, img[..., None], img[:, None]):
        np.testing.assert_array_equal(view.to_gray_uint8(variant), img)
    np.testing.assert_array_equal(view.to_gray_uint8(img.astype(np.float32) / 255), img)
    rgb = np.stack([img] * 3, axis=-1)
    np.testing.assert_array_equal(view.to_gray_uint8(rgb), img)
    flat = np.arange(2 * 784).reshape(2, 784) % 256
    np.testing.assert_array_equal(view.to_gray_uint8(flat.astype(np.uint8)),
                                  flat.reshape(2, 28, 28))
    for shape in ((2, 783), (2, 5, 5, 5)):
        with pytest.raises(ValueError):
            view.to_gray_uint8(np.zeros(shape))


# --- the show command --------------------------------------------------------------

def test_show_sample_matches_snapshot_when_not_a_terminal():
    result = run_clean("show", SAMPLE, "--index", "0:3")
    assert result.returncode == 0, result.stderr
    out = result.stdout.decode()
    assert out.isascii()
    golden("show-sample-0-3.txt", out)
    assert "showing split train; also in" in result.stderr.decode()
    images, labels = sample_arrays()
    expected = view.render_ascii(images[:3], [f"{labels[i]} #{i}" for i in range(3)], 80)
    assert out == expected


def test_show_colour_and_no_color():
    coloured = run_clean("show", SAMPLE, "--index", "0", FORCE_COLOR="1",
                         COLORTERM="truecolor")
    assert coloured.returncode == 0
    assert view.UPPER_HALF in coloured.stdout.decode() and b"\x1b[" in coloured.stdout
    images, labels = sample_arrays()
    ascii_text = view.render_ascii(images[:1], [f"{labels[0]} #0"], 80)
    for extra in ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, {"FORCE_COLOR": "1",
                                                          "TERM": "dumb"}):
        plain = run_clean("show", SAMPLE, "--index", "0", **extra)
        assert plain.stdout.decode() == ascii_text, extra
    forced = run_clean("show", SAMPLE, "--index", "0", "--ascii", FORCE_COLOR="1")
    assert forced.stdout.decode() == ascii_text


def test_show_respects_terminal_width():
    result = run_clean("show", SAMPLE, "--split", "test", "--index", "0:6", COLUMNS="100")
    lines = result.stdout.decode().splitlines()
    assert max(map(len, lines)) <= 100
    captions = [ln for ln in lines if re.match(r"^\d #\d", ln)]
    assert len(captions) == 2  # 3 tiles of 28 + 2 gaps fit in 100, a 4th does not
    narrow = run_clean("show", SAMPLE, "--split", "test", "--index", "0:2", COLUMNS="30")
    assert len([ln for ln in narrow.stdout.decode().splitlines()
                if re.match(r"^\d #\d", ln)]) == 2


def test_show_per_class_grid_and_index_forms():
    images, labels = sample_arrays("test")
    result = run_clean("show", SAMPLE, "--split", "test", "--per-class", "1",
                       COLUMNS="1000")
    caption_line = [ln for ln in result.stdout.decode().splitlines()
                    if re.match(r"^\d #\d", ln)]
    firsts = [int(np.flatnonzero(labels == c)[0]) for c in range(10)]
    assert caption_line == ["  ".join(f"{c} #{i}".ljust(28) for c, i in
                                      enumerate(firsts)).rstrip()]
    grid = run_clean("show", SAMPLE, "--split", "test", "--grid", "2x2", COLUMNS="1000")
    assert re.findall(r"\d #(\d+)", grid.stdout.decode()) == ["0", "1", "2", "3"]
    picked = run_clean("show", SAMPLE, "--split", "test", "--index", "5,-1,10:12")
    assert re.findall(r"\d #(\d+)", picked.stdout.decode()) == ["5", "199", "10", "11"]


@pytest.mark.parametrize("args, message", [
    (["--index", "200"], "Error: {s}: --index 200 is outside the split (200 images); pass an "
                         "index inside it (negative ones count from the end)\n"),
    (["--index", "a:b"], "Error: --index 'a:b' is not a list of positions or ranges; "
                         "write e.g. 0:20 or 3,7,10:12\n"),
    (["--grid", "3by2"], "Error: --grid '3by2' is not COLSxROWS; write e.g. 10x2\n"),
    (["--index", "0", "--per-class", "1"],
     "Error: --index and --per-class choose images in different ways; give one of them\n"),
    (["--split", "valid"], "Error: {s}: no split named valid; splits present: train, test\n"),
])
def test_show_usage_errors(args, message):
    split = [] if "--split" in args else ["--split", "test"]
    result = run_clean("show", SAMPLE, *split, *args)
    assert (result.returncode, result.stderr.decode()) == (2, message.format(s=SAMPLE))
    assert result.stdout == b""


def test_show_transpose_draws_the_transposed_image():
    images, labels = sample_arrays()
    result = run_clean("show", SAMPLE, "--index", "0", "--transpose")
    assert result.stdout.decode() == view.render_ascii(images[:1].transpose(0, 2, 1),
                                                       [f"{labels[0]} #0"], 80)


# --- preview -----------------------------------------------------------------------

def test_preview_png_size_and_cell_pixels(tmp_path):
    from PIL import Image
    out = tmp_path / "sheet.png"
    result = run("preview", SAMPLE, "-o", out, "--per-class", "10", "--scale", "2",
                 "--json")
    assert result.returncode == 0, result.stderr
    facts = json.loads(result.stdout)
    sheet = np.asarray(Image.open(out))
    assert Image.open(out).mode == "L"
    # Layout at scale 2: pad 4; class label '0'..'9' at font scale 4 is 12 px wide, so
    # images start at x = 4 + 12 + 4 = 20; cells are 56 px plus a 4 px gap; a row is
    # 56 image + 4 + 5 caption px, plus a 4 px gap.
    assert sheet.shape == (4 + 10 * 69, 20 + 10 * 60) == (facts["height"], facts["width"])
    images, labels = sample_arrays()
    for row, col in ((0, 0), (3, 2), (9, 9)):
        position = np.flatnonzero(labels == row)[col]
        y, x = 4 + 69 * row, 20 + 60 * col
        np.testing.assert_array_equal(sheet[y:y + 56, x:x + 56],
                                      np.kron(images[position], np.ones((2, 2), np.uint8)))
    assert sheet[0, 0] == view.BACKGROUND
    # the class label is drawn: the glyph '1' at row 1, scale 4
    glyph = np.kron(view.FONT["1"], np.ones((4, 4), bool))
    label_top = 4 + 69 + (56 - 20) // 2
    np.testing.assert_array_equal(sheet[label_top:label_top + 20, 4:16] == view.INK, glyph)
    assert facts["bytes"] == out.stat().st_size and facts["images"] == 100


def test_preview_decodes_with_opencv_too(tmp_path):
    cv2 = pytest.importorskip("cv2")
    out = tmp_path / "s.png"
    assert run("preview", SAMPLE, "--split", "test", "--per-class", "3", "--scale", "1",
               "-o", out, "-q").returncode == 0
    sheet = cv2.imread(str(out), cv2.IMREAD_UNCHANGED)
    assert sheet.ndim == 2 and sheet.dtype == np.uint8
    images, labels = sample_arrays("test")
    # scale 1: pad 2, label font scale 2 (6 px), images from x = 2 + 6 + 2 = 10
    first_seven = np.flatnonzero(labels == 7)[0]
    y = 2 + 7 * (28 + 2 + 5 + 2)
    np.testing.assert_array_equal(sheet[y:y + 28, 10:38], images[first_seven])


def test_preview_is_deterministic_and_refuses_to_overwrite(tmp_path):
    out = tmp_path / "s.png"
    assert run("preview", SAMPLE, "-o", out, "-q").returncode == 0
    first = out.read_bytes()
    refused = run("preview", SAMPLE, "-o", out, "-q")
    assert (refused.returncode, refused.stderr.decode()) == (
        2, f"Error: {out}: already exists; use --force to overwrite it\n")
    assert run("preview", SAMPLE, "-o", out, "-q", "--force").returncode == 0
    assert out.read_bytes() == first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.png"]


def test_contact_sheet_layout_library():
    images = np.stack([SEVEN, 255 - SEVEN])
    sheet, cells = view.contact_sheet([("7", images, ["#0", "#1"]), ("8", images[:1], [])],
                                      scale=3)
    for r, c, y, x, h, w in cells:
        np.testing.assert_array_equal(sheet[y:y + h, x:x + w],
                                      np.kron(images[c], np.ones((3, 3), np.uint8)))
    assert [(r, c) for r, c, *_ in cells] == [(0, 0), (0, 1), (1, 0)]
    # scale 3: pad 6, label scale 6 (18 px wide), cells 18 px wide, caption scale 1
    assert cells[0][2:] == (6, 6 + 18 + 6, 24, 18)


# --- info: histogram and orientation hint ------------------------------------------

def test_histogram_rows():
    rows = view.histogram_rows({"0": 10, "1": 5, "10": 1}, width=30)
    # room = 30 - 2 (label) - 2 (count) - 2 spaces = 24
    assert rows[0] == (" 0", "\u2588" * 24, "10")
    assert rows[1] == (" 1", "\u2588" * 12 + " " * 12, " 5")
    assert rows[2][1].rstrip() == "\u2588" * 2 + "\u258d"  # 2.4 cells: 19 eighths
    ascii_rows = view.histogram_lines({"0": 10, "1": 5}, width=20, ascii=True)
    # room = 20 - 1 - 2 - 2 = 15; 5 of 10 is 7.5 cells, rounded to even
    assert ascii_rows == ["0 " + "#" * 15 + " 10", "1 " + "#" * 8 + " " * 7 + "  5"]


def test_info_histogram_in_plain_text(tmp_path):
    images, labels = small_digits(30, classes=3)
    labels = np.array([0] * 20 + [1] * 10, np.uint8)
    make_idx_dir(tmp_path, images, labels)
    result = run_clean("info", tmp_path)
    out = result.stdout.decode()
    # bar room: min(80, 72) - 6 indent - 1 - 1 label - 2 count - 2 spaces = 60
    assert "    per class:\n      0 " + "#" * 60 + " 20\n      1 " + "#" * 30 + " " * 30 + \
        " 10\n" in out
    facts = json.loads(run_clean("info", tmp_path, "--json").stdout)
    assert facts["splits"]["train"]["class_counts"] == {"0": 20, "1": 10}
    # on a terminal: unicode bars, coloured
    coloured = run_clean("info", tmp_path, FORCE_COLOR="1").stdout.decode()
    plain = re.sub(r"\x1b\[[0-9;]*m", "", coloured)
    assert "      0 " + "\u2588" * 60 + " 20\n      1 " + "\u2588" * 30 in plain
    assert "\x1b[36m" in coloured


def test_transposed_images_are_detected_and_hinted(tmp_path):
    images, labels = sample_arrays()
    upright = view.taller_share(images)[0]
    flipped = view.taller_share(images.transpose(0, 2, 1))[0]
    assert upright > 0.8 and flipped < 0.2
    make_idx_dir(tmp_path / "t", images.transpose(0, 2, 1).copy(), labels)
    result = run_clean("info", tmp_path / "t")
    hint = ("hint: train: images look transposed, as EMNIST's are (only 15% of them are "
            "taller than wide, against about 90% for upright handwriting); read with "
            "--transpose (show, convert, info, ...)\n")
    assert result.stderr.decode() == hint
    fixed = run_clean("info", tmp_path / "t", "--transpose", "--json")
    assert fixed.stderr == b""
    orientation = json.loads(fixed.stdout)["splits"]["train"]["orientation"]
    assert orientation == {"looks_transposed": False, "taller_share": round(upright, 3)}
    plain = run_clean("info", SAMPLE)
    assert "hint" not in plain.stderr.decode()


def test_noise_gives_no_verdict():
    images, labels = small_digits(100)
    from mnistconv import ArraySplit
    assert view.looks_transposed(ArraySplit("train", images, labels))[0] is None


# --- the documentation's pictures stay true ----------------------------------------

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_readme_artifacts_match_the_current_drawing(tmp_path):
    """docs/sample-show.txt and docs/sample-sheet.png are what the documentation shows;
    they must be what the commands draw today. Regenerate with:
      COLUMNS=100 mnistconv show examples/data/mnist-sample --index 0:3 > docs/sample-show.txt
      mnistconv preview examples/data/mnist-sample -o docs/sample-sheet.png --force"""
    from PIL import Image
    shown = run_clean("show", SAMPLE, "--index", "0:3", COLUMNS="100")
    assert shown.stdout.decode() == (DOCS / "sample-show.txt").read_text()
    assert run("preview", SAMPLE, "-o", tmp_path / "s.png", "-q").returncode == 0
    np.testing.assert_array_equal(np.asarray(Image.open(DOCS / "sample-sheet.png")),
                                  np.asarray(Image.open(tmp_path / "s.png")))
    assert (DOCS / "sample-sheet.png").stat().st_size < 100_000


def test_wide_images_shrink_to_the_width():
    image = np.full((1, 60, 200), 255, np.uint8)
    lines = view.render_ascii(image, ["0 #0"], width=80).splitlines()
    assert max(map(len, lines)) == 67 and len(lines) == 10 + 1  # every 3rd pixel


def test_preview_of_an_empty_split(tmp_path):
    make_idx_dir(tmp_path, np.zeros((0, 28, 28), np.uint8), np.zeros(0, np.uint8))
    result = run("preview", tmp_path, "-o", tmp_path / "s.png")
    assert (result.returncode, result.stderr.decode()) == (
        2, f"Error: {tmp_path}: split train holds no images to preview; "
           "preview another split (--split)\n")
    assert not (tmp_path / "s.png").exists()


def test_preview_writes_the_format_its_name_says(tmp_path):
    """-o sheet.jpg used to get PNG bytes. The extension decides (any case); '-' is
    PNG; any other name is refused before anything is read or written."""
    from PIL import Image
    magic = {"PNG": lambda b: b[:8] == b"\x89PNG\r\n\x1a\n",
             "JPEG": lambda b: b[:3] == b"\xff\xd8\xff",
             "WebP": lambda b: b[:4] == b"RIFF" and b[8:12] == b"WEBP"}
    reference = None
    for name, kind in [("s.png", "PNG"), ("s.jpg", "JPEG"), ("s.JPEG", "JPEG"),
                       ("s.webp", "WebP")]:
        out = tmp_path / name
        result = run("preview", SAMPLE, "-o", out, "--json")
        assert result.returncode == 0, result.stderr
        facts = json.loads(result.stdout)
        data = out.read_bytes()
        assert magic[kind](data) and facts["format"] == kind, name
        assert facts["bytes"] == len(data)
        pixels = np.asarray(Image.open(out).convert("L"))
        if reference is None:
            reference = pixels
        elif kind == "WebP":  # lossless: the PNG's pixels
            np.testing.assert_array_equal(pixels, reference)
        else:  # JPEG at quality 95: close to them
            assert pixels.shape == reference.shape
            assert np.abs(pixels.astype(int) - reference).mean() < 2
        again = run("preview", SAMPLE, "-o", out, "-q", "--force")
        assert again.returncode == 0 and out.read_bytes() == data  # deterministic
    stdout = run("preview", SAMPLE, "-o", "-", "-q")
    assert stdout.returncode == 0 and magic["PNG"](stdout.stdout)
    before = sorted(p.name for p in tmp_path.iterdir())
    for name in ("s.gif", "s.txt", "sheet", "s.png.bak"):
        result = run("preview", SAMPLE, "-o", tmp_path / name)
        assert (result.returncode, result.stderr.decode(), result.stdout) == (
            2, f"Error: {tmp_path / name}: cannot tell the image format from the name; "
               "end it in .png, .jpg, .jpeg or .webp\n", b"")
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_show_grid_keeps_its_row_count_in_a_narrow_terminal():
    """--grid COLSxROWS is at most COLS images a line and ROWS lines of images. 80
    columns fit 2 tiles (28 wide, 2 apart): 5x1 is one line of 2 images, not the 5
    images wrapped to 3 lines."""
    for grid, columns, expected in [("5x1", "80", [["0", "1"]]),
                                    ("3x2", "80", [["0", "1"], ["2", "3"]]),
                                    ("5x1", "1000", [["0", "1", "2", "3", "4"]]),
                                    ("5x2", "1000", [["0", "1", "2", "3", "4"],
                                                     ["5", "6", "7", "8", "9"]]),
                                    ("4x3", "20", [["0"], ["1"], ["2"]])]:
        for colour in ({}, {"FORCE_COLOR": "1", "COLORTERM": "truecolor"}):
            result = run_clean("show", SAMPLE, "--grid", grid, COLUMNS=columns, **colour)
            assert result.returncode == 0, result.stderr
            text = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout.decode())
            lines = text.splitlines()
            captions = [re.findall(r"\d #(\d+)", ln) for ln in lines
                        if re.match(r"^\d #\d", ln)]
            assert captions == expected, (grid, columns, colour)
            # Each line of images is 14 text rows (28 pixel rows, two per row; 7 when
            # 20 columns shrink the digits to 14 x 14) and its caption; lines are one
            # blank line apart.
            rows = 14 if int(columns) >= 28 else 7
            assert len(lines) == (rows + 1) * len(expected) + len(expected) - 1


def _streamed(images, labels):
    """A split that can only stream: Split's default take() would spool it all."""
    from mnistconv.model.records import Batch, Header, Split

    class Streamed(Split):
        def batches(self, batch_size=1000):
            for start in range(0, len(labels), 3):  # batches of 3, whatever asked
                yield Batch(images[start:start + 3], labels[start:start + 3],
                            np.arange(start, min(len(labels), start + 3)))

        def labels(self):
            return labels

    return Streamed("train", Header(len(labels), images.shape[1:], images.dtype))


def test_gather_picks_a_streamed_splits_images_as_they_pass_without_take(monkeypatch):
    from mnistconv.model.records import Split

    def spooled(self, positions):
        raise AssertionError("take() spools the whole split")
    monkeypatch.setattr(Split, "take", spooled)
    images = np.arange(11 * 4 * 6, dtype=np.uint8).reshape(11, 4, 6)
    split = _streamed(images, np.arange(11) % 3)
    positions = np.array([7, 0, 7, 10, 3])  # any order, repeats
    assert np.array_equal(view.gather(split, positions), images[positions])
    halved = view.gather(split, positions, max_side=3)
    assert np.array_equal(halved, images[positions][:, ::2, ::2])
    assert view.gather(split, []).shape == (0, 4, 6)


def test_a_large_png_decodes_to_the_same_pixels_a_strip_at_a_time():
    from PIL import Image
    from mnistconv import codecs
    rng = np.random.default_rng(7)
    block = Image.core.get_block_size()
    for height, width in ((2100, 2003), (4100, 1025)):  # over the strip size, ragged
        pixels = rng.integers(0, 256, (height, width), dtype=np.uint8)
        out = io.BytesIO()
        Image.fromarray(pixels).save(out, "PNG", compress_level=1)
        assert np.array_equal(codecs.decode_image(out.getvalue()), pixels)
    assert Image.core.get_block_size() == block  # Pillow's own, put back after each
