"""WebDataset tar shards: the byte layout (against Python's tarfile and
webdataset.TarWriter), determinism across runs and workers, shard cutting, round trips,
the real clients (webdataset, a torch DataLoader) on the bundled sample and the official
MNIST, and one-line errors for bad input with nothing written."""

import hashlib
import io
import json
import tarfile

import numpy as np
import pytest

import mnistconv
from mnistconv.codecs import tar as wtar
from mnistconv.model.records import ArraySplit, Dataset
from helpers import (
    ACCEPTED, BAD_IMAGE, CUT_SHORT, NOT_THIS_FORMAT, SAMPLE, cli_fails,
    converts_back_to_the_sample, files_in, png, run, sample_arrays, small_digits, stderr_of)


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tree_digests(folder):
    return {p.name: digest(p) for p in sorted(folder.iterdir())}


def make_tar(path, members):
    """A tar written by Python's tarfile from (name, bytes) pairs."""
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as t:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return path


# ---- bytes ----

def test_headers_are_the_bytes_tarfile_writes_for_the_same_members():
    members = [(b"000000.cls", b"7"), (b"000000.json", b'{"index": 3, "class": "7"}'),
               (b"000000.png", bytes(range(256)) * 3)]
    ours = b"".join(part for name, data in members for part in wtar.member(name, data))
    ours += wtar.end_of_archive(len(ours))
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as t:
        for name, data in members:
            info = tarfile.TarInfo(name.decode())
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            t.addfile(info, io.BytesIO(data))
    expected = buffer.getvalue()
    if expected[329:345] != b"\0" * 16:
        pytest.skip("this Python's tarfile writes device numbers for regular files")
    assert ours == expected
    assert len(ours) % wtar.RECORD == 0
    header = ours[:512]
    assert header[257:265] == b"ustar\x0000" and header[136:148] == b"00000000000\0"
    assert header[265:329] == b"\0" * 64 and header[108:124] == b"0000000\0" * 2


def test_a_shard_is_what_webdataset_tarwriter_writes_with_the_same_members(tmp_path):
    wds = pytest.importorskip("webdataset")
    x, y, _, _ = sample_arrays()
    ds = Dataset("t", {"train": ArraySplit("train", x[:300], y[:300])})
    result = mnistconv.write(ds, tmp_path / "m.tar", "webdataset")
    assert [f.path for f in result] == [str(tmp_path / "m-train-000000.tar")]
    ours = (tmp_path / "m-train-000000.tar").read_bytes()
    members = {}
    with tarfile.open(tmp_path / "m-train-000000.tar") as t:
        for info in t:
            members[info.name] = t.extractfile(info).read()
            assert (info.mtime, info.uid, info.gid, info.uname, info.gname, info.mode) == \
                (0, 0, 0, "", "", 0o644)
            assert not info.pax_headers
    buffer = io.BytesIO()
    with wds.TarWriter(buffer, user="", group="", mode=0o644, mtime=0, encoder=False) as w:
        for i in range(300):
            key = f"{i:06d}"
            w.write({"__key__": key, "cls": members[key + ".cls"],
                     "json": members[key + ".json"], "png": members[key + ".png"]})
    assert ours == buffer.getvalue()
    assert members["000042.cls"] == str(y[42]).encode()
    assert json.loads(members["000042.json"]) == {"index": 42, "class": str(y[42])}


def test_same_bytes_on_every_run_and_for_any_number_of_workers(tmp_path):
    x, y, xt, yt = sample_arrays()
    ds = Dataset("t", {"train": ArraySplit("train", x, y), "test": ArraySplit("test", xt, yt)})
    mnistconv.write(ds, tmp_path / "a/m.tar", "webdataset", shard_size="300")
    mnistconv.write(ds, tmp_path / "b/m.tar", "webdataset", shard_size="300")
    mnistconv.write(ds, tmp_path / "c/m.tar", "webdataset", shard_size="300", workers=2)
    runs = [tree_digests(tmp_path / d) for d in "abc"]
    assert runs[0] == runs[1] == runs[2]
    assert list(runs[0]) == [f"m-test-00000{i}.tar" for i in range(1)] + \
        [f"m-train-00000{i}.tar" for i in range(4)]


