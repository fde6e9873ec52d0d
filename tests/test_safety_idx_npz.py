"""Hostile IDX and npz input (README "Safety"): names from inside a file never become
paths; work and memory are bounded by what the file really holds, not by what a header,
a compressed stream or a label value claims; every refusal is one line, exit 1.

The hostile files are built here, each 1 MB or less: deflate of many zeros is made from
one full-flushed block repeated (a full flush resets the window, so the copies are a
valid stream), not by compressing a gigabyte. Commands whose peak memory matters run as
a child process that reports its own VmHWM at exit (a watchdog kills it past 1.5 GB so a
regression cannot take the machine down).
"""

import io
import os
import struct
import subprocess
import sys
import time
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest

import mnistconv
from mnistconv import limits
from mnistconv.formats import idx
from helpers import DAMAGED, OVER_LIMIT, REPO, idx_bytes, make_idx_dir, run

B32 = 2 ** 32 - 1
CHUNK = 16 << 20


# --- building hostile files --------------------------------------------------------------

def raw_deflate(prefix, zeros):
    """(raw deflate of prefix + `zeros` zero bytes, its CRC-32, its length)."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    parts = [c.compress(prefix) + c.flush(zlib.Z_FULL_FLUSH)]
    crc = zlib.crc32(prefix)
    full, rest = divmod(zeros, CHUNK)
    if full:
        b = zlib.compressobj(9, zlib.DEFLATED, -15)
        parts += [b.compress(bytes(CHUNK)) + b.flush(zlib.Z_FULL_FLUSH)] * full
        for _ in range(full):
            crc = zlib.crc32(bytes(CHUNK), crc)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    parts.append(c.compress(bytes(rest)) + c.flush())
    return b"".join(parts), zlib.crc32(bytes(rest), crc), len(prefix) + zeros


def gzip_of(prefix, zeros):
    data, crc, size = raw_deflate(prefix, zeros)
    return (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff" + data
            + struct.pack("<II", crc, size & 0xFFFFFFFF))


def idx_header(code, dims):
    return bytes([0, 0, code, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims)


def npy_header(dtype, shape, fortran=False):
    f = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        f, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
            "fortran_order": fortran, "shape": tuple(shape)})
    return f.getvalue()


def npy_of_zeros(dtype, shape, fortran=False):
    """A deflated member: an .npy header declaring shape, then that many zero bytes."""
    size = int(np.prod(shape, dtype=object)) * np.dtype(dtype).itemsize
    return raw_deflate(npy_header(dtype, shape, fortran), size)


def npy(array):
    f = io.BytesIO()
    np.save(f, np.asarray(array), allow_pickle=False)
    return f.getvalue()


def zip_of(members):
    """A zip archive; a member is bytes (stored) or a raw_deflate() triple (deflated)."""
    out, central, pos = [], [], 0
    for name, m in members.items():
        if isinstance(m, bytes):
            (data, crc, size), method = (m, zlib.crc32(m), len(m)), 0
        else:
            (data, crc, size), method = m, 8
        n = name.encode()
        local = struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 20, 0, method, 0, 0x21, crc,
                            len(data), size, len(n), 0) + n
        central.append(struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 20, 20, 0, method,
                                   0, 0x21, crc, len(data), size, len(n), 0, 0, 0, 0, 0,
                                   pos) + n)
        out += [local, data]
        pos += len(local) + len(data)
    cd = b"".join(central)
    return b"".join(out) + cd + struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, len(central),
                                            len(central), len(cd), pos, 0)


def write(path, data):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    assert len(data) <= 1 << 20 or path.suffix == ".npz" and len(data) <= 2 << 20
    return path


# --- running the CLI and measuring its peak -----------------------------------------------

_REPORTER = """
import os, sys
# The CLI leaves with os._exit (console()): report the peak there, from this process
# only (TFRecord workers are forked from it).
parent, real_exit = os.getpid(), os._exit
def exit_reporting(code):
    if os.getpid() == parent:
        with open('/proc/self/status') as f:
            peak = next(l.split()[1] for l in f if l.startswith('VmHWM:'))
        with open(os.environ['PEAK_FILE'], 'w') as out:
            out.write(peak)
    real_exit(code)
