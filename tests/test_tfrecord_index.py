"""The TFRecord reader's fast paths give what the checked paths give: the block scanner
(framing.iter_record_blocks) the records and errors of iter_records, and the index
pass's templates (templates.Templates) the labels, indices and pixels of a full parse,
never hiding a record that a parse would refuse."""

import gzip
import os

import numpy as np
import pytest

import mnistconv
from mnistconv import ArraySplit, Dataset
from mnistconv.errors import FormatError
from mnistconv.formats import tfrecord
from mnistconv.codecs import framing
from mnistconv.codecs.example import example_class
from helpers import DAMAGED, tfrecord_example as example, tfrecord_frame as frame


def onehot(label):
    return [int(i == label) for i in range(10)]


def raw_records(n, seed=0):
    """n raw 28 x 28 records with one-hot labels (mnistconv's raw layout)."""
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, (n, 28, 28), np.uint8)
    labels = rng.integers(0, 10, n)
    records = [example(image=im.tobytes(), label=onehot(int(y)), height=28, width=28)
               for im, y in zip(images, labels)]
    return records, images, labels


def blocks_as_records(path, compression="auto"):
    out = []
    for block, starts, sizes, first, _ in framing.iter_record_blocks(path, compression):
        for k, (s, n) in enumerate(zip(starts, sizes)):
            out.append((first + k, bytes(block[s:s + n])))
    return out


def only_split(path):
    (split,) = mnistconv.read(path).splits.values()
    return split


def error_of(function):
    with pytest.raises(FormatError) as e:
        function()
    return str(e.value)


@pytest.mark.parametrize("compressed", [False, True])
def test_blocks_hold_the_records_iter_records_yields(tmp_path, compressed):
    # Small records over several 4 MB blocks, and one record larger than a block.
    records = [bytes([i % 251]) * (i % 3000) for i in range(6000)]
    records.insert(4000, b"\x07" * (5 << 20))
    data = frame(records)
    path = tmp_path / "r.tfrecord"
    path.write_bytes(gzip.compress(data, mtime=0) if compressed else data)
    expected = [(number, bytes(d)) for number, _, d in tfrecord.iter_records(str(path))]
    assert len(expected) == len(records)
    assert blocks_as_records(str(path)) == expected


@pytest.mark.parametrize("damage", ["data crc", "header crc", "truncated"])
def test_a_bad_record_deep_in_a_block_is_named_as_iter_records_names_it(tmp_path, damage):
    records = [example(image=bytes([i % 256]) * 784, label=onehot(i % 10), height=28,
                       width=28) for i in range(9000)]
    data = bytearray(frame(records))
    offset = sum(16 + len(r) for r in records[:7000])
    if damage == "data crc":
        data[offset + 12 + 100] ^= 1
    elif damage == "header crc":
        data[offset + 8] ^= 1
    else:
        del data[offset + 200:]
    path = tmp_path / "bad.tfrecord"
    path.write_bytes(bytes(data))
    expected = error_of(lambda: list(tfrecord.iter_records(str(path))))
    assert "record 7000 (counting from 0, at byte " in expected
    assert error_of(lambda: blocks_as_records(str(path))) == expected
    assert error_of(lambda: mnistconv.read(str(path))) == expected


def test_templates_give_what_a_parse_gives(tmp_path):
    records, images, labels = raw_records(6000)
    path = tmp_path / "raw.tfrecord"
    path.write_bytes(frame(records))
    split = only_split(str(path))
    assert split.labels().tolist() == labels.tolist()
    assert split.indices().tolist() == list(range(6000))
    got = np.concatenate([b.images for b in split.batches(1000)])
    assert np.array_equal(got, images)


@pytest.mark.parametrize("preset", ["recipe", "tfds", "slim"])
def test_every_preset_with_index_reads_back_over_several_blocks(tmp_path, preset):
    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, (5000, 28, 28), np.uint8)
    images[:, :, :14] //= 8  # compressible halves: images of many lengths
    labels = rng.integers(0, 10, 5000).astype(np.uint8)
    indices = rng.permutation(5000) * 3
    split = ArraySplit("train", images, labels, indices=indices)
    path = tmp_path / "x.tfrecord"
    mnistconv.write(Dataset("t", {"train": split}), str(path), "tfrecord", preset=preset,
                    image_format="png", with_index=True)
    back = only_split(str(path))
    assert back.labels().tolist() == labels.tolist()
    assert back.indices().tolist() == indices.tolist()
    assert np.array_equal(np.concatenate([b.images for b in back.batches()]), images)


@pytest.mark.parametrize("bad, message", [
    (dict(label=[1, 1] + [0] * 8), "record 3000 (counting from 0): label is not one-hot "
                                   "([1, 1, 0, 0, 0, 0, 0, 0, 0, 0]); " + DAMAGED),
    (dict(label=onehot(3)[:9]), "record 3000 (counting from 0): one-hot label of 9 "
                                "values, the first record's has 10; " + DAMAGED),
    (dict(label=onehot(3), height=29), "record 3000 (counting from 0): raw image of 784 "
                                        "bytes, expected 29 x 28; " + DAMAGED),
])
def test_a_record_like_the_learnt_ones_but_wrong_after_its_image_is_refused(
        tmp_path, bad, message):
    records, _, _ = raw_records(5000)
    image = bytes(range(256)) * 3 + bytes(16)  # 784 bytes, as every record's
    records[3000] = example(**{"image": image, "height": 28, "width": 28, **bad})
    path = tmp_path / "bad.tfrecord"
    path.write_bytes(frame(records))
    assert error_of(lambda: mnistconv.read(str(path))) == f"{path}: {message}"