def test_cli_one_and_two_worker_processes_give_the_same_shards(tmp_path):
    for workers in ("1", "2"):
        r = run("idx-to-webdataset", SAMPLE, tmp_path / workers / "mnist.tar",
                "--shard-size", "400", "--workers", workers, "-q")
        assert r.returncode == 0, stderr_of(r)
    assert tree_digests(tmp_path / "1") == tree_digests(tmp_path / "2")
    assert files_in(tmp_path / "1") == ["mnist-test-000000.tar", "mnist-train-000000.tar",
                                        "mnist-train-000001.tar", "mnist-train-000002.tar"]


def test_shard_size_in_bytes_bounds_every_file(tmp_path):
    x, y, _, _ = sample_arrays()
    ds = Dataset("t", {"train": ArraySplit("train", x, y)})
    result = mnistconv.write(ds, tmp_path / "m.tar", "webdataset", shard_size="100kB")
    sizes = [f.bytes for f in result]
    assert len(sizes) > 5 and max(sizes) <= 100_000
    assert all(s % wtar.RECORD == 0 for s in sizes)
    back = mnistconv.read(tmp_path, "webdataset").splits["train"]
    assert np.array_equal(back.labels(), y)
    assert np.array_equal(np.concatenate([b.images for b in back.batches()]), x)


def test_force_replaces_a_whole_shard_set_and_without_force_nothing_changes(tmp_path):
    x, y, _, _ = sample_arrays()
    ds = Dataset("t", {"train": ArraySplit("train", x, y)})
    mnistconv.write(ds, tmp_path / "m.tar", "webdataset", shard_size="100")
    before = tree_digests(tmp_path)
    with pytest.raises(mnistconv.UsageError, match="exists"):
        mnistconv.write(ds, tmp_path / "m.tar", "webdataset", shard_size="500")
    assert tree_digests(tmp_path) == before
    mnistconv.write(ds, tmp_path / "m.tar", "webdataset", shard_size="500", force=True)
    assert files_in(tmp_path) == ["m-train-000000.tar", "m-train-000001.tar"]


# ---- round trips and readers ----

def test_idx_to_webdataset_to_idx_gives_the_same_files(tmp_path):
    r = run("convert", SAMPLE, tmp_path / "w" / "mnist.tar", "--to", "webdataset",
            "--shard-size", "250", "-q")
    assert r.returncode == 0, stderr_of(r)
    converts_back_to_the_sample(tmp_path / "w", tmp_path / "back")


def test_one_shard_reads_its_whole_set_and_original_indices_survive(tmp_path):
    x, y, _, _ = sample_arrays()
    picked = np.array([5, 3, 999, 0, 17])
    ds = Dataset("t", {"train": ArraySplit("train", x[picked], y[picked], picked)})
    mnistconv.write(ds, tmp_path / "m.tar", "webdataset", shard_size="2")
    back = mnistconv.read(tmp_path / "m-train-000001.tar").splits["train"]
    assert back.indices().tolist() == picked.tolist()
    # The name the set was written under reads it too.
    assert mnistconv.read(tmp_path / "m.tar", "webdataset").splits["train"].header.count == 5
    assert np.array_equal(np.concatenate([b.images for b in back.batches()]), x[picked])


def test_jpeg_members_and_a_foreign_tar_are_read(tmp_path):
    x, y, _, _ = sample_arrays()
    ds = Dataset("t", {"train": ArraySplit("train", x[:20], y[:20])})
    mnistconv.write(ds, tmp_path / "j.tar", "webdataset", image_format="jpeg")
    with tarfile.open(tmp_path / "j-train-000000.tar") as t:
        assert t.getnames()[:3] == ["000000.cls", "000000.jpg", "000000.json"]
    back = mnistconv.read(tmp_path / "j-train-000000.tar").splits["train"]
    assert np.array_equal(back.labels(), y[:20])
    # Someone else's tar: other members ignored, paths in names, no .json.
    (tmp_path / "other").mkdir()
    foreign = make_tar(tmp_path / "other" / "shard.tar",
                       [("a/s1.png", png(x[0])), ("a/s1.cls", b" 4\n"), ("a/s1.txt", b"hi"),
                        ("a/s2.cls", b"9"), ("a/s2.png", png(x[1]))])
    back = mnistconv.read(foreign, "webdataset")
    split = back.splits["shard"]
    assert split.labels().tolist() == [4, 9] and split.indices().tolist() == [0, 1]


