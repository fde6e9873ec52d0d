"""Bad input: one line naming the file and what is wrong, exit code 1 (2 for usage),
no traceback, no output left behind, nothing overwritten without --force."""

import gzip

import numpy as np
import pytest

from helpers import idx_bytes, make_idx_dir, run, small_digits


@pytest.fixture()
def good(tmp_path):
    images, labels = small_digits(10)
    return make_idx_dir(tmp_path / "src", images, labels), images, labels


def convert_error(tmp_path, src, *extra):
    out = tmp_path / "out.npz"
    result = run("convert", src, out, *extra)
    assert not out.exists(), "no output may be left behind"
    assert [p.name for p in out.parent.iterdir() if "mnistconv-tmp" in p.name] == []
    return result.returncode, result.stderr.decode()


def damage(path, data):
    path.write_bytes(data)
    return path


CASES = {
    "wrong magic": (lambda img, lab: b"\x01\x02" + img[2:],
                    "not an IDX file: magic 01020803 does not start with two zero bytes"
                    "; check the path, or name its format with --from"),
    "unknown element type": (lambda img, lab: img[:2] + b"\x0a" + img[3:],
                             "unknown IDX element type 0x0A; IDX defines 0x08 uint8, 0x09 "
                             "int8, 0x0B int16, 0x0C int32, 0x0D float32, 0x0E float64"),
    "truncated data": (lambda img, lab: img[:-100],
                       "truncated data: header declares 10 x 28 x 28 uint8 (7840 bytes), "
                       "the file holds 7740; the file is cut short: download or copy "
                       "it again"),
    "trailing bytes": (lambda img, lab: img + b"\0\0\0",
                       "trailing bytes: 3 bytes after the 10 x 28 x 28 data the header "
                       "declares; the file is damaged: download, copy or convert it again"),
    "zero dimensions": (lambda img, lab: b"\0\0\x08\0",
                        "IDX header declares 0 dimensions; the file is damaged: download, "
                        "copy or convert it again"),
    "truncated header": (lambda img, lab: img[:9],
                         "truncated IDX header: expected 12 bytes, found 5; the file is "
                         "cut short: download or copy it again"),
}


@pytest.mark.parametrize("case", CASES)
def test_bad_images_file(tmp_path, good, case):
    src, images, labels = good
    make_bad, message = CASES[case]
    path = src / "train-images-idx3-ubyte"
    damage(path, make_bad(path.read_bytes(), None))
    code, err = convert_error(tmp_path, src)
    assert err == f"Error: {path}: {message}\n"
    assert code == 1


def test_count_mismatch(tmp_path, good):
    src, images, labels = good
    (src / "train-labels-idx1-ubyte").write_bytes(idx_bytes(labels[:9]))
    code, err = convert_error(tmp_path, src)
    assert (code, err) == (1, f"Error: {src / 'train-images-idx3-ubyte'}: image/label count "
                              f"mismatch: 10 images, 9 labels in "
                              f"{src / 'train-labels-idx1-ubyte'}; use the images and "
                              "labels files of one dataset, both whole\n")


def test_labels_file_given_as_images(tmp_path, good):
    src, images, labels = good
    lab = src / "train-labels-idx1-ubyte"
    code, err = convert_error(tmp_path, lab, "--from", "idx", "--labels", lab)
    assert (code, err) == (1, f"Error: {lab}: is a labels file (1 dimension), not images; "
                              "give it with --labels\n")


def test_images_file_given_as_labels(tmp_path, good):
    src, images, labels = good
    img = src / "train-images-idx3-ubyte"
    code, err = convert_error(tmp_path, img, "--labels", img)
    assert (code, err) == (1, f"Error: {img}: is not a labels file: 3 dimensions, "
                              "expected 1; give the labels file (*-labels-idx1-ubyte) as "
                              "the labels\n")


def test_invalid_gzip(tmp_path, good):
    src, images, labels = good
    data = gzip.compress((src / "train-images-idx3-ubyte").read_bytes())
    (src / "train-images-idx3-ubyte").unlink()
    bad = src / "train-images-idx3-ubyte.gz"
    bad.write_bytes(data[:200])  # a gzip stream cut short
    code, err = convert_error(tmp_path, src)
    assert code == 1
    assert err == (f"Error: {bad}: not a valid gzip stream (Compressed file ended before "
                   "the end-of-stream marker was reached); the file is damaged: download, copy or convert it again\n")

    bad.write_bytes(data[:30] + bytes(b ^ 0xFF for b in data[30:60]) + data[60:])
    code, err = convert_error(tmp_path, src)
    assert code == 1 and err.startswith(f"Error: {bad}: not a valid gzip stream (")
    assert err.count("\n") == 1


