"""ArrayRecord: round trips, Grain's ArrayRecordDataSource and array_record's reader on
mnistconv's files, random access without decoding everything, options checked by
array_record itself, Python < 3.11 refused in one line, and a corrupt footer or a
truncated file: one line, exit 1, nothing written."""

import os
import sys

import numpy as np
import pytest

import mnistconv
from helpers import DAMAGED, SAMPLE, run, stderr_of

pytest.importorskip("array_record")


def _arrays(ds):
    return {name: (np.concatenate([b.images for b in s.batches()]), np.asarray(s.labels()))
            for name, s in ds.splits.items()}


def _one_error_line(result, code):
    err = stderr_of(result)
    assert result.returncode == code, err
    assert err.count("\n") == 1 and err.startswith("Error: ") and "Traceback" not in err
    return err


@pytest.fixture(scope="module")
def sample():
    return _arrays(mnistconv.read(SAMPLE))


@pytest.fixture
def written(tmp_path):
    result = run("idx-to-arrayrecord", SAMPLE, tmp_path / "m.array_record")
    assert result.returncode == 0, stderr_of(result)
    return tmp_path


def test_round_trip_and_names(written, sample):
    assert sorted(os.listdir(written)) == ["m-test.array_record", "m-train.array_record"]
    for path in (written, written / "m-train.array_record"):
        back = _arrays(mnistconv.read(path))
        assert list(back) == (["train", "test"] if path == written else ["train"])
        for split in back:
            assert np.array_equal(back[split][0], sample[split][0])
            assert np.array_equal(back[split][1], sample[split][1])
    test = mnistconv.read(written / "m-test.array_record")
    assert test.format == "arrayrecord" and list(test.splits) == ["test"]
    glob_read = mnistconv.read(str(written / "m-*.array_record"), "arrayrecord")
    assert list(glob_read.splits) == ["train", "test"]


def test_shards_and_force(tmp_path, sample):
    assert run("idx-to-arrayrecord", SAMPLE, tmp_path / "m.array_record", "--shards",
               "3", "--split", "test").returncode == 0
    assert sorted(os.listdir(tmp_path)) == [f"m.array_record-0000{i}-of-00003"
                                            for i in range(3)]
    back = _arrays(mnistconv.read(tmp_path / "m.array_record-00001-of-00003",
                                  split_name="test"))
    assert np.array_equal(back["test"][0], sample["test"][0])
    result = run("idx-to-arrayrecord", SAMPLE, tmp_path / "m.array_record", "--split",
                 "test")
    assert _one_error_line(result, 2).endswith("already exists; use --force to "
                                               "overwrite it\n")
    assert run("idx-to-arrayrecord", SAMPLE, tmp_path / "m.array_record", "--split",
               "test", "--force").returncode == 0
    assert os.listdir(tmp_path) == ["m.array_record"]


def test_grain_array_record_data_source(written, sample):
    grain = pytest.importorskip("grain")
    tf = pytest.importorskip("tensorflow")
    for split in ("train", "test"):
        source = grain.sources.ArrayRecordDataSource([str(written / f"m-{split}.array_record")])
        images, labels = sample[split]
        assert len(source) == len(labels)
        for i in np.random.default_rng(1).integers(0, len(labels), 30).tolist() + [0]:
            example = tf.train.Example.FromString(source[i])
            feature = example.features.feature
            image = tf.io.decode_png(feature["image"].bytes_list.value[0]).numpy()
            assert np.array_equal(image[..., 0], images[i])
            assert feature["label"].int64_list.value == [labels[i]]


def test_mnistconv_grain_source(written, sample):
    grain = pytest.importorskip("grain")
    import mnistconv.loaders.grain
    data = mnistconv.grain.source(written / "m.array_record", "test")
    assert len(data) == 200
    image, label = data[17]
    assert image.shape == (28, 28, 1) and np.array_equal(image[..., 0], sample["test"][0][17])
    assert label == sample["test"][1][17]
    batch = grain.MapDataset.source(data).batch(50)[1]
    assert np.array_equal(batch[0][..., 0], sample["test"][0][50:100])
    assert np.array_equal(batch[1], sample["test"][1][50:100])