# ---- real clients ----

def check_with_webdataset_and_dataloader(folder, images, labels, split="train"):
    """webdataset.WebDataset(shards).decode("l") under a torch DataLoader yields every
    sample, in order, with its pixels and label."""
    wds = pytest.importorskip("webdataset")
    torch = pytest.importorskip("torch")
    shards = sorted(str(p) for p in folder.glob(f"*-{split}-*.tar"))
    dataset = wds.WebDataset(shards, shardshuffle=False).decode("l") \
        .to_tuple("__key__", "png", "cls")
    loader = torch.utils.data.DataLoader(dataset, batch_size=1000, num_workers=0)
    keys, pixels, classes = [], [], []
    for batch_keys, batch_images, batch_labels in loader:
        keys += batch_keys
        # decode("l"): grayscale floats in [0, 1], pixel / 255.
        pixels.append((batch_images * 255).round().to(torch.uint8).numpy())
        classes.append(batch_labels.numpy())
    assert keys == [f"{i:06d}" for i in range(len(labels))]
    assert np.array_equal(np.concatenate(classes), labels)
    assert np.array_equal(np.concatenate(pixels), images)


def test_webdataset_and_a_torch_dataloader_read_the_bundled_sample(tmp_path):
    x, y, xt, yt = sample_arrays()
    r = run("convert", SAMPLE, tmp_path / "mnist.tar", "--to", "webdataset",
            "--shard-size", "300", "-q")
    assert r.returncode == 0, stderr_of(r)
    check_with_webdataset_and_dataloader(tmp_path, x, y)
    check_with_webdataset_and_dataloader(tmp_path, xt, yt, "test")


def test_webdataset_and_a_torch_dataloader_read_the_official_mnist(tmp_path, official_dir,
                                                                   official_arrays):
    r = run("idx-to-webdataset", official_dir, tmp_path / "mnist.tar", "--shard-size",
            "10000", "-q")
    assert r.returncode == 0, stderr_of(r)
    assert len(list(tmp_path.glob("mnist-train-*.tar"))) == 6
    check_with_webdataset_and_dataloader(tmp_path, official_arrays["x_train"],
                                         official_arrays["y_train"])
    check_with_webdataset_and_dataloader(tmp_path, official_arrays["x_test"],
                                         official_arrays["y_test"], "test")


# ---- bad input: one line, exit 1, nothing written ----

def convert_fails(tmp_path, source, *extra):
    return cli_fails(tmp_path, "convert", source, tmp_path / "out.npz", "--from",
                     "webdataset", *extra)


@pytest.fixture
def images():
    return small_digits(4)[0]


def test_a_member_that_is_not_an_image(tmp_path, images):
    bad = make_tar(tmp_path / "d-train-000000.tar",
                   [("000000.cls", b"1"), ("000000.png", png(images[0])),
                    ("000001.cls", b"2"), ("000001.png", b"hello, not a picture")])
    line = convert_fails(tmp_path, bad)
    assert line == f"Error: {bad}: member '000001.png' is not an image (PNG or JPEG); {BAD_IMAGE}"


def test_a_png_that_does_not_decode(tmp_path, images):
    broken = png(images[1])[:40] + b"\0" * 30  # its header says 28x28; the data is gone
    bad = make_tar(tmp_path / "d-train-000000.tar",
                   [("000000.cls", b"1"), ("000000.png", png(images[0])),
                    ("000001.cls", b"2"), ("000001.png", broken)])
    line = convert_fails(tmp_path, bad)
    assert line.startswith(f"Error: {bad}: member '000001.png' does not decode as an "
                           "image (")


def test_a_cls_that_is_not_an_integer(tmp_path, images):
    bad = make_tar(tmp_path / "d-train-000000.tar",
                   [("000000.cls", b"seven"), ("000000.png", png(images[0]))])
    line = convert_fails(tmp_path, bad)
    assert line == (f"Error: {bad}: member '000000.cls' holds 'seven', not a class index; "
                    "a .cls holds a number such as 7")


def test_a_json_nested_past_the_recursion_limit_is_not_json(tmp_path, images):
    # 10,000 '[' fit a .json member's 64 KiB; json.loads raises RecursionError on them.
    bad = make_tar(tmp_path / "d-train-000000.tar",
                   [("000000.cls", b"1"), ("000000.json", b"[" * 10000),
                    ("000000.png", png(images[0]))])
    line = convert_fails(tmp_path, bad)
    assert line == f"Error: {bad}: member '000000.json' is not JSON; the file is damaged: download, copy or convert it again"