os._exit = exit_reporting
sys.argv = ['mnistconv'] + sys.argv[1:]
from mnistconv.cli import console
console()
"""


def run_measured(tmp_path, *args, limit_kb=1_500_000, seconds=120):
    """Run the CLI in a child; (exit code, stderr, peak RSS in MB, seconds taken)."""
    peak_file = tmp_path / "peak.txt"
    env = dict(os.environ, PEAK_FILE=str(peak_file),
               PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    start = time.monotonic()
    child = subprocess.Popen([sys.executable, "-c", _REPORTER, *map(str, args)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        while child.poll() is None:
            try:
                with open(f"/proc/{child.pid}/status") as f:
                    hwm = next((int(l.split()[1]) for l in f if l.startswith("VmHWM:")), 0)
            except OSError:
                hwm = 0
            assert hwm < limit_kb, f"peak {hwm} kB: killed"
            assert time.monotonic() - start < seconds, "hung: killed"
            time.sleep(0.02)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        err = child.stderr.read().decode()
        child.stderr.close()
    elapsed = time.monotonic() - start
    peak_mb = int(peak_file.read_text()) / 1024 if peak_file.exists() else None
    return child.returncode, err, peak_mb, elapsed


def tree(folder):
    return sorted(str(p.relative_to(folder)) for p in Path(folder).rglob("*"))


# --- 1. names from inside a file are never paths -----------------------------------------

def escaping_npz(path, split):
    return write(path, zip_of({f"x_{split}.npy": npy(np.zeros((2, 28, 28), np.uint8)),
                               f"y_{split}.npy": npy(np.zeros(2, np.uint8))}))


@pytest.mark.parametrize("command, out", [("npz-to-idx", "out"),
                                          ("npz-to-gdmnist", "out.gdmnist"),
                                          ("npz-to-tfrecord", "out.tfrecord")])
@pytest.mark.parametrize("kind", ["relative", "absolute"])
def test_an_npz_split_name_never_becomes_a_path(tmp_path, command, out, kind):
    work = tmp_path / "a" / "b" / "work"
    work.mkdir(parents=True)
    split = "../../ESCAPED" if kind == "relative" else str(tmp_path / "ESCAPED")
    src = escaping_npz(tmp_path / "evil.npz", split)
    before = tree(tmp_path)
    r = run(command, src, out, cwd=work)
    # A quoted name over 80 characters is cut (the absolute one, in a long tmp_path).
    shown = repr(split) if len(repr(split)) <= 80 else repr(split)[:76] + "...'"
    assert (r.returncode, r.stderr.decode()) == (1, (
        f"Error: {src}: split name {shown} is not a safe name; split names are letters, "
        "digits, '_', '-' and '.' (not leading), at most 64 characters\n"))
    assert tree(tmp_path) == before  # nothing under tmp_path (parents of work included)


def test_a_split_name_with_a_newline_stays_on_one_line(tmp_path):
    src = escaping_npz(tmp_path / "nl.npz", "train\nError: fake")
    r = run("info", src)
    assert (r.returncode, r.stderr.decode()) == (1, (
        f"Error: {src}: split name 'train\\nError: fake' is not a safe name; split names "
        "are letters, digits, '_', '-' and '.' (not leading), at most 64 characters\n"))


def test_the_member_list_in_a_message_is_escaped_and_cut(tmp_path):
    members = {f"m{i}\n.npy": npy(np.zeros(1, np.uint8)) for i in range(12)}
    src = write(tmp_path / "none.npz", zip_of(members))
    r = run("info", src)
    listed = ", ".join(f"'m{i}\\n'" for i in range(10))
    assert (r.returncode, r.stderr.decode()) == (1, (
        f"Error: {src}: holds no x_<split>/y_<split> arrays (Keras' layout); it has: "
        f"{listed}, ...\n"))


def test_safe_split_names_still_read(tmp_path):
    src = tmp_path / "ok.npz"
    np.savez(src, x_train=np.ones((2, 3, 3), np.uint8), y_train=np.arange(2),
             **{"x_val-1.b": np.ones((1, 3, 3), np.uint8), "y_val-1.b": np.arange(1)})
    assert list(mnistconv.read(src).splits) == ["train", "val-1.b"]


# --- 2. decompression bombs and header lies ----------------------------------------------

def info_refused(tmp_path, src, message, named=None, peak_mb=300, more=()):
    """`info src` (and the options in `more`) in a child exits 1 with
    `Error: <named, or src>: message` and its peak memory under peak_mb."""
    code, err, peak, _ = run_measured(tmp_path, "info", src, *more)
    assert (code, err) == (1, f"Error: {named or src}: {message}\n")
    assert peak < peak_mb


def idx_pair(folder, images, labels):
    """images/labels: (idx header, zero bytes after it), written gzip-compressed."""
    write(folder / "train-images-idx3-ubyte.gz", gzip_of(*images))
    write(folder / "train-labels-idx1-ubyte.gz", gzip_of(*labels))
    return folder


def test_idx_gz_holding_1e9_labels(tmp_path):
    """971 KB of gzip really holding 10^9 labels, beside 10^9 empty images: refused from
    the headers (all labels of a split are held in memory)."""
    n = 10 ** 9
    src = idx_pair(tmp_path / "src", (idx_header(8, [n, 0, 0]), 0), (idx_header(8, [n]), n))
    info_refused(tmp_path, src, "header declares "
                 "1,000,000,000 examples, more than mnistconv's limit of "
                 f"16,777,216 per split; {OVER_LIMIT}", named=src / "train-images-idx3-ubyte.gz")


def test_idx_gz_with_one_1gib_image(tmp_path):
    side = 32768
    src = idx_pair(tmp_path / "src", (idx_header(8, [1, side, side]), side * side),
                   (idx_header(8, [1]), 1))
    info_refused(tmp_path, src, "image of "
                 "32768x32768 exceeds mnistconv's limit of 16,777,216 pixels "
                 "per image; raise it with --max-image-size WxH if the images are really "
                 "that large", named=src / "train-images-idx3-ubyte.gz")


def test_idx_labels_header_claiming_more_than_the_stream_holds(tmp_path):
    """16.7M labels declared (the gzip file is large enough to hold them: padding after
    the stream), 1000 held: fails at the first short part, holding only those."""
    n = limits.MAX_EXAMPLES
    src = tmp_path / "src"
    write(src / "train-images-idx3-ubyte.gz", gzip_of(idx_header(8, [n, 0, 0]), 0))
    write(src / "train-labels-idx1-ubyte.gz",
          gzip_of(idx_header(8, [n]), 1000) + bytes(n // 1000))
    info_refused(tmp_path, src, "truncated data: "
                 "header declares 16777216 uint8 (16777216 bytes), the file "
                 "holds 1000; the file is cut short: download or copy it again", named=src / "train-labels-idx1-ubyte.gz",
                 peak_mb=100)


def test_npz_member_deflated_from_1e9_zeros(tmp_path):
    """y_train of 10^9 labels in 971 KB: its declared size passes the 1032:1 check, but
    nothing is allocated from it."""
    n = 10 ** 9
    src = write(tmp_path / "bomb.npz", zip_of({"x_train.npy": npy_of_zeros("u1", (n, 0)),
                                               "y_train.npy": npy_of_zeros("u1", (n,))}))
    info_refused(tmp_path, src, "x_train declares 1,000,000,000 examples, more "
                 f"than mnistconv's limit of 16,777,216 per split; {OVER_LIMIT}")


def test_npz_fortran_order_images_over_the_limit(tmp_path):
    src = write(tmp_path / "f.npz", zip_of({
        "x_train.npy": npy_of_zeros("u1", (8, 4096, 4096), fortran=True),
        "y_train.npy": npy(np.zeros(8, np.uint8))}))
    info_refused(tmp_path, src, "x_train is stored in Fortran (column) order, "
                 "which is read whole: 134,217,728 bytes, more than "
                 "mnistconv's limit of 67,108,864; save it in C order "
                 "(np.ascontiguousarray) first")


def test_npz_fortran_order_images_within_the_limit_read_right(tmp_path):
    images = np.asfortranarray(np.arange(5 * 4 * 3, dtype=np.uint16).reshape(5, 4, 3))
    src = tmp_path / "f.npz"
    np.savez(src, x_train=images, y_train=np.array([1, 2, 3, 4, 5.0]))
    split = mnistconv.read(src).splits["train"]
    batches = list(split.batches(batch_size=2))
    assert all(b.images.flags.c_contiguous for b in batches)
    np.testing.assert_array_equal(np.concatenate([b.images for b in batches]), images)
    np.testing.assert_array_equal(split.labels(), [1, 2, 3, 4, 5])


@pytest.mark.parametrize("fmt", ["idx", "npz"])
def test_one_image_over_max_pixels_is_refused_from_the_header(tmp_path, fmt):
    side = 4097  # 4097^2 pixels > limits.MAX_IMAGE_PIXELS
    if fmt == "idx":
        src = idx_pair(tmp_path / "src", (idx_header(8, [1, side, side]), side * side),
                       (idx_header(8, [1]), 1))
        named = src / "train-images-idx3-ubyte.gz"
    else:
        src = named = write(tmp_path / "big.npz", zip_of({
            "x_train.npy": npy_of_zeros("u1", (1, side, side)),
            "y_train.npy": npy(np.zeros(1, np.uint8))}))
    info_refused(tmp_path, src, "image of 4097x4097 exceeds mnistconv's limit of "
                 "16,777,216 pixels per image; raise it with --max-image-size WxH if the "
                 "images are really that large", named=named)


def test_one_image_over_max_record_bytes_is_refused_from_the_header(tmp_path):
    """Within the pixel limit (raised to it), but 1 GiB of float64."""
    src = write(tmp_path / "f8.npz", zip_of({
        "x_train.npy": npy_of_zeros("<f8", (1, 11586, 11586)),
        "y_train.npy": npy(np.zeros(1, np.uint8))}))
    info_refused(tmp_path, src, "images of 11586x11586 float64 are "
                 "1,073,883,168 bytes each, more than mnistconv's limit of "
                 "268,435,456; check that the file is not damaged, or store smaller images",
                 more=("--max-image-size", "11586x11586"))


@pytest.mark.parametrize("fmt, dtype", [("npz", "<i8"), ("npz", "u1"), ("idx", "i4")])
def test_the_largest_split_a_small_file_may_declare_reads_within_bounds(tmp_path, fmt,
                                                                       dtype):
    """MAX_EXAMPLES empty images and zero labels (17-131 KB of input): a correct result,
    with `info`'s histogram, under 300 MB."""
    n = limits.MAX_EXAMPLES
    if fmt == "npz":
        src = write(tmp_path / "max.npz", zip_of({"x_train.npy": npy_of_zeros("u1", (n, 0)),
                                                  "y_train.npy": npy_of_zeros(dtype, (n,))}))
    else:
        src = idx_pair(tmp_path / "src", (idx_header(8, [n, 0, 0]), 0),
                       (idx_header(0x0C, [n]), 4 * n))
    code, err, peak, _ = run_measured(tmp_path, "info", src, "--json")
    assert (code, err) == (0, "")
    assert peak < 300


