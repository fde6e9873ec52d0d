"""Checks aimed at mistakes that once passed the whole suite: colour images written
channels-first with height and width swapped (only square or grayscale images were
tested), the ImageFolder reader's own image-size checks (another check further on
hid their absence, with another message), an IDX file one byte short (caught only by
the fuzz pass), and the JPEG quality an output was really written with (no test looked).
All in-process: the library, and the command line through its real entry point."""

import gzip

import numpy as np
import pytest

import mnistconv
from helpers import make_idx_dir, png, run_main, small_digits
from mnistconv import ArraySplit, Dataset
from mnistconv.formats import registry
from mnistconv.errors import FormatError


def colour_images(n=6, height=5, width=7, seed=3):
    """Non-square random RGB images: any swap of two axes moves values."""
    return np.random.default_rng(seed).integers(0, 256, (n, height, width, 3), np.uint8)


def one_split(images, labels=None):
    labels = np.arange(len(images), dtype=np.uint8) % 10 if labels is None else labels
    return Dataset("generated", {"train": ArraySplit("train", images, labels)})


# --- npz --layout nchw with colour images -------------------------------------------

@pytest.mark.parametrize("to_float", [False, True])
def test_colour_nchw_keeps_height_and_width_in_place(tmp_path, to_float):
    images = colour_images()
    out = tmp_path / "c.npz"
    mnistconv.write(one_split(images), str(out), layout="nchw",
                    to_float=to_float)
    with np.load(out) as arrays:
        x = arrays["x_train"]
    assert x.shape == (6, 3, 5, 7)  # n, C, H, W
    if to_float:
        assert x.dtype == np.float32
        x = (x * 255).round().astype(np.uint8)
    np.testing.assert_array_equal(x, images.transpose(0, 3, 1, 2))
    # Channel c of image i is the original's [..., c], row by row.
    np.testing.assert_array_equal(x[4, 2], images[4, :, :, 2])


def test_colour_nchw_from_the_command_line(tmp_path, capsys):
    images = colour_images(n=4, height=9, width=4)
    src = tmp_path / "in.npz"
    np.savez(src, x_train=images, y_train=np.arange(4, dtype=np.uint8))
    out = tmp_path / "out.npz"
    code, _, err = run_main(capsys, "convert", src, out, "--layout", "nchw", "-q")
    assert code == 0, err
    with np.load(out) as arrays:
        assert arrays["x_train"].shape == (4, 3, 9, 4)
        np.testing.assert_array_equal(arrays["x_train"], images.transpose(0, 3, 1, 2))
    # nhwc keeps them as they were
    code, _, err = run_main(capsys, "convert", src, tmp_path / "hwc.npz", "--layout", "nhwc",
                            "-q")
    assert code == 0, err
    with np.load(tmp_path / "hwc.npz") as arrays:
        np.testing.assert_array_equal(arrays["x_train"], images)


# --- ImageFolder: the reader's own size checks --------------------------------------

def png_header_claiming(height, width):
    """A PNG's signature and IHDR (CRC right) claiming height x width, then IEND: what a
    reader sees before it decodes anything."""
    import struct
    import zlib

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + \
            struct.pack(">I", zlib.crc32(kind + data))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IEND", b"")


def tree(root, files):
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


@pytest.mark.parametrize("first", [True, False])
def test_imagefolder_refuses_an_image_over_the_pixel_limit_by_its_header(tmp_path, capsys,
                                                                        first):
    """4097 x 4096 is over the default limit (4096 x 4096 pixels); the message is the
    limit's, for the huge image first (no split size to compare with yet) or after a
    normal one."""
    digit = png(small_digits(1)[0][0])
    huge = png_header_claiming(4097, 4096)
    root = tree(tmp_path / "t", {"train/0/0.png": huge if first else digit,
                                 "train/1/1.png": digit if first else huge})
    named = root / ("train/0/0.png" if first else "train/1/1.png")
    message = (f"{named}: image of 4097x4096 exceeds mnistconv's limit of 16,777,216 "
               "pixels per image; raise it with --max-image-size WxH if the images are "
               "really that large")
    # (info decodes nothing: the header check alone must refuse it.)
    _refused_by_read_and_info(root, message, capsys)


def _refused_by_read_and_info(root, message, capsys):
    """read() raises exactly `message`, and info prints it as its one error line."""
    with pytest.raises(FormatError) as caught:
        mnistconv.read(str(root), "imagefolder")
    assert str(caught.value) == message
    code, out, err = run_main(capsys, "info", root, "--from", "imagefolder")
    assert (code, out, err) == (1, "", f"Error: {message}\n")


def test_imagefolder_names_an_image_of_another_size_when_read_before_decoding(tmp_path,
                                                                             capsys):
    images = small_digits(2)[0]
    root = tree(tmp_path / "t", {"train/0/0.png": png(images[0]),
                                 "train/1/1.png": png(np.zeros((28, 20), np.uint8))})
    message = (f"{root}/train/1/1.png: is a 28x20 image, the split's images are 28x28; "
               "every image of a split has one size")
    _refused_by_read_and_info(root, message, capsys)


# --- IDX one byte short -------------------------------------------------------------