def test_a_json_class_name_that_is_not_utf8(tmp_path, images):
    # JSON's "\ud800" escape decodes to a lone surrogate, which no writer can encode.
    bad = make_tar(tmp_path / "d-train-000000.tar",
                   [("000000.cls", b"1"), ("000000.json", b'{"class": "\\ud800"}'),
                    ("000000.png", png(images[0]))])
    line = convert_fails(tmp_path, bad)
    assert line == (f"Error: {bad}: member '000000.json': class name '\\ud800' is not "
                    "UTF-8 text; write the class names as UTF-8 text")


def test_a_png_of_the_wrong_size(tmp_path, images):
    bad = make_tar(tmp_path / "d-train-000000.tar",
                   [("000000.cls", b"1"), ("000000.png", png(images[0])),
                    ("000001.cls", b"1"), ("000001.png", png(np.zeros((28, 29))))])
    line = convert_fails(tmp_path, bad)
    assert line == (f"Error: {bad}: member '000001.png' is a 28x29 image, the split's "
                    "images are 28x28; every image of a split has one size")


def test_a_missing_split_shard_or_label(tmp_path, images):
    folder = tmp_path / "shards"
    folder.mkdir()
    for n in (0, 2):
        make_tar(folder / f"m-train-00000{n}.tar", [("000000.cls", b"1"),
                                                    ("000000.png", png(images[0]))])
    line = convert_fails(tmp_path, folder)
    assert line == (f"Error: {folder}: shard 000001 of split train is missing; a shard "
                    "set is numbered from 000000 without gaps")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert convert_fails(tmp_path, empty) == f"Error: {empty}: holds no .tar shards; check " \
                                             "the path: WebDataset shards end in .tar"
    bad = make_tar(tmp_path / "n-train-000000.tar", [("000000.png", png(images[0]))])
    assert convert_fails(tmp_path, bad) == \
        f"Error: {bad}: sample '000000' has no .cls (class index); each sample needs an " \
        "image (.png or .jpg) and a .cls"
    r = run("convert", SAMPLE, tmp_path / "o.tar", "--to", "webdataset", "--split",
            "validation")
    assert r.returncode != 0 and not list(tmp_path.glob("o-*"))


def test_not_a_tar_and_a_link_member(tmp_path, images):
    junk = tmp_path / "junk-train-000000.tar"
    junk.write_bytes(b"x" * 1024)
    assert convert_fails(tmp_path, junk) == \
        f"Error: {junk}: not a tar archive: bad header checksum at byte 0; {NOT_THIS_FORMAT}"
    link = tmp_path / "l-train-000000.tar"
    with tarfile.open(link, "w", format=tarfile.USTAR_FORMAT) as t:
        info = tarfile.TarInfo("000000.png")
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
        t.addfile(info)
    assert convert_fails(tmp_path, link) == (
        f"Error: {link}: member '000000.png' is a symbolic link, not a file; WebDataset "
        "members are regular files")


def test_bad_shard_size_is_a_usage_error(tmp_path):
    r = run("convert", SAMPLE, tmp_path / "o.tar", "--to", "webdataset", "--shard-size",
            "lots")
    assert r.returncode == 2
    assert stderr_of(r).strip() == ("Error: --shard-size must be a number of samples "
                                    "(10000) or of bytes with a unit (100MB, 1GiB; MB = "
                                    "1,000,000 bytes, MiB = 1,048,576), not "
                                    f"'lots'; {ACCEPTED}")
    assert not list(tmp_path.iterdir())