# --- 3. label values are checked where they are read -------------------------------------

BAD_LABELS = {
    "nan": (np.array([0, 1, np.nan, 2], np.float32), "nan", 2),
    "inf": (np.array([0, np.inf, 1, 2]), "inf", 1),
    "minus inf": (np.array([0, 1, 2, -np.inf]), "-inf", 3),
    "fraction": (np.array([0, 1.5, 1, 2]), "1.5", 1),
    "uint64 beyond int64": (np.array([0, 1, 2 ** 63 + 1, 2], np.uint64),
                            "9223372036854775809", 2),
    "int32 max": (np.array([0, 2 ** 31 - 1, 1, 2], np.int32), "2147483647", 1),
    "1e8": (np.array([0, 1, 2, 10 ** 8], np.int64), "100000000", 3),
    "MAX_CLASSES": (np.array([0, 65536, 1, 2], np.uint32), "65536", 1),
}


@pytest.mark.parametrize("case", BAD_LABELS)
@pytest.mark.parametrize("command", ["info", "tfrecord"])
def test_npz_labels_that_are_not_class_numbers(tmp_path, case, command):
    labels, shown, at = BAD_LABELS[case]
    src = tmp_path / "bad.npz"
    np.savez(src, x_train=np.zeros((4, 28, 28), np.uint8), y_train=labels)
    args = ["info", src] if command == "info" else ["convert", src, tmp_path / "o.tfrecord"]
    code, err, _, seconds = run_measured(tmp_path, *args)
    assert (code, err) == (1, f"Error: {src}: member y_train.npy: label {shown} of example "
                              f"{at} is not a class number; labels are whole numbers below "
                              "65,536\n")
    assert seconds < 10
    assert sorted(os.listdir(tmp_path)) == ["bad.npz", "peak.txt"]