@pytest.mark.parametrize("gz", [False, True], ids=["raw", "gz"])
@pytest.mark.parametrize("kind", ["images", "labels"])
def test_idx_one_byte_short_is_named_with_both_sizes(tmp_path, capsys, kind, gz):
    images, labels = small_digits(10)
    folder = make_idx_dir(tmp_path / "in", images, labels, gz=gz)
    name = f"train-{kind}-idx{3 if kind == 'images' else 1}-ubyte" + (".gz" if gz else "")
    path = folder / name
    data = gzip.decompress(path.read_bytes()) if gz else path.read_bytes()
    path.write_bytes(gzip.compress(data[:-1], mtime=0) if gz else data[:-1])
    declared = "10 x 28 x 28 uint8 (7840 bytes), the file holds 7839" if kind == "images" \
        else "10 uint8 (10 bytes), the file holds 9"
    message = (f"{path}: truncated data: header declares {declared}; the file is cut "
               "short: download or copy it again")
    with pytest.raises(FormatError) as caught:
        for split in mnistconv.read(str(folder)).splits.values():
            split.labels()
            for _ in split.batches():
                pass
    assert str(caught.value) == message
    out = tmp_path / "out.npz"
    code, stdout, err = run_main(capsys, "convert", folder, out, "-q")
    assert (code, stdout, err) == (1, "", f"Error: {message}\n")
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]


def test_idx_one_byte_long_is_trailing_bytes(tmp_path):
    images, labels = small_digits(10)
    folder = make_idx_dir(tmp_path / "in", images, labels)
    path = folder / "train-labels-idx1-ubyte"
    path.write_bytes(path.read_bytes() + b"\x01")
    with pytest.raises(FormatError) as caught:
        mnistconv.read(str(folder))
    assert str(caught.value).startswith(f"{path}: trailing bytes: 1 bytes ")


# --- the JPEG quality an output was written with ------------------------------------

# The JPEG standard's example luminance table (ITU T.81 Annex K.1), row by row; libjpeg
# scales it by the quality (jpeg_quality_scaling) for 8-bit baseline files.
STANDARD_LUMINANCE = np.array([
    16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55,
    14, 13, 16, 24, 40, 57, 69, 56, 14, 17, 22, 29, 51, 87, 80, 62,
    18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81, 104, 113, 92,
    49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99]).reshape(8, 8)


def zigzag(table):
    """An 8x8 table in the order a DQT segment stores it."""
    cells = sorted(((r, c) for r in range(8) for c in range(8)),
                   key=lambda rc: (rc[0] + rc[1], rc[0] if (rc[0] + rc[1]) % 2 else rc[1]))
    return [int(table[r, c]) for r, c in cells]


def luminance_table(quality):
    scale = 5000 // quality if quality < 50 else 200 - 2 * quality
    return zigzag(np.clip((STANDARD_LUMINANCE * scale + 50) // 100, 1, 255))


def qualities_of(table):
    """Every quality libjpeg would have written this luminance table with."""
    return [q for q in range(1, 101) if luminance_table(q) == list(table)]


def jpeg_luminance_tables(data):
    """The luminance quantization table of every JPEG inside data (a file that holds
    JPEGs whole: a .jpg, a tar of them, uncompressed TFRecords), parsed from the
    markers up to each start of scan."""
    tables, at = [], data.find(b"\xff\xd8\xff")
    while at != -1:
        pos, table = at + 2, None
        while data[pos] == 0xFF and data[pos + 1] != 0xDA:  # up to start of scan
            marker, length = data[pos + 1], int.from_bytes(data[pos + 2:pos + 4], "big")
            if marker == 0xDB:
                segment, k = data[pos + 4:pos + 2 + length], 0
                while k < len(segment):
                    precision, number = segment[k] >> 4, segment[k] & 15
                    size = 64 * (2 if precision else 1)
                    if number == 0:
                        table = list(segment[k + 1:k + 1 + size]) if not precision else \
                            list(np.frombuffer(segment[k + 1:k + 1 + size], ">u2"))
                    k += 1 + size
            pos += 2 + length
        assert data[pos:pos + 2] == b"\xff\xda" and table is not None, "not a JPEG"
        tables.append(table)
        at = data.find(b"\xff\xd8\xff", pos)
    return tables


JPEG_WRITERS = [f.name for f in registry.writers()
                if "jpeg_quality" in {o.name for o in f.write_options}]
OUTPUT = {"tfrecord": "out.tfrecord", "webdataset": "out.tar", "imagefolder": "out"}


def jpeg_tables_in(folder):
    return [t for path in sorted(folder.rglob("*")) if path.is_file()
            for t in jpeg_luminance_tables(path.read_bytes())]


def test_the_jpeg_writers_are_the_ones_this_file_knows():
    assert sorted(JPEG_WRITERS) == sorted(OUTPUT)


def test_the_quality_estimate_tells_qualities_apart():
    for q in (37, 61, 95, 100):
        assert qualities_of(luminance_table(q)) == [q]


@pytest.mark.parametrize("quality", [None, 37, 61, 100])
@pytest.mark.parametrize("fmt", JPEG_WRITERS)
def test_jpeg_outputs_are_written_with_the_quality_asked(tmp_path, fmt, quality):
    images, labels = small_digits(12)
    out = tmp_path / "o"
    options = {"image_format": "jpeg"}
    if quality is not None:
        options["jpeg_quality"] = quality
    mnistconv.write(one_split(images, labels), str(out / OUTPUT[fmt]), fmt, **options)
    tables = jpeg_tables_in(out)
    assert len(tables) == 12
    want = 95 if quality is None else quality  # the documented default
    assert {tuple(qualities_of(t)) for t in tables} == {(want,)}


@pytest.mark.parametrize("fmt", JPEG_WRITERS)
def test_jpeg_quality_from_the_command_line(tmp_path, capsys, fmt):
    images, labels = small_digits(5)
    src = make_idx_dir(tmp_path / "in", images, labels)
    out = tmp_path / "o"
    code, _, err = run_main(capsys, "convert", src, out / OUTPUT[fmt], "--to", fmt,
                            "--image-format", "jpeg", "--jpeg-quality", "61", "-q")
    assert code == 0, err
    tables = jpeg_tables_in(out)
    assert len(tables) == 5 and {tuple(qualities_of(t)) for t in tables} == {(61,)}