def tar_cuts(images):
    """A whole two-sample shard as tarfile writes it, and where its parts end."""
    whole = io.BytesIO()
    members = [("000000.cls", b"1"), ("000000.png", png(images[0])),
               ("000001.cls", b"2"), ("000001.png", png(images[1]))]
    with tarfile.open(fileobj=whole, mode="w", format=tarfile.USTAR_FORMAT) as t:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    last = sum(512 + -(-len(d) // 512) * 512 for _, d in members)  # end of the members
    size = len(members[-1][1])
    return whole.getvalue(), last, last - -(-size // 512) * 512 + size


def test_a_tar_cut_inside_a_member_is_refused_as_tarfile_refuses_it(tmp_path, images):
    wds = pytest.importorskip("webdataset")
    whole, last, data_end = tar_cuts(images)
    for cut in (data_end - 1, last - 1):  # inside the last member's data, its padding
        with pytest.raises(tarfile.ReadError, match="unexpected end of data"):
            with tarfile.open(fileobj=io.BytesIO(whole[:cut])) as t:
                [t.extractfile(m).read() for m in t]
        bad = tmp_path / "c-train-000000.tar"
        bad.write_bytes(whole[:cut])
        with pytest.raises(tarfile.ReadError, match="unexpected end of data"):
            list(wds.WebDataset(f"file:{bad}", shardshuffle=False, empty_check=False))
        assert convert_fails(tmp_path, bad) == (
            f"Error: {bad}: truncated tar archive: member '000001.png' and its padding "
            f"end at byte {last:,}, the file at {cut:,}; {CUT_SHORT}")


def test_a_tar_cut_at_or_inside_its_end_blocks_is_refused(tmp_path, images):
    """Stricter than tarfile and webdataset, which read these: every tar writer ends
    with zero blocks in whole 512-byte blocks, so a file without them was cut."""
    wds = pytest.importorskip("webdataset")
    whole, last, _ = tar_cuts(images)
    bad = tmp_path / "c-train-000000.tar"
    with tarfile.open(fileobj=io.BytesIO(whole[:last])) as t:
        assert len(t.getmembers()) == 4
    bad.write_bytes(whole[:last])
    assert [s["cls"] for s in wds.WebDataset(f"file:{bad}", shardshuffle=False)] == \
        [b"1", b"2"]
    assert convert_fails(tmp_path, bad) == (
        f"Error: {bad}: tar archive ends at byte {last:,} without its end-of-archive "
        f"zero blocks (or its writer did not finish); {CUT_SHORT}")
    for cut in (last + 1023, len(whole) - 1):  # in the second zero block, the record
        bad.write_bytes(whole[:cut])
        assert convert_fails(tmp_path, bad) == (
            f"Error: {bad}: is {cut:,} bytes, not a whole number of 512-byte tar blocks; "
            f"{CUT_SHORT}")


def test_a_tar_with_one_zero_block_or_no_record_padding_is_read(tmp_path, images):
    """GNU tar reads "a lone zero block"; Go's archive/tar writes no record padding."""
    whole, last, _ = tar_cuts(images)
    for end in (last + 512, last + 1024):
        shard = tmp_path / f"e{end}-train-000000.tar"
        shard.write_bytes(whole[:end])
        r = run("convert", shard, tmp_path / f"o{end}.npz", "--from", "webdataset", "-q")
        assert r.returncode == 0, stderr_of(r)
        with np.load(tmp_path / f"o{end}.npz") as z:
            np.testing.assert_array_equal(z["x_train"], images[:2])
            np.testing.assert_array_equal(z["y_train"], [1, 2])


def test_header_checksums_as_tar_writers_sum_them():
    """POSIX sums a header's bytes unsigned; some old writers summed signed chars (each
    byte over 127 counts 256 less). Both are tar headers, as for Python's tarfile; any
    other sum is not."""
    name = "ünïcödé-000000.png".encode()  # bytes over 127 in the header
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as t:
        info = tarfile.TarInfo(name.decode())
        info.size = 3
        t.addfile(info, io.BytesIO(b"abc"))
    header = bytearray(buffer.getvalue()[:512])
    unsigned = int(header[148:154], 8)
    high = sum(1 for b in header if b > 127)
    assert high == len(name) - len(name.decode().encode("ascii", "ignore")) and high > 0

    def with_sum(value):
        block = bytearray(header)
        block[148:156] = b"%06o\0 " % value
        return bytes(block)

    signed = unsigned - 256 * high
    for value in (unsigned, signed):
        assert wtar.looks_like_tar(with_sum(value))
        assert tarfile.TarInfo.frombuf(with_sum(value), "utf-8", "strict").size == 3
    for value in (unsigned + 1, signed - 1, unsigned - 256):
        assert not wtar.looks_like_tar(with_sum(value))
        with pytest.raises(tarfile.InvalidHeaderError):
            tarfile.TarInfo.frombuf(with_sum(value), "utf-8", "strict")