@pytest.mark.parametrize("case", ["nan", "int32 max", "MAX_CLASSES"])
@pytest.mark.parametrize("gz", [False, True])
def test_idx_labels_that_are_not_class_numbers(tmp_path, case, gz):
    labels, shown, at = BAD_LABELS[case]
    labels = labels.astype(np.float64 if labels.dtype.kind == "f" else np.int32)
    src = make_idx_dir(tmp_path / "src", np.zeros((4, 28, 28), np.uint8), labels, gz=gz)
    named = src / ("train-labels-idx1-ubyte" + (".gz" if gz else ""))
    for args in (["info", src], ["convert", src, tmp_path / "o.tfrecord"]):
        code, err, _, seconds = run_measured(tmp_path, *args)
        assert (code, err) == (1, f"Error: {named}: label {shown} of example {at} is not a "
                                  "class number; labels are whole numbers below 65,536\n")
        assert seconds < 10
    assert not (tmp_path / "o.tfrecord").exists()


@pytest.mark.parametrize("fmt", ["idx", "npz"])
def test_a_bad_label_far_into_the_file_is_named_by_its_position(tmp_path, fmt):
    n = 5_000_000  # more than one part of idx.LABEL_CHUNK / npz's 1 MiB reads
    labels = np.zeros(n, np.int32)
    labels[4_500_001] = -7
    labels[4_700_003] = 70000
    images = np.zeros((n, 0), np.uint8)
    if fmt == "idx":
        src = tmp_path / "src"
        src.mkdir()
        (src / "train-images-idx2-ubyte").write_bytes(idx_bytes(images))
        (src / "train-labels-idx1-ubyte").write_bytes(idx_bytes(labels))
        named, where = src / "train-labels-idx1-ubyte", ""
    else:
        src = named = tmp_path / "a.npz"
        np.savez_compressed(src, x_train=images, y_train=labels)
        where = "member y_train.npy: "
    with pytest.raises(mnistconv.FormatError) as e:
        mnistconv.read(src).splits["train"].labels()
    assert str(e.value) == (f"{named}: {where}label 70000 of example 4700003 is not a class "
                            "number; labels are whole numbers below 65,536")


