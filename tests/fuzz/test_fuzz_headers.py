"""Headers built from scratch rather than mutated: huge and zero dimensions, counts that
disagree between images and labels, element types that do not exist, payloads shorter
or longer than declared, each raw or gzip'd. Where mutation of a real file rarely lands
on a consistent-but-absurd header, these generate them directly.
"""

import gzip
import io
import struct
import warnings
import zipfile

import pytest
from hypothesis import given, strategies as st

from .harness import Bounded, Workspace, check_case, read_everything
from .mutations import INTERESTING
from .test_fuzz_readers import fuzz_settings

SIZES = st.one_of(st.sampled_from([v for v in INTERESTING if v < 1 << 32]),
                  st.integers(0, 40), st.integers(0, (1 << 32) - 1))


def idx_file(code, dims, payload_len, fill):
    header = bytes([0, 0, code, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims)
    return header + bytes([fill]) * payload_len


@st.composite
def idx_files(draw, kind):
    """An IDX file whose header may disagree with its payload in every way."""
    code = draw(st.one_of(st.sampled_from([0x08, 0x09, 0x0B, 0x0C, 0x0D, 0x0E]),
                          st.integers(0, 255)))
    ndim = draw(st.integers(0, 4)) if kind == "images" else draw(st.integers(0, 2))
    dims = draw(st.lists(SIZES, min_size=ndim, max_size=ndim))
    itemsize = {0x0B: 2, 0x0C: 4, 0x0D: 4, 0x0E: 8}.get(code, 1)
    declared = itemsize
    for d in dims:
        declared *= d
    exact = declared if declared <= 1 << 16 else 0
    payload = draw(st.one_of(st.just(exact), st.integers(0, 4096),
                             st.integers(max(0, exact - 3), exact + 3)))
    data = idx_file(code, dims, payload, draw(st.integers(0, 255)))
    return gzip.compress(data, 1, mtime=0) if draw(st.booleans()) else data


@given(images=idx_files("images"), labels=idx_files("labels"),
       test_images=st.none() | idx_files("images"), test_labels=st.none() | idx_files("labels"),
       single_file=st.booleans(), cli=st.booleans())
def _idx_case(images, labels, test_images, test_labels, single_file, cli):
    with Workspace() as work:
        (work / "train-images-idx3-ubyte").write_bytes(images)
        (work / "train-labels-idx1-ubyte").write_bytes(labels)
        if test_images is not None:
            (work / "t10k-images-idx3-ubyte").write_bytes(test_images)
        if test_labels is not None:
            (work / "t10k-labels-idx1-ubyte").write_bytes(test_labels)
        target = work / "train-images-idx3-ubyte" if single_file else work
        check_case(target, "idx", cli)


def test_idx_headers(fuzz_cases):
    fuzz_settings(fuzz_cases)(_idx_case)()


DESCRS = ["|u1", "<u2", ">u2", "<i4", ">i8", "<f4", ">f8", "|b1", "|i1", "<c8", "|O",
          "<U4", "|S3", "|V8", "<M8[s]", "|V0", "<f2"]
SHAPES = st.one_of(st.tuples(), st.lists(st.one_of(SIZES, st.integers(-3, -1)),
                                        min_size=1, max_size=4).map(tuple))


@st.composite
def npy_members(draw):
    """A .npy member: header fields drawn independently of the payload's length."""
    descr = draw(st.one_of(st.sampled_from(DESCRS),
                           st.just([("a", "<i4"), ("b", "|u1")])))
    shape = draw(SHAPES)
    fortran = draw(st.booleans())
    text = f"{{'descr': {descr!r}, 'fortran_order': {fortran}, 'shape': {shape!r}, }}"
    version = draw(st.sampled_from([(1, 0), (2, 0), (3, 0)]))
    length_bytes = 2 if version == (1, 0) else 4
    pad = -(10 + length_bytes - 2 + len(text) + 1) % 64
    header = (text + " " * pad + "\n").encode("latin1")
    prefix = b"\x93NUMPY" + bytes(version) + len(header).to_bytes(length_bytes, "little")
    payload = draw(st.integers(0, 6000))
    return prefix + header + bytes(payload)


@given(members=st.lists(st.tuples(st.sampled_from(["x_train", "y_train", "x_test", "y_test",
                                                   "x_", "y_", "notes"]), npy_members()),
                        min_size=1, max_size=5),
       deflate=st.booleans(), cli=st.booleans())
def _npz_case(members, deflate, cli):
    with Workspace() as work:
        target = work / "case.npz"
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED if deflate
                             else zipfile.ZIP_STORED) as z, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # duplicate member names are wanted here
            for name, content in members:
                z.writestr(name + ".npy", content)
        target.write_bytes(buffer.getvalue())
        check_case(target, "npz", cli)


