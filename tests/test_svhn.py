"""SVHN's cropped digits in MATLAB v5 .mat files, built with scipy.io.savemat as the
publishers' MATLAB wrote them (X 32 x 32 x 3 x N uint8, y N x 1 with 10 for the digit 0),
plain and zlib-compressed: exact pixels, labels 10 read as 0 with a note; damaged files
are one line and exit 1, a compressed element claiming more than it can hold is refused
before anything is allocated."""

import zlib

import numpy as np
import pytest

import mnistconv
from helpers import run_main

scipy_io = pytest.importorskip("scipy.io")
NOTE = "SVHN: label 10 is the digit 0, read as 0 (as torchvision does)"


def svhn_file(path, n=5, seed=0, compress=False):
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8)
    digits = rng.integers(0, 10, n)
    digits[1] = 0  # stored as 10
    y = np.where(digits == 0, 10, digits).astype(np.float64).reshape(-1, 1)  # as published
    scipy_io.savemat(path, {"X": np.ascontiguousarray(images.transpose(1, 2, 3, 0)), "y": y},
                     do_compression=compress)
    return images, digits.astype(np.uint8)


def everything(split, size=2):
    batches = list(split.batches(size))
    return (np.concatenate([b.images for b in batches]),
            np.concatenate([b.labels for b in batches]))


@pytest.mark.parametrize("compress", [False, True])
def test_svhn_mat_reads_exact_pixels_and_ten_as_zero(tmp_path, compress):
    images, digits = svhn_file(tmp_path / "train_32x32.mat", n=7, compress=compress)
    assert (digits == 0).any()
    ds = mnistconv.read(tmp_path / "train_32x32.mat")
    assert ds.format == "svhn" and list(ds.splits) == ["train"]
    split = ds.splits["train"]
    assert split.header.shape == (32, 32, 3) and split.header.count == 7
    got, labels = everything(split)
    assert np.array_equal(got, images) and np.array_equal(labels, digits)
    assert ds.notes[0] == NOTE
    # What scipy itself reads, as torchvision's SVHN does: X[..., i] is image i.
    loaded = scipy_io.loadmat(tmp_path / "train_32x32.mat")
    assert np.array_equal(loaded["X"][..., 3], got[3])


def test_directory_reads_train_then_test_and_converts(tmp_path, capsys):
    (tmp_path / "svhn").mkdir()
    tr = svhn_file(tmp_path / "svhn" / "train_32x32.mat", n=4, seed=1)
    te = svhn_file(tmp_path / "svhn" / "test_32x32.mat", n=3, seed=2, compress=True)
    code, _, err = run_main(capsys, "convert", tmp_path / "svhn", tmp_path / "s.npz")
    assert code == 0, err
    assert NOTE in err
    with np.load(tmp_path / "s.npz") as f:
        assert np.array_equal(f["x_train"], tr[0]) and np.array_equal(f["y_train"], tr[1])
        assert np.array_equal(f["x_test"], te[0]) and np.array_equal(f["y_test"], te[1])


def test_truncated_mat_is_one_line(tmp_path, capsys):
    svhn_file(tmp_path / "test_32x32.mat")
    path = tmp_path / "test_32x32.mat"
    path.write_bytes(path.read_bytes()[:8000])
    code, out, err = run_main(capsys, "info", path)
    assert code == 1 and out == ""
    assert err.startswith(f"Error: {path}: the data element at byte 128 declares ")
    assert err.endswith("; the file is truncated: download it again\n")


def test_damaged_compressed_element_is_one_line(tmp_path, capsys):
    svhn_file(tmp_path / "test_32x32.mat", compress=True)
    path = tmp_path / "test_32x32.mat"
    data = bytearray(path.read_bytes())
    data[200:260] = bytes(60)
    path.write_bytes(bytes(data))
    code, _, err = run_main(capsys, "convert", path, tmp_path / "o.npz")
    assert code == 1 and len(err.splitlines()) == 1 and err.startswith(f"Error: {path}: ")
    assert not (tmp_path / "o.npz").exists()


def test_label_outside_one_to_ten_is_one_line(tmp_path, capsys):
    images = np.zeros((32, 32, 3, 2), np.uint8)
    scipy_io.savemat(tmp_path / "test_32x32.mat", {"X": images, "y": np.array([[1.], [11.]])})
    code, _, err = run_main(capsys, "convert", tmp_path / "test_32x32.mat", tmp_path / "o.npz")
    assert code == 1
    assert err.startswith(f"Error: {tmp_path / 'test_32x32.mat'}: y[1] is 11.0, SVHN's "
                          "labels are 1..10 (10 for the digit 0)")


def test_compressed_element_claiming_a_billion_images_is_refused_before_reading(tmp_path,
                                                                                 capsys):
    """A 1 KB file whose compressed X declares 32 x 32 x 3 x 1,000,000 images."""
    import struct

    def element(kind, payload):
        return struct.pack("<II", kind, len(payload)) + payload + b"\0" * (-len(payload) % 8)

    matrix = (element(6, struct.pack("<II", 9, 0)) +
              element(5, struct.pack("<4i", 32, 32, 3, 1_000_000)) +
              struct.pack("<HH", 1, 1) + b"X\0\0\0" +
              struct.pack("<II", 2, 3072 * 1_000_000))
    body = zlib.compress(struct.pack("<II", 14, len(matrix) + 3072 * 1_000_000) + matrix)
    header = b"MATLAB 5.0 MAT-file".ljust(116) + b"\0" * 8 + b"\x00\x01IM"
    path = tmp_path / "train_32x32.mat"
    path.write_bytes(header + struct.pack("<II", 15, len(body)) + body)
    code, _, err = run_main(capsys, "info", path)
    assert code == 1
    assert err.startswith(f"Error: {path}: variable X declares 3,072,000,000 examples of 1 "
                          "bytes")
    assert "such a ratio is a decompression bomb, not a dataset" in err


def test_not_a_mat_file_named_mat_is_one_line(tmp_path, capsys):
    (tmp_path / "train_32x32.mat").write_bytes(b"hello, not MATLAB" * 20)
    code, _, err = run_main(capsys, "info", tmp_path / "train_32x32.mat")
    assert code == 1
    assert err == (f"Error: {tmp_path / 'train_32x32.mat'}: is not a MATLAB 5.0 MAT-file "
                   "(its header text is missing); name SVHN's train_32x32.mat\n")