def test_grain_source_over_shards_pickles_and_feeds_grains_workers(tmp_path, sample):
    """The source reads through the guard, file by file of a shard set, and a pickled
    copy (what Grain's worker processes get) opens the files again the same way."""
    import pickle
    grain = pytest.importorskip("grain")
    result = run("idx-to-arrayrecord", SAMPLE, tmp_path / "s.array_record", "--shards", "3")
    assert result.returncode == 0, stderr_of(result)
    data = mnistconv.grain.source(tmp_path / "s.array_record", "train")
    images, labels = sample["train"]
    assert len(data.files) == 3 and len(data) == len(labels)
    copy = pickle.loads(pickle.dumps(data))
    for i in (0, 1, len(labels) // 3, len(labels) // 3 + 1, len(labels) - 1, -1):
        for source in (data, copy):
            image, label = source[i]
            assert np.array_equal(image[..., 0], images[i]) and label == labels[i]
    loader = grain.DataLoader(data_source=data, sampler=grain.samplers.IndexSampler(
        len(data), num_epochs=1, shuffle=False, seed=0), worker_count=2,
        operations=[grain.transforms.Batch(50)])
    got = list(loader)  # each worker batches its own records: the same set, interleaved
    read = sorted(zip(np.concatenate([b[1] for b in got]).tolist(),
                      [x.tobytes() for b in got for x in b[0][..., 0]]))
    assert read == sorted(zip(labels.tolist(), [x.tobytes() for x in images]))


def test_grain_source_refuses_a_shard_linked_out_of_its_folder(tmp_path):
    result = run("idx-to-arrayrecord", SAMPLE, tmp_path / "out" / "m.array_record")
    assert result.returncode == 0, stderr_of(result)
    (tmp_path / "inside").mkdir()
    (tmp_path / "inside" / "m-train.array_record").symlink_to(
        tmp_path / "out" / "m-train.array_record")
    with pytest.raises(mnistconv.MnistconvError, match="outside"):
        mnistconv.grain.source(tmp_path / "inside", "train")


def test_take_reads_only_what_it_is_asked(written, sample, monkeypatch):
    from mnistconv.model import stream
    from mnistconv.formats.arrayrecord import format as fmt
    decoded = []
    real = fmt.decode_record_image
    monkeypatch.setattr(fmt, "decode_record_image", lambda *a: decoded.append(a[1]) or real(*a))
    from mnistconv.codecs import png
    together = png.decode_plain_pngs
    monkeypatch.setattr(png, "decode_plain_pngs", lambda datas, *a: decoded.extend(
        datas) or together(datas, *a))
    split = mnistconv.read(written / "m-train.array_record").splits["train"]
    assert decoded == []  # the shape is read from the first image's header
    picked = stream.select_split(split, per_class=3, shuffle=True, seed=4)
    images = np.concatenate([b.images for b in picked.batches()])
    assert np.array_equal(images, sample["train"][0][picked.positions])
    assert len(decoded) == 30


def test_options_checked_by_array_record(tmp_path):
    for args, message in (
            (["--array-record-options", "foo:1"], "Error: array_record options "
             "'group_size:1,foo:1': Unknown option foo, valid options: default, "
             "group_size, max_parallelism, saturation_delay_ms, transpose, "
             "transpose_bucket_size, uncompressed, brotli, zstd, snappy, window_log, "
             "pad_to_block_boundary; fix --array-record-options\n"),
            (["--array-record-options", "group_size:4"], "Error: --array-record-options "
             "names group_size; use --group-size\n"),
            (["--group-size", "0"], "Error: --group-size must be between 1 and 65536, "
             "not 0; pass a value it accepts (see --help)\n")):
        result = run("idx-to-arrayrecord", SAMPLE, tmp_path / "m.array_record", *args)
        assert _one_error_line(result, 2) == message
        assert os.listdir(tmp_path) == []
    result = run("idx-to-arrayrecord", SAMPLE, tmp_path / "m.array_record",
                 "--group-size", "64", "--array-record-options", "zstd:9")
    assert result.returncode == 0, stderr_of(result)
    from array_record.python.array_record_module import ArrayRecordReader
    reader = ArrayRecordReader(str(tmp_path / "m-train.array_record"))
    assert reader.writer_options_string().startswith("group_size:64,")
    assert "zstd:9" in reader.writer_options_string()


def test_older_python_is_one_line_exit_2(tmp_path, monkeypatch):
    from click.testing import CliRunner
    from mnistconv.cli import cli
    monkeypatch.setattr(sys, "version_info", (3, 10, 12, "final", 0))
    result = CliRunner().invoke(cli, ["idx-to-arrayrecord", str(SAMPLE),
                                       str(tmp_path / "m.array_record")])
    assert result.exit_code == 2
    assert result.output == "Error: ArrayRecord needs Python 3.11 or later (the " \
        "array-record package); this is Python 3.10; run mnistconv on Python 3.11+, or " \
        "write --to tfds with --file-format tfrecord\n"
    assert os.listdir(tmp_path) == []


def _convert_fails(tmp_path, src):
    result = run("arrayrecord-to-npz", src, tmp_path / "out.npz")
    err = _one_error_line(result, 1)
    assert not (tmp_path / "out.npz").exists()
    return err


def test_corrupt_footer(written):
    path = written / "m-train.array_record"
    data = bytearray(path.read_bytes())
    data[-20:] = bytes(20)
    path.write_bytes(bytes(data[:-10]))
    err = _convert_fails(written, path)
    assert err.startswith(f"Error: {path}: not a readable ArrayRecord file (")
    assert err.endswith("); was it cut short or overwritten? write it again\n")


def test_truncated_and_not_array_record(written):
    path = written / "m-test.array_record"
    path.write_bytes(path.read_bytes()[:70000])
    assert _convert_fails(written, path).startswith(
        f"Error: {path}: not a readable ArrayRecord file (")
    other = written / "x.array_record"
    other.write_bytes(b"\x00" * 100)
    assert _convert_fails(written, other) == \
        f"Error: {other}: not a readable ArrayRecord file (ArrayRecord file should be " \
        "at least 64KB big); was it cut short or overwritten? write it again\n"


def test_records_that_are_not_examples(tmp_path):
    from array_record.python.array_record_module import ArrayRecordWriter
    path = tmp_path / "junk.array_record"
    writer = ArrayRecordWriter(str(path), "group_size:1")
    writer.write(b"\xff\xff\xff")
    writer.close()
    assert _convert_fails(tmp_path, path).startswith(
        f"Error: {path}: record 0 (counting from 0): not a tf.train.Example (")


def _png_of_zeros(height, width):
    """A grey PNG of zeros written by hand: 9000 x 9000 is 80 KB of file, 81 MB of
    pixels."""
    from fuzz.bombs import png_of_zeros
    return png_of_zeros(height, width)


def _with_record_1_changed(written, name, count, change, number=1):
    """<name>.array_record: the first `count` records of m-test.array_record, record 1's
    (or record `number`'s) Example features changed by change(feature map)."""
    from array_record.python.array_record_module import ArrayRecordReader, \
        ArrayRecordWriter
    from mnistconv.codecs.example import example_class
    reader = ArrayRecordReader(str(written / "m-test.array_record"))
    records = reader.read(list(range(count)))
    reader.close()
    example = example_class().FromString(records[number])
    change(example.features.feature)
    records[number] = example.SerializeToString()
    out = written / f"{name}.array_record"
    writer = ArrayRecordWriter(str(out), "group_size:1")
    for r in records:
        writer.write(r)
    writer.close()
    return out


@pytest.mark.parametrize("number, size, message", [
    # Found by the fuzz pass's PNG bombs: each decoding thread inflated its 9000 x 9000
    # image (81 MB, twice with Pillow's copy) before comparing sizes (peak 325 MB).
    # (4000: within the default image size limit, which now refuses 9000 from its header.)
    (1, 4000, "record 1 (counting from 0): image is (4000, 4000), the first was (28, 28); " + DAMAGED),
    # And by the long pass: a 6000 x 6000 first image was decoded for its shape when
    # the file was opened, and again with its batch, before record 1 (28 x 28) showed
    # the sizes differ (331 MB). Now every record's size is read from its header while
    # the labels are indexed: nothing is decoded before the mismatch is seen.
    # (400: 6000 x 6000 is now refused by the size limit, and a first image large enough
    # that the file's records could not hold that many is refused by the expansion rule.)
    (0, 400, "record 1 (counting from 0): image is (28, 28), the first was (400, 400); " + DAMAGED)],
    ids=["bomb after the first", "bomb first"])
def test_images_of_another_size_are_refused_before_any_is_decoded(written, monkeypatch,
                                                                  number, size, message):
    from mnistconv import codecs
    bomb = _with_record_1_changed(
        written, "bomb", 3,
        lambda f: f["image"].bytes_list.value.__setitem__(0, _png_of_zeros(size, size)),
        number)
    decoded = []
    real = codecs.decode_image
    monkeypatch.setattr(codecs, "decode_image", lambda data: decoded.append(len(data)) or
                        real(data))
    from mnistconv.errors import FormatError
    with pytest.raises(FormatError) as e:
        mnistconv.read(str(bomb), "arrayrecord")
    assert str(e.value) == f"{bomb}: {message}"
    assert decoded == []
    err = _one_error_line(run("arrayrecord-to-npz", bomb, written / "out.npz"), 1)
    assert err == f"Error: {bomb}: {message}\n"


def test_a_record_far_larger_than_an_image_and_label_is_refused_unparsed(written):
    # Found by the long fuzz pass: records of 40 MB (a one-hot label of 4,000,000
    # values) were read 4096 at a time while indexing, and refusing the first took
    # 550 MB. Now blocks shrink to the largest record seen, and once the first image's
    # size is known a record that no such image and label fill is refused before it is
    # parsed, as the TFRecord reader does.
    junk = b"\0" * (2 << 20)
    big = _with_record_1_changed(
        written, "big", 3, lambda f: f["junk"].bytes_list.value.append(junk))
    size = len(_records(big)[1])
    err = _one_error_line(run("info", big), 1)
    assert err == f"Error: {big}: record 1 (counting from 0): {size:,} bytes, more than a " \
                  f"record of one 28x28 image and its label can hold; {DAMAGED}\n"


def _records(path):
    from array_record.python.array_record_module import ArrayRecordReader
    reader = ArrayRecordReader(str(path))
    try:
        return reader.read(list(range(reader.num_records())))
    finally:
        reader.close()


def test_a_file_name_that_is_not_utf8(written):
    # array_record takes str names it can encode as UTF-8: a name in other bytes (here
    # b"\xff") raised a TypeError from its constructor, a traceback.
    path = written / os.fsdecode(b"m-\xff.array_record")
    os.rename(written / "m-test.array_record", path)
    from mnistconv.errors import FormatError
    with pytest.raises(FormatError) as e:
        mnistconv.read(path, "arrayrecord")
    assert str(e.value) == f"{path}: the file's name is not UTF-8, and array_record " \
                           "opens only UTF-8 names; rename the file"
    err = _one_error_line(run("arrayrecord-to-npz", path, written / "out.npz"), 1)
    assert err.endswith("m-\\udcff.array_record: the file's name is not UTF-8, and "
                        "array_record opens only UTF-8 names; rename the file\n")


def test_a_label_past_the_class_limit(written):
    # Found by the fuzz pass's labels: 2**31 - 1 was read, and `info` then counted the
    # labels in a bincount of 2**31 entries (16 GiB).
    bad = _with_record_1_changed(
        written, "bad", 2,
        lambda f: f["label"].int64_list.value.__setitem__(0, 2 ** 31 - 1))
    err = _one_error_line(run("info", bad), 1)
    assert err == f"Error: {bad}: record 1 (counting from 0): label 2147483647 need " \
                  "2,147,483,648 classes, more than mnistconv's limit of 65,536; check that " \
                  "the labels are class numbers\n"


# A mutated TFDS shard (found by tests/fuzz): Riegeli's signature, then a chunk header
# cut short. Opened as the first ArrayRecordReader of a process under an address-space
# limit (the fuzz harness's RLIMIT_AS, or ulimit -v), array_record's global thread pool
# could not start its threads and the constructor waited on them forever.
CUT_SHARD = bytes.fromhex(
    "83af70d10d884a3f0000000000000000400000000000000091bac23c9287e1a9000000000000"
    "0000e19f13c0e9b1c372730000000000000000000000000000008822ecedfa3c9db379010000"
    "000000005bf585023523bd5672010000000000")

_LIMITED_READ = """
import resource, sys
import numpy as np
import mnistconv
from mnistconv.errors import FormatError
from mnistconv.model.records import ArraySplit, Dataset
images = np.zeros((2, 28, 28), np.uint8)
ds = Dataset("g", {"train": ArraySplit("train", images, np.array([1, 2], np.uint8))})
mnistconv.write(ds, sys.argv[1] + "/ok.array_record", "arrayrecord")
with open("/proc/self/status") as f:
    size = [int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize:")][0]
resource.setrlimit(resource.RLIMIT_AS, (size + (1 << 30), resource.RLIM_INFINITY))
print(mnistconv.read(sys.argv[1] + "/ok.array_record").splits["train"].header.count)
try:
    mnistconv.read(sys.argv[1] + "/cut.array_record", "arrayrecord")
except FormatError as e:
    print(e)
"""


def test_cut_shard_under_address_space_limit_errors_instead_of_hanging(tmp_path):
    import subprocess
    (tmp_path / "cut.array_record").write_bytes(CUT_SHARD)
    result = subprocess.run([sys.executable, "-c", _LIMITED_READ, str(tmp_path)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "2"
    assert lines[1].startswith(f"{tmp_path}/cut.array_record: not a readable ArrayRecord "
                               "file (")
    assert sorted(os.listdir(tmp_path)) == ["cut.array_record", "ok.array_record"]


def test_records_that_are_their_own_chunk_are_indexed_one_at_a_time(tmp_path, monkeypatch):
    """Found by the 10,000-case hostile run: 131 KB of zstd records, some of millions of
    labels, took 406 MB to refuse, read 20 records at a time. Where every record is its
    own chunk (group_size:1, mnistconv's and TFDS's layout) nothing is shared between
    records, so they are read one by one: the file is refused at the first bad record."""
    from mnistconv.codecs.spool import array_record_module
    from mnistconv.formats.arrayrecord import format as arrayrecord
    out = tmp_path / "m.array_record"
    full = mnistconv.read(SAMPLE)
    mnistconv.write(mnistconv.Dataset(full.format, {"test": full.splits["test"]}), out,
                    "arrayrecord")
    spans = []
    real = arrayrecord.ArrayRecordSplit._read

    def recording(self, path, reader, start, end):
        spans.append(end - start)
        return real(self, path, reader, start, end)

    monkeypatch.setattr(arrayrecord.ArrayRecordSplit, "_read", recording)
    [path] = [str(p) for p in tmp_path.glob("*.array_record")]
    assert "group_size:1," in array_record_module().ArrayRecordReader(path) \
        .writer_options_string()
    split = next(iter(mnistconv.read(path).splits.values()))
    assert split.header.count == len(spans) > 1 and set(spans) == {1}


def test_grouped_records_are_indexed_one_chunk_at_a_time(tmp_path, monkeypatch):
    """Found by the 10,000-case hostile run (s9m): an uncompressed file of 4-record
    groups, some records of millions of labels, took 413 MB to refuse at record 5: the
    index pass read records 1..20 at once, so array_record decoded five groups and
    returned their records together. A read now stays inside one group (41 MB)."""
    from mnistconv.formats.arrayrecord import format as arrayrecord
    out = tmp_path / "m.array_record"
    full = mnistconv.read(SAMPLE)
    mnistconv.write(mnistconv.Dataset(full.format, {"test": full.splits["test"]}), out,
                    "arrayrecord", group_size=4)
    spans = []
    real = arrayrecord.ArrayRecordSplit._read

    def recording(self, path, reader, start, end):
        spans.append((start, end))
        return real(self, path, reader, start, end)

    monkeypatch.setattr(arrayrecord.ArrayRecordSplit, "_read", recording)
    [path] = [str(p) for p in tmp_path.glob("*.array_record")]
    split = next(iter(mnistconv.read(path).splits.values()))
    assert split.header.count == full.splits["test"].header.count > 8
    assert [s for s in spans if s[0] // 4 != (s[1] - 1) // 4] == []
    assert sum(e - s for s, e in spans) == split.header.count and max(
        e - s for s, e in spans) == 4
    assert np.array_equal(split.labels(), full.splits["test"].labels())


def test_arrayrecord_and_tfds_share_one_array_record_writer(tmp_path, monkeypatch):
    """Issue 39: the arrayrecord format and TFDS' array_record files are written by one
    spool and one writer (codecs/spool.py), so their records are the same bytes; TFDS'
    planned shard (write_shard) goes through the same two (a shard at a time:
    array_record_shard)."""
    from mnistconv.codecs import spool
    from mnistconv.formats.contract import prepare_write
    calls = []
    for name in ("spool_splits", "array_record_shard"):
        real = getattr(spool, name)
        monkeypatch.setattr(spool, name, lambda *a, _real=real, _name=name:
                            calls.append(_name) or _real(*a))
    ds = mnistconv.read(SAMPLE)
    mnistconv.write(ds, tmp_path / "a" / "m.array_record", "arrayrecord")
    assert calls == ["spool_splits", "array_record_shard"] * 2  # a split at a time
    mnistconv.write(ds, tmp_path / "t", "tfds", file_format="array_record")
    assert calls[4:] == ["spool_splits", "array_record_shard"] * 2
    job = prepare_write("tfds", ds, str(tmp_path / "p"),
                        {"file_format": "array_record", "shards": 1})
    staged = tmp_path / "shard"
    staged.touch()
    job.write_shard(0, str(staged))
    assert calls[8:] == ["spool_splits", "array_record_shard"]
    reader = spool.array_record_module().ArrayRecordReader
    for split in ("train", "test"):
        [tfds_file] = tmp_path.glob(f"t/*/*/*-{split}.array_record-00000-of-00001")
        ours = reader(str(tmp_path / "a" / f"m-{split}.array_record"))
        theirs = reader(str(tfds_file))
        assert ours.read_all() == theirs.read_all() and ours.num_records() > 0
    first = job.targets[0].split
    assert reader(str(staged)).read_all() == reader(
        str(next(tmp_path.glob(f"t/*/*/*-{first}.array_record-*")))).read_all()