def test_missing_input_and_unknown_format(tmp_path, good):
    result = run("convert", tmp_path / "nope", tmp_path / "x.npz")
    assert (result.returncode, result.stderr.decode()) == (
        2, f"Error: {tmp_path / 'nope'}: no such file or directory; check the path\n")
    (tmp_path / "junk.dat").write_bytes(b"hello")
    result = run("info", tmp_path / "junk.dat", "--from", "idx")
    assert (result.returncode, result.stderr.decode()) == (
        1, f"Error: {tmp_path / 'junk.dat'}: not an IDX file: magic 68656c6c does not "
           "start with two zero bytes; check the path, or name its format with --from\n")
    result = run("info", tmp_path / "junk.dat")
    assert (result.returncode, result.stderr.decode()) == (
        2, f"Error: {tmp_path / 'junk.dat'}: is text, not a dataset; mnistconv reads "
           + ", ".join(__import__("mnistconv").registry.FORMATS)
           + " (see `mnistconv formats`)\n")
    (tmp_path / "junk.dat").write_bytes(bytes(range(256)))
    result = run("info", tmp_path / "junk.dat")
    assert (result.returncode, result.stderr.decode()) == (
        2, f"Error: {tmp_path / 'junk.dat'}: not a dataset mnistconv recognizes (it reads "
           + ", ".join(__import__("mnistconv").registry.FORMATS)
           + "); if it is one of these under another name, say which with --from\n")
    (tmp_path / "photo.jpg").write_bytes(b"\xff\xd8\xff\xe0\x00\x10JFIF")
    result = run("compare", tmp_path / "photo.jpg", tmp_path / "junk.dat")
    assert result.returncode == 2
    assert result.stderr.decode().startswith(f"Error: {tmp_path / 'photo.jpg'}: is a JPEG "
                                             "image, not a dataset; mnistconv reads ")
    result = run("compare", good[0], tmp_path / "junk.dat")
    assert result.stderr.decode().endswith("say which with --from-b\n")


def test_usage_errors_exit_2(tmp_path, good):
    src, *_ = good
    result = run("convert", src, tmp_path / "x.npz", "--limit", "-1")
    assert result.returncode == 2 and "Invalid value for '--limit'" in result.stderr.decode()
    result = run("convert", src, tmp_path / "x.npz", "--gzip")
    assert (result.returncode, result.stderr.decode()) == (
        2, "Error: --gzip does not apply to reading idx or writing npz; drop it\n")
    result = run("convert", src, tmp_path / "x.unknown")
    assert result.returncode == 2
    assert "cannot tell the output format from the name; name it with --to" in \
        result.stderr.decode()


def test_an_existing_output_is_named_as_the_user_named_it(tmp_path, good):
    """Relative in, relative out: the message names the file by the path typed (a
    folder's file under the folder as typed), not the absolute path made from it."""
    src = good[0]
    (tmp_path / "x.npz").write_bytes(b"precious")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "train-images-idx3-ubyte").write_bytes(b"precious")
    for args, named in ((["x.npz"], "x.npz"),
                        (["./out/", "--to", "idx"], "./out/train-images-idx3-ubyte"),
                        ([str(tmp_path / "x.npz")], str(tmp_path / "x.npz"))):
        result = run("convert", src, *args, cwd=tmp_path)
        assert (result.returncode, result.stderr.decode()) == (
            2, f"Error: {named}: already exists; use --force to overwrite it\n")
    assert (tmp_path / "x.npz").read_bytes() == b"precious"


def test_existing_output_is_never_overwritten_without_force(tmp_path, good):
    src, images, labels = good
    out = tmp_path / "x.npz"
    out.write_bytes(b"precious")
    result = run("idx-to-npz", src, out)
    assert (result.returncode, result.stderr.decode()) == (
        2, f"Error: {out}: already exists; use --force to overwrite it\n")
    assert out.read_bytes() == b"precious"
    assert run("idx-to-npz", src, out, "--force").returncode == 0
    with np.load(out) as npz:
        np.testing.assert_array_equal(npz["x_train"], images)


def test_existing_idx_directory_files_are_protected(tmp_path, good):
    src, *_ = good
    out = tmp_path / "out"
    out.mkdir()
    (out / "train-images-idx3-ubyte").write_bytes(b"old")
    (out / "README").write_bytes(b"mine")
    result = run("convert", src, out, "--to", "idx")
    assert result.returncode == 2
    assert (out / "train-images-idx3-ubyte").read_bytes() == b"old"
    assert run("convert", src, out, "--to", "idx", "--force").returncode == 0
    assert (out / "train-images-idx3-ubyte").read_bytes() == \
        (src / "train-images-idx3-ubyte").read_bytes()
    assert sorted(p.name for p in out.iterdir()) == [
        "README", "train-images-idx3-ubyte", "train-labels-idx1-ubyte"]


def test_failure_mid_write_leaves_nothing(tmp_path, good):
    """The second split is corrupt: the first split's files must not appear either."""
    src, images, labels = good
    make_idx_dir(src, images[:4], labels[:4], split="test")
    path = src / "t10k-images-idx3-ubyte"
    path.write_bytes(path.read_bytes()[:-1])
    out = tmp_path / "out"
    result = run("convert", src, out, "--to", "idx")
    assert result.returncode == 1
    assert not out.exists()
    assert list(tmp_path.iterdir()) == [src]


def test_outputs_get_the_usual_file_modes(tmp_path, good):
    """Staged files start owner-only; what lands must be readable like any new file."""
    import os
    src, *_ = good
    old = os.umask(0o022)
    try:
        assert run("idx-to-npz", src, tmp_path / "x.npz").returncode == 0
        assert run("convert", src, tmp_path / "new", "--to", "idx").returncode == 0
    finally:
        os.umask(old)
    assert (tmp_path / "x.npz").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "new").stat().st_mode & 0o777 == 0o755
    assert (tmp_path / "new" / "train-images-idx3-ubyte").stat().st_mode & 0o777 == 0o644