def test_npz_headers(fuzz_cases):
    fuzz_settings(fuzz_cases)(_npz_case)()


@pytest.mark.parametrize("declared", [10, 1 << 20, (1 << 32) - 1])
def test_zip_member_size_lies(declared, tmp_path):
    """A stored member whose central-directory size claims more (or less) than the bytes
    it has: the reader must not size an allocation from the claim."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        z.writestr("x_train.npy", _npy("|u1", (4, 28, 28), 4 * 784))
        z.writestr("y_train.npy", _npy("|u1", (4,), 4))
    data = bytearray(buffer.getvalue())
    # Patch y_train's uncompressed size in its central-directory entry.
    central = data.rfind(b"PK\x01\x02")
    struct.pack_into("<I", data, central + 24, declared)
    target = tmp_path / "lie.npz"
    target.write_bytes(bytes(data))
    kind, message = check_case(target, "npz")
    assert kind == "error"


def _npy(descr, shape, payload):
    text = f"{{'descr': {descr!r}, 'fortran_order': False, 'shape': {shape!r}, }}"
    pad = -(10 + len(text) + 1) % 64
    header = (text + " " * pad + "\n").encode("latin1")
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + bytes(payload)


def _deflated_npz(path, x_shape, x_payload_bytes, y_count):
    """x_train deflated from x_payload_bytes of zeros (about 1000:1), y_train plain."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        with z.open("x_train.npy", "w", force_zip64=True) as f:
            f.write(_npy("|u1", x_shape, 0))
            block = bytes(1 << 20)
            left = x_payload_bytes
            while left:
                f.write(block[:min(left, len(block))])
                left -= min(left, len(block))
        z.writestr("y_train.npy", _npy("|u1", (y_count,), y_count))


def test_zip_bomb_member_inconsistent_with_its_header(tmp_path):
    """256 MiB of zeros behind a header declaring 3 images: refused from the sizes alone,
    before anything is decompressed."""
    target = tmp_path / "bomb.npz"
    _deflated_npz(target, (3, 28, 28), 256 << 20, 3)
    assert target.stat().st_size < 1 << 20
    kind, message = check_case(target, "npz")
    assert kind == "error" and "the member holds 268435456" in message


def test_zip_bomb_member_consistent_with_its_header(tmp_path):
    """A 300 KB npz whose header honestly declares 342000 images (256 MiB of zeros): the
    data is there, so it reads, batch by batch, within 160 MiB of address space (less
    than the data: holding it whole would fail)."""
    target = tmp_path / "bomb.npz"
    count = (256 << 20) // 784
    _deflated_npz(target, (count, 28, 28), count * 784, count)
    assert target.stat().st_size < 1 << 20
    with Bounded(budget=160 << 20):
        assert read_everything(str(target), "npz", gather=False) == count


@pytest.mark.parametrize("member", ["x_train", "y_train"])
def test_pickled_object_member(member, tmp_path):
    """An object array (np.save pickles it) is refused with one exact line, before any
    unpickling: loading it would run whatever code the file's author chose."""
    import numpy as np
    from .runner import new_work, run_cli
    work = new_work(tmp_path, "case")
    target = tmp_path / "case" / "in" / "objects.npz"
    arrays = {"x_train": np.zeros((2, 28, 28), np.uint8), "y_train": np.zeros(2, np.uint8)}
    arrays[member] = np.array([{"a": 1}, None], dtype=object) if member == "y_train" else \
        np.empty((2, 28, 28), dtype=object)
    np.savez(target, **arrays)
    args = ["convert", str(target), f"{work}/out/converted.npz", "--quiet"]
    code, out, err, problems = run_cli(args, work, expect_file=target, expect_code=(1,))
    assert problems == []
    assert err == (f"Error: {target}: member {member}.npy holds Python objects (pickled); "
                   "mnistconv reads only plain numeric arrays\n")
    assert out == ""