def test_an_image_of_another_kind_at_a_learnt_place_is_parsed_not_assumed(tmp_path):
    # Raw records (height and width say 28 x 28) learn a template whose image is raw;
    # a record whose raw pixels happen to start like a JPEG or PNG is still raw.
    records, images, labels = raw_records(3000)
    for k, magic in ((1500, b"\xff\xd8\xff"), (2500, b"\x89PNG\r\n\x1a\n")):
        images[k].reshape(-1)[:len(magic)] = np.frombuffer(magic, np.uint8)
        records[k] = example(image=images[k].tobytes(), label=onehot(int(labels[k])),
                             height=28, width=28)
    path = tmp_path / "raw.tfrecord"
    path.write_bytes(frame(records))
    split = only_split(str(path))
    assert np.array_equal(np.concatenate([b.images for b in split.batches()]), images)
    assert split.labels().tolist() == labels.tolist()


def test_records_of_one_layout_are_mostly_not_parsed(tmp_path, monkeypatch):
    # The shortcut is taken: 6000 raw records of 10 labels need about 10 parses.
    from mnistconv.formats.tfrecord import reader
    records, _, _ = raw_records(6000)
    path = tmp_path / "raw.tfrecord"
    path.write_bytes(frame(records))
    parsed = []
    original = reader.TFRecordSplit._parse
    monkeypatch.setattr(reader.TFRecordSplit, "_parse",
                        lambda self, *a: parsed.append(a[1]) or original(self, *a))
    only_split(str(path))
    assert len(parsed) <= 20


@pytest.mark.parametrize("change", ["rewritten", "cut short"])
def test_a_file_changed_after_its_index_pass_is_an_error_not_other_images(tmp_path, change):
    records, _, _ = raw_records(3000)
    path = tmp_path / "raw.tfrecord"
    path.write_bytes(frame(records))
    split = only_split(str(path))
    data, before = path.read_bytes(), path.stat().st_mtime_ns
    if change == "rewritten":  # other pixels, every CRC right, the same size
        records2, _, _ = raw_records(3000, seed=1)
        path.write_bytes(frame(records2))
        assert len(path.read_bytes()) == len(data)
    else:
        path.write_bytes(data[:len(data) // 2])
    # A later time, as a rewrite gets on any file system (some count in seconds).
    os.utime(path, ns=(before + 10**9, before + 10**9))
    assert error_of(lambda: list(split.batches(500))) == \
        f"{path}: changed while reading: modified after it was indexed; read it again once " \
        "nothing writes to it"


def test_read_ranges_gives_the_bytes_of_each_range(tmp_path):
    data = bytes(range(256)) * 40000  # 10 MB: ranges across blocks, one over several
    path = tmp_path / "r"
    path.write_bytes(data)
    begins = np.array([0, 5, 4 << 20, (4 << 20) + 10, 9 << 20], np.int64)
    ends = np.array([3, 4 << 20, (4 << 20) + 10, 9 << 20, len(data)], np.int64)
    got = [piece for pieces in framing.read_ranges(str(path), "none", begins, ends)
           for piece in pieces]
    assert got == [data[b:e] for b, e in zip(begins, ends)]
    with pytest.raises(FormatError, match="shorter than when it was indexed"):
        list(framing.read_ranges(str(path), "none", begins, ends + 1))


def test_jpeg_records_of_many_lengths_index_as_a_parse_does(tmp_path, monkeypatch):
    # The writer's default (JPEG, one-hot): a few hundred image lengths, ten labels. A
    # record of a length and label already parsed is indexed from that parse's
    # template; the result is what a parse gives.
    from mnistconv.codecs import decode_jpeg
    from mnistconv.formats.tfrecord import reader
    rng = np.random.default_rng(2)
    images = rng.integers(0, 256, (4000, 28, 28), np.uint8)
    images[:, rng.integers(4, 24, 4000)] //= 32
    labels = rng.integers(0, 10, 4000).astype(np.uint8)
    path = tmp_path / "j.tfrecord"
    mnistconv.write(Dataset("t", {"train": ArraySplit("train", images, labels)}),
                    str(path), "tfrecord")
    parsed = []
    original = reader.TFRecordSplit._parse
    monkeypatch.setattr(reader.TFRecordSplit, "_parse",
                        lambda self, *a: parsed.append(a[1]) or original(self, *a))
    split = only_split(str(path))
    Example = example_class()
    truth = [Example.FromString(d).features.feature for _, _, d in
             tfrecord.iter_records(str(path))]
    lengths = {len(f["image"].bytes_list.value[0]) for f in truth}
    assert len(lengths) < len(parsed) < 4000, (len(lengths), len(parsed))
    assert split.labels().tolist() == [list(f["label"].int64_list.value).index(1)
                                       for f in truth] == labels.tolist()
    pixels = np.stack([decode_jpeg(f["image"].bytes_list.value[0]) for f in truth])
    assert np.array_equal(np.concatenate([b.images for b in split.batches(700)]), pixels)