@pytest.mark.parametrize("labels", [np.array([0, 65535, 3, 2], np.uint32),
                                    np.array([0, 1, 2, 3.0], np.float32),
                                    np.array([True, False, True, True])])
def test_labels_at_the_limits_still_read(tmp_path, labels):
    src = tmp_path / "ok.npz"
    np.savez(src, x_train=np.zeros((4, 2, 2), np.uint8), y_train=labels)
    got = mnistconv.read(src).splits["train"].labels()
    assert got.dtype == labels.dtype
    np.testing.assert_array_equal(got, labels)


def test_big_endian_idx_labels_read_as_before(tmp_path):
    labels = np.array([0, 300, 65535, 7], np.int32)
    src = make_idx_dir(tmp_path / "src", np.zeros((4, 2, 2), np.uint8), labels, gz=True)
    got = mnistconv.read(src).splits["train"].labels()
    assert got.dtype == np.dtype("i4") and got.dtype.isnative
    np.testing.assert_array_equal(got, labels)


def test_negative_labels_pass_the_readers_and_the_consumers_say_no(tmp_path):
    """The rule chosen: readers refuse what is no class number in any format (NaN, inf,
    fractions, MAX_CLASSES or more); negative values (-1 for 'unlabelled', any signed
    IDX type) pass, as IDX round trips of int16 labels rely on, and the writers that
    cannot store them refuse them."""
    src = tmp_path / "neg.npz"
    np.savez(src, x_train=np.zeros((4, 28, 28), np.uint8),
             y_train=np.array([0, -1, 3, -(2 ** 62)], np.int64))
    r = run("info", src, "--json")
    assert r.returncode == 0, r.stderr
    assert b'"label_range": [\n        -4611686018427387904,\n        3\n      ]' in r.stdout
    r = run("convert", src, tmp_path / "o.tfrecord")
    err = r.stderr.decode()  # the writer's own words (tfrecord.py): one line, no output
    assert r.returncode in (1, 2) and err.startswith(f"Error: {src}: ") \
        and err.count("\n") == 1 and "label" in err
    assert sorted(os.listdir(tmp_path)) == ["neg.npz"]


# --- 4. headers numpy cannot describe ---------------------------------------------------

@pytest.mark.parametrize("ndim", [33, 65, 255])
@pytest.mark.parametrize("gz", [False, True])
def test_idx_with_too_many_dimensions(tmp_path, ndim, gz):
    data = idx_header(8, [2] + [1] * (ndim - 1)) + bytes(2)
    name = f"train-images-idx{ndim}-ubyte" + (".gz" if gz else "")
    src = write(tmp_path / "src" / name, gzip_of(data, 0) if gz else data)
    write(tmp_path / "src" / "train-labels-idx1-ubyte", idx_bytes(np.zeros(2, np.uint8)))
    r = run("info", tmp_path / "src")
    assert (r.returncode, r.stderr.decode()) == (
        1, f"Error: {src}: IDX header declares {ndim} dimensions, more than mnistconv's "
           f"limit of 32; {OVER_LIMIT}\n")


def test_idx_with_32_dimensions_still_reads(tmp_path):
    array = np.arange(6, dtype=np.uint8).reshape((2, 3) + (1,) * 30)
    idx.write_array(tmp_path / "a.idx", array)
    np.testing.assert_array_equal(idx.read_array(tmp_path / "a.idx"), array)


@pytest.mark.parametrize("dims, message", [
    ([3, B32, B32], "header declares 3 x 4294967295 x 4294967295: items of "
                    "18446744065119617025 bytes each are not images; the file is damaged: download, copy or convert it again"),
    ([0, B32, B32, B32], "header declares 0 x 4294967295 x 4294967295 x 4294967295: items of "
                         "79228162458924105385300197375 bytes each are not images"
                         "; the file is damaged: download, copy or convert it again"),
    ([2, 0, B32], None),  # empty images: read
    ([0, 28, 28], None),
])
def test_idx_dims_of_zero_or_overflowing_int64(tmp_path, dims, message):
    count = dims[0]
    src = tmp_path / "src"
    write(src / f"train-images-idx{len(dims)}-ubyte.gz", gzip_of(idx_header(8, dims), 0))
    write(src / "train-labels-idx1-ubyte", idx_bytes(np.zeros(count, np.uint8)))
    r = run("info", src)
    if message is None:
        assert r.returncode == 0, r.stderr
    else:
        assert (r.returncode, r.stderr.decode()) == (
            1, f"Error: {src / f'train-images-idx{len(dims)}-ubyte.gz'}: {message}\n")


def test_idx_with_zero_dimensions(tmp_path):
    src = write(tmp_path / "src" / "train-images-idx3-ubyte", b"\0\0\x08\x00")
    r = run("info", src, "--labels", src)
    assert (r.returncode, r.stderr.decode()) == (
        1, f"Error: {src}: IDX header declares 0 dimensions; {DAMAGED}\n")


def test_npz_with_too_many_dimensions(tmp_path):
    src = write(tmp_path / "d.npz", zip_of({
        "x_train.npy": npy_header("u1", (1,) * 40) + b"\0",
        "y_train.npy": npy(np.zeros(1, np.uint8))}))
    r = run("info", src)
    assert (r.returncode, r.stderr.decode()) == (
        1, f"Error: {src}: x_train has 40 dimensions, more than mnistconv's limit of 32; "
           f"{OVER_LIMIT}\n")


def test_hostile_files_here_are_valid_archives(tmp_path):
    """The builders make what zipfile and gzip themselves accept (so the refusals above
    are the reader's judgement, not a broken file)."""
    import gzip
    z = write(tmp_path / "z.npz", zip_of({"x_train.npy": npy_of_zeros("u1", (3, 2)),
                                          "y_train.npy": npy(np.arange(3, dtype=np.uint8))}))
    with zipfile.ZipFile(z) as archive:
        assert archive.testzip() is None
    with np.load(z) as loaded:
        np.testing.assert_array_equal(loaded["x_train"], np.zeros((3, 2), np.uint8))
    data = gzip_of(b"head", 3 * CHUNK + 5)
    assert gzip.decompress(data) == b"head" + bytes(3 * CHUNK + 5)


def python2_npy(array):
    """An .npy file as Python 2 wrote some: a shape of longs (`3L`), which numpy still
    reads after repairing the header, with a UserWarning."""
    data = npy(array)
    length = int.from_bytes(data[8:10], "little")
    header = data[10:10 + length]
    first = str(array.shape[0]).encode()
    old = b"(" + first + b","
    repaired = header.replace(old, b"(" + first + b"L,").replace(b" \n", b"\n", 1)
    assert len(repaired) == length and repaired != header
    return data[:10] + repaired + data[10 + length:]


@pytest.mark.parametrize("kind", ["npz", "quickdraw"])
def test_a_python2_npy_header_reads_without_a_warning(tmp_path, kind):
    """numpy's warning about it is not a line of mnistconv's output: stderr stays empty
    (the long fuzz pass's mutated Quick, Draw! files printed it)."""
    images = np.arange(3 * 784, dtype=np.uint8).reshape(3, 784) % 251
    if kind == "npz":
        src = write(tmp_path / "old.npz", zip_of({
            "x_train.npy": python2_npy(images.reshape(3, 28, 28)),
            "y_train.npy": npy(np.array([1, 2, 3], np.uint8))}))
    else:
        src = write(tmp_path / "qd" / "full_numpy_bitmap_cat.npy", python2_npy(images))
    r = run("convert", src, tmp_path / "o.npz", "--quiet")
    assert (r.returncode, r.stderr) == (0, b""), r.stderr
    with np.load(tmp_path / "o.npz") as z:
        assert np.array_equal(z["x_train"].reshape(3, 784), images)
