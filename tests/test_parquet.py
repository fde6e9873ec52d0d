"""Hugging Face Parquet: round trips on generated data, the real clients (`datasets`,
`huggingface_hub`, pyarrow) reading what mnistconv writes and writing what it reads,
the official MNIST rebuilt byte for byte, identical bytes for any worker count, and
one-line errors for bad input with nothing written."""

import gzip
import hashlib
import io
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from helpers import BAD_IMAGE, NOT_THIS_FORMAT, OFFICIAL_SHA256, idx_bytes, make_idx_dir, run, stderr_of

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

import mnistconv  # noqa: E402
from mnistconv.model.records import ArraySplit, Dataset  # noqa: E402

EXPECTED = ("mnistconv reads an image column (a struct of PNG or JPEG bytes and a path, "
            "as datasets' Image() stores it) and an integer label column")


def _generated(n_train=300, n_test=120, shape=(28, 28), seed=0):
    rng = np.random.default_rng(seed)
    splits = {}
    for name, n in (("train", n_train), ("test", n_test)):
        images = rng.integers(0, 256, (n,) + shape, dtype=np.uint8)
        images[:, : shape[0] // 2] = 0  # some structure, as digits have
        splits[name] = ArraySplit(name, images, rng.integers(0, 10, n).astype(np.uint8))
    return Dataset("test", splits)


def _files(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def _hashes(folder):
    return {name: hashlib.sha256((folder / name).read_bytes()).hexdigest()
            for name in _files(folder)}


def _png(pixels):
    from PIL import Image
    out = io.BytesIO()
    Image.fromarray(pixels, "L").save(out, "PNG")
    return out.getvalue()


def _write_rows(path, images, labels, names=None):
    """A Parquet file in datasets' schema, made with pyarrow directly."""
    features = {"image": {"_type": "Image"},
                "label": {"names": names or [str(i) for i in range(10)],
                          "_type": "ClassLabel"}}
    table = pa.table({"image": pa.array([{"bytes": b, "path": None} for b in images],
                                        pa.struct([("bytes", pa.binary()),
                                                   ("path", pa.string())])),
                      "label": pa.array(labels, pa.int64())})
    table = table.replace_schema_metadata(
        {"huggingface": json.dumps({"info": {"features": features}})})
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)


# --- writing: layout, schema, card, round trip ---

def test_round_trip_layout_schema_and_card(tmp_path):
    ds = _generated()
    out = tmp_path / "hf"
    result = mnistconv.write(ds, out, "parquet", row_group_size=100)
    assert _files(out) == ["README.md", "croissant.json",
                           "data/test-00000-of-00001.parquet",
                           "data/train-00000-of-00001.parquet"]
    assert [f.path for f in result] == [str(out / "data/train-00000-of-00001.parquet"),
                                        str(out / "data/test-00000-of-00001.parquet"),
                                        str(out / "README.md"),
                                        str(out / "croissant.json")]
    assert result.counts == {"train": 300, "test": 120}
    pf = pq.ParquetFile(out / "data/train-00000-of-00001.parquet")
    assert str(pf.schema_arrow.field("image").type) == "struct<bytes: binary, path: string>"
    assert pf.schema_arrow.field("label").type == pa.int64()
    assert json.loads(pf.schema_arrow.metadata[b"huggingface"]) == {"info": {"features": {
        "image": {"_type": "Image"},
        "label": {"names": [str(i) for i in range(10)], "_type": "ClassLabel"}}}}
    assert [pf.metadata.row_group(i).num_rows for i in range(pf.num_row_groups)] == \
        [100, 100, 100]
    table = pf.read()
    assert table.column("image").combine_chunks().field("path").null_count == 300
    back = mnistconv.read(out)
    assert list(back.splits) == ["train", "test"]
    for name, split in ds.splits.items():
        got = back.splits[name]
        assert got.class_names == [str(i) for i in range(10)]
        assert np.array_equal(np.concatenate([b.images for b in got.batches(77)]),
                              split._images)
        assert np.array_equal(got.labels(), split._labels)


def test_png_bytes_decode_with_pillow_and_rgb_round_trips(tmp_path):
    from PIL import Image
    rng = np.random.default_rng(1)
    rgb = rng.integers(0, 256, (5, 7, 9, 3), dtype=np.uint8)
    ds = Dataset("t", {"train": ArraySplit("train", rgb, np.arange(5))})
    mnistconv.write(ds, tmp_path / "c", "parquet", config="colour")
    path = tmp_path / "c/colour/train-00000-of-00001.parquet"
    images = pq.read_table(path).column("image").combine_chunks().field("bytes")
    for i, data in enumerate(images.to_pylist()):
        with Image.open(io.BytesIO(data)) as im:
            assert im.mode == "RGB" and np.array_equal(np.asarray(im), rgb[i])
    split = mnistconv.read(tmp_path / "c").splits["train"]
    assert split.header.shape == (7, 9, 3)
    assert np.array_equal(next(split.batches()).images, rgb)


def test_card_is_what_the_hub_and_datasets_read(tmp_path, hf_env):
    from datasets.info import DatasetInfosDict
    from huggingface_hub import DatasetCard
    names = ["zero", 'it\'s "one"', "two: 2", "three\nlines", "four"]
    rng = np.random.default_rng(2)
    split = ArraySplit("train", rng.integers(0, 256, (40, 6, 6), dtype=np.uint8),
                       np.arange(40) % 5)
    split.class_names = names
    mnistconv.write(Dataset("t", {"train": split}), tmp_path / "o", "parquet",
                    config="mine")
    card = DatasetCard.load(tmp_path / "o/README.md")
    assert card.data.configs == [{"config_name": "mine", "data_files": [
        {"split": "train", "path": "mine/train-*"}]}]
    infos = DatasetInfosDict.from_dataset_card_data(card.data)
    info = infos["mine"]
    assert info.features["label"].names == names
    assert info.splits["train"].num_examples == 40
    assert info.download_size == os.path.getsize(
        tmp_path / "o/mine/train-00000-of-00001.parquet")


def test_large_images_get_smaller_row_groups_by_default(tmp_path):
    """Without --row-group-size, a group holds at most one piece's share of the budget in
    pixels (8 MiB): 1000 rows of MedMNIST's 224 x 224 RGB images were one page the reader
    refused, and the writer held the whole group several times over. Small images keep
    1000 a group."""
    from mnistconv.formats.parquet.writer import default_row_group
    assert default_row_group([(28, 28)]) == default_row_group([(32, 32, 3)]) == 1000
    assert default_row_group([(224, 224, 3)]) == (8 << 20) // (224 * 224 * 3) == 55
    assert default_row_group([(28, 28), (300, 300, 3)]) == 31
    ds = _generated(70, 5, shape=(300, 300, 3))
    out = tmp_path / "hf"
    result = mnistconv.write(ds, out, "parquet")
    pf = pq.ParquetFile(out / "data/train-00000-of-00001.parquet")
    assert [pf.metadata.row_group(i).num_rows for i in range(pf.num_row_groups)] == \
        [31, 31, 8]
    assert result.stats["row_groups"] == 3 + 1
    got = mnistconv.read(out).splits["train"]
    assert np.array_equal(np.concatenate([b.images for b in got.batches(50)]),
                          ds.splits["train"]._images)
    mnistconv.write(ds, tmp_path / "given", "parquet", row_group_size=50)
    pf = pq.ParquetFile(tmp_path / "given/data/train-00000-of-00001.parquet")
    assert [pf.metadata.row_group(i).num_rows for i in range(pf.num_row_groups)] == [50, 20]


def test_row_groups_and_pages_of_224_px_rgb_are_bounded_by_bytes(tmp_path):
    """MedMNIST-224's images (noise: their PNGs are about as large as their pixels): each
    row group's image column stays within 8 MiB of PNGs, and pyarrow cut its pages near
    its 1 MiB page size (write batches of 6 images, not 1024), so pyarrow never held a
    group's PNGs as one page; the images read back exactly, by pyarrow too."""
    from mnistconv.formats.parquet.pages import chunk_pages
    from mnistconv.io.budget import BATCH_BYTES, PIECES_IN_FLIGHT
    side, image = 224, 224 * 224 * 3
    rng = np.random.default_rng(7)
    images = rng.integers(0, 256, size=(120, side, side, 3), dtype=np.uint8)
    ds = Dataset("test", {"train": ArraySplit("train", images,
                                              rng.integers(0, 9, 120).astype(np.uint8))})
    out = tmp_path / "hf"
    mnistconv.write(ds, out, "parquet", workers=1)
    path = out / "data/train-00000-of-00001.parquet"
    meta = pq.ParquetFile(path).metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [55, 55, 10]
    with open(path, "rb") as f:
        for i in range(meta.num_row_groups):
            column = meta.row_group(i).column(0)
            assert column.path_in_schema == "image.bytes"
            assert column.total_uncompressed_size <= \
                BATCH_BYTES // PIECES_IN_FLIGHT * 1.01 + 4096
            pages = chunk_pages(f, str(path), column.data_page_offset,
                                column.total_compressed_size, f"group {i}")
            # A page closes once past 1 MiB, checked after each write batch of 6 images.
            assert pages.pages == -(-meta.row_group(i).num_rows // 12)
            assert pages.largest <= (1 << 20) + 6 * image * 1.01 + 4096
    table = pq.read_table(path)
    assert table.num_rows == 120
    got = mnistconv.read(out).splits["train"]
    assert np.array_equal(np.concatenate([b.images for b in got.batches(50)]), images)


def test_shards_row_groups_and_supersede(tmp_path):
    ds = _generated(n_train=1000, n_test=10)
    out = tmp_path / "s"
    mnistconv.write(ds, out, "parquet", shards=3, row_group_size=150)
    train = [f"data/train-0000{i}-of-00003.parquet" for i in range(3)]
    assert [f for f in _files(out) if "train" in f] == train
    rows = [[pq.ParquetFile(out / f).metadata.row_group(g).num_rows
             for g in range(pq.ParquetFile(out / f).num_row_groups)] for f in train]
    assert rows == [[150, 150, 33], [150, 150, 33], [150, 150, 34]]
    back = mnistconv.read(out).splits["train"]
    assert np.array_equal(back.labels(), ds.splits["train"]._labels)
    assert [len(s.files) for s in back.shards()] == [1, 1, 1]
    # A second write with another shard count replaces the old set whole (with force).
    with pytest.raises(mnistconv.UsageError, match="already exists"):
        mnistconv.write(ds, out, "parquet", shards=2)
    mnistconv.write(ds, out, "parquet", shards=2, force=True)
    assert [f for f in _files(out) if "train" in f] == [
        "data/train-00000-of-00002.parquet", "data/train-00001-of-00002.parquet"]


def test_same_bytes_twice_and_for_any_worker_count(tmp_path, official_dir):
    outs = []
    for i, workers in enumerate(("1", "2", "2")):
        out = tmp_path / f"o{i}"
        r = run("convert", official_dir, out, "--to", "parquet", "--split", "test",
                "--workers", workers, "--shards", "2", "--row-group-size", "700", "-q")
        assert r.returncode == 0, stderr_of(r)
        outs.append(_hashes(out))
    threads = tmp_path / "threads"
    mnistconv.convert(official_dir, threads, to="parquet", select={"splits": ["test"]},
                      workers=2, shards=2, row_group_size=700)
    outs.append(_hashes(threads))
    assert outs[0] == outs[1] == outs[2] == outs[3]
    assert len(outs[0]) == 4  # two shards, README.md and croissant.json


# --- the real clients on the official MNIST ---

def test_datasets_loads_the_official_mnist_exactly(tmp_path, official_dir,
                                                   official_arrays, hf_env):
    import datasets
    out = tmp_path / "mnist-hf"
    r = run("convert", official_dir, out, "--to", "parquet", "-q")
    assert r.returncode == 0, stderr_of(r)
    names = [str(i) for i in range(10)]
    by_files = datasets.load_dataset("parquet", data_files={
        "train": str(out / "data/train-00000-of-00001.parquet"),
        "test": str(out / "data/test-00000-of-00001.parquet")})
    by_dir = datasets.load_dataset(str(out))
    for loaded in (by_files, by_dir):
        assert list(loaded) == ["train", "test"]
        for split in ("train", "test"):
            d = loaded[split]
            assert d.features["image"] == datasets.Image()
            assert d.features["label"] == datasets.ClassLabel(names=names)
            rows = d.with_format("numpy")[:]
            assert np.array_equal(rows["image"], official_arrays[f"x_{split}"])
            assert np.array_equal(rows["label"], official_arrays[f"y_{split}"])
    # The card's counts are the splits' own.
    assert by_dir["train"].info.splits["train"].num_examples == 60000


def test_peak_memory_writing_the_training_set(tmp_path, official_dir):
    """The 60000 training images to Parquet within 200 MB (VmHWM of the command)."""
    import subprocess
    import sys
    from helpers import REPO
    code = ("import sys\nfrom mnistconv.cli import main\ntry:\n    main(sys.argv[1:])\n"
            "except SystemExit as e:\n    code = e.code\n"
            "peak = next(l.split()[1] for l in open('/proc/self/status')\n"
            "            if l.startswith('VmHWM:'))\n"
            "sys.stderr.write(f'VmHWM {peak}\\n')\nsys.exit(code)\n")
    r = subprocess.run([sys.executable, "-c", code, "convert", str(official_dir),
                        str(tmp_path / "o"), "--to", "parquet", "--split", "train", "-q"],
                       capture_output=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert r.returncode == 0, r.stderr
    last = r.stderr.decode().splitlines()[-1]
    assert last.startswith("VmHWM ") and int(last.split()[1]) < 200 * 1024, last


def test_datasets_made_hub_layout_is_read_exactly_and_rebuilds_idx(tmp_path,
                                                                   official_arrays,
                                                                   hf_env):
    import datasets
    names = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight",
             "nine"]
    hub = tmp_path / "hub"
    sources = {"train": (official_arrays["x_train"][:3000],
                         official_arrays["y_train"][:3000]),
               "test": (official_arrays["x_test"], official_arrays["y_test"])}
    for split, (images, labels) in sources.items():
        d = datasets.Dataset.from_dict({"image": list(images),
                                        "label": labels.astype(np.int64)})
        d = d.cast_column("image", datasets.Image()).cast_column(
            "label", datasets.ClassLabel(names=names))
        d.to_parquet(str(hub / "mnist" / f"{split}-00000-of-00001.parquet"))
    ds = mnistconv.read(hub)
    assert list(ds.splits) == ["train", "test"]
    for split, (images, labels) in sources.items():
        got = ds.splits[split]
        assert got.class_names == names
        assert np.array_equal(np.concatenate([b.images for b in got.batches()]), images)
        assert np.array_equal(got.labels(), labels)
    idx = tmp_path / "idx"
    mnistconv.convert(hub, idx, to="idx")
    for name in ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        assert hashlib.sha256((idx / name).read_bytes()).hexdigest() == \
            OFFICIAL_SHA256[name]
    assert (idx / "train-images-idx3-ubyte").read_bytes() == \
        idx_bytes(sources["train"][0])
    assert (idx / "train-labels-idx1-ubyte").read_bytes() == \
        idx_bytes(sources["train"][1])
    # Written back as Parquet, the class names stay.
    again = tmp_path / "again"
    mnistconv.write(ds, again, "parquet")
    meta = pq.ParquetFile(again / "data/test-00000-of-00001.parquet").schema_arrow.metadata
    assert json.loads(meta[b"huggingface"])["info"]["features"]["label"]["names"] == names


def test_official_mnist_round_trip_rebuilds_the_four_files(tmp_path, official_dir):
    out, idx = tmp_path / "pq", tmp_path / "idx"
    assert run("convert", official_dir, out, "--to", "parquet", "--config", "mnist",
               "-q").returncode == 0
    assert _files(out)[2:] == ["mnist/test-00000-of-00001.parquet",
                               "mnist/train-00000-of-00001.parquet"]
    mnistconv.convert(out, idx, to="idx")
    for name, digest in OFFICIAL_SHA256.items():
        assert hashlib.sha256((idx / name).read_bytes()).hexdigest() == digest


# --- reading other layouts ---

def test_reads_hub_layouts_single_files_and_configs(tmp_path):
    rng = np.random.default_rng(3)
    images = rng.integers(0, 256, (6, 28, 28), dtype=np.uint8)
    pngs = [_png(i) for i in images]
    _write_rows(tmp_path / "hub/fashion_mnist/train-00000-of-00001.parquet", pngs[:4],
                [0, 1, 2, 3])
    _write_rows(tmp_path / "hub/fashion_mnist/test-00000-of-00001.parquet", pngs[4:],
                [4, 5])
    ds = mnistconv.read(tmp_path / "hub")
    assert list(ds.splits) == ["train", "test"]
    assert np.array_equal(next(ds.splits["test"].batches()).images, images[4:])
    # One file: its split named from the file name.
    one = mnistconv.read(tmp_path / "hub/fashion_mnist/test-00000-of-00001.parquet")
    assert list(one.splits) == ["test"] and one.splits["test"].header.count == 2
    # The converted layout <config>/<split>/0000.parquet, beside another config.
    _write_rows(tmp_path / "hub/other/train/0000.parquet", pngs[:1], [9])
    with pytest.raises(mnistconv.UsageError, match=r"holds several configs "
                       r"\(fashion_mnist, other\); choose one with --config"):
        mnistconv.read(tmp_path / "hub")
    other = mnistconv.read(tmp_path / "hub", config="other")
    assert list(other.splits) == ["train"] and list(other.splits["train"].labels()) == [9]


# --- bad input: one line, exit 1, nothing written ---

def _refused(tmp_path, src, message, *extra):
    out = tmp_path / "out"
    r = run("convert", src, out, "--to", "idx", *extra)
    assert r.returncode == 1, stderr_of(r)
    assert stderr_of(r) == f"Error: {message}\n"
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if ".mnistconv-tmp-" in p.name]


def test_parquet_of_another_schema(tmp_path):
    path = tmp_path / "table.parquet"
    pq.write_table(pa.table({"a": [1, 2], "text": ["x", "y"]}), path)
    _refused(tmp_path, path, f"{path}: is not an image classification Parquet: its "
                             f"columns are 'a' (int64), 'text' (string); {EXPECTED}")


def test_a_label_its_classlabel_does_not_name(tmp_path):
    """Found by the long fuzz pass: a ClassLabel of 10 names over a label 255 went on
    to the TFRecord writer, which failed with a traceback; every command now stops at
    the reader in one line (info too: it would count a class that has no name)."""
    path = tmp_path / "test-00000-of-00001.parquet"
    _write_rows(path, [_png(np.zeros((28, 28), np.uint8))] * 3, [3, 255, 6])
    message = (f"{path}: names 10 classes (labels 0..9), but label 255 of test example 1 "
               "has no name; the file's ClassLabel feature does not name it")
    _refused(tmp_path, path, message)
    for args in (["convert", path, tmp_path / "o.tfrecord", "--label-format", "onehot"],
                 ["info", path]):
        r = run(*args)
        assert (r.returncode, stderr_of(r)) == (1, f"Error: {message}\n")
    assert not (tmp_path / "o.tfrecord").exists()


def test_png_of_the_wrong_size(tmp_path):
    path = tmp_path / "train.parquet"
    _write_rows(path, [_png(np.zeros((28, 28), np.uint8)),
                       _png(np.zeros((27, 28), np.uint8))], [1, 2])
    _refused(tmp_path, path, f"{path}: row 1: image is 27x28, the split's images are "
                             "28x28; mnistconv keeps one image size per split")


def _png_of_zeros(height, width, extra=0):
    """A grey PNG of zeros written by hand, its IDAT going on for `extra` zero bytes
    past the image: a few KB of file, megabytes inflated."""
    import struct
    import zlib

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + \
            struct.pack(">I", zlib.crc32(kind + data))
    z = zlib.compressobj(9)
    row = bytes(width + 1)
    idat = b"".join(z.compress(row) for _ in range(height))
    idat += b"".join(z.compress(bytes(1 << 20)) for _ in range(extra >> 20)) + z.flush()
    return b"\x89PNG\r\n\x1a\n" + \
        chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)) + \
        chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def test_a_png_whose_data_inflates_past_its_image_is_not_inflated_whole(tmp_path):
    # Found by the fuzz pass's PNG bombs: 28 x 28 in IHDR, 64 KB of IDAT inflating to
    # 64 MiB; a one-call inflate took it all (256 MiB: a 521 MB peak). The plain-PNG
    # path feeds Pillow's decoder, which stops at the image's end: zeros, and no more.
    bomb = _png_of_zeros(28, 28, extra=64 << 20)
    assert len(bomb) < 100_000
    code = """if 1:
        import sys, numpy as np
        from mnistconv.codecs import png
        def peak():
            status = open("/proc/self/status").read()
            return int(status.split("VmHWM:")[1].split()[0])
        bomb = open(sys.argv[1], "rb").read()
        out = np.ones((1, 28, 28), np.uint8)
        before = peak()
        assert png.decode_plain_pngs([bomb], (28, 28), out) == []
        assert not out.any()
        print(peak() - before)
    """
    path = tmp_path / "bomb.png"
    path.write_bytes(bomb)
    grown = subprocess.run([sys.executable, "-c", code, path], capture_output=True,
                           text=True, check=True).stdout
    assert int(grown) < 16 << 10, f"{grown} KiB more at the peak"


def test_an_image_larger_than_the_split_is_refused_before_it_is_decoded(tmp_path,
                                                                        monkeypatch):
    # Found by the fuzz pass's PNG bombs: threads decoded several 80 KB PNGs of
    # 9000 x 9000 zeros (81 MB each, and Pillow's copy) before comparing sizes, past
    # the harness's 1 GiB of address space.
    from mnistconv import codecs
    path = tmp_path / "train.parquet"
    _write_rows(path, [_png(np.zeros((28, 28), np.uint8)), _png_of_zeros(9000, 9000)],
                [1, 2])
    decoded = []
    real = codecs.decode_image
    monkeypatch.setattr(codecs, "decode_image", lambda data: decoded.append(len(data))
                        or real(data))
    from mnistconv.errors import FormatError
    with pytest.raises(FormatError) as e:
        list(mnistconv.read(path, "parquet").splits["train"].batches())
    assert str(e.value) == (f"{path}: row 1: image is 9000x9000, the split's images are "
                            "28x28; mnistconv keeps one image size per split")
    assert all(size < 1000 for size in decoded)  # the 80 KB PNG never reached Pillow


def test_a_large_first_image_then_others_is_refused_before_it_is_decoded(tmp_path,
                                                                        monkeypatch):
    # Found by the long fuzz pass: row 0, a 6000 x 6000 PNG (3400 here, two to a batch:
    # the size limit and the expansion rule refuse 6000 first), set the split's size and
    # was decoded alone in its batch (RGB: 578 MB) before row 1 (28 x 28) showed the sizes differ.
    # Rows are now fetched 1024 at a time and all their sizes checked before any is
    # decoded.
    from mnistconv.formats.parquet import reader
    path = tmp_path / "train.parquet"
    _write_rows(path, [_png_of_zeros(3400, 3400)] + [_png(np.zeros((28, 28), np.uint8))] * 2,
                [1, 2, 3])
    decoded = []
    real = reader._decode
    monkeypatch.setattr(reader, "_decode", lambda data, shape, where: decoded.append(where)
                        or real(data, shape, where))
    from mnistconv.errors import FormatError
    split = mnistconv.read(path, "parquet").splits["train"]
    assert split.header.shape == (3400, 3400)
    with pytest.raises(FormatError) as e:
        next(split.batches())
    assert str(e.value) == (f"{path}: row 1: image is 28x28, the split's images are "
                            "3400x3400; mnistconv keeps one image size per split")
    assert decoded == []


def test_batches_hold_at_most_the_budget_of_pixels(tmp_path, monkeypatch):
    # Found by the fuzz pass's PNG bombs: row 0 declared 16384 x 16384, and the batch
    # array of 3 such rows (768 MiB) was allocated before any image was decoded.
    # (Now with noise and a smaller budget: six zero PNGs of 4096 x 4096 in 2 KB of file
    # are refused by the expansion rule.)
    from mnistconv.io import budget
    monkeypatch.setattr(budget, "BATCH_BYTES", 2 * 512 * 512)
    rng = np.random.default_rng(4)
    path = tmp_path / "train.parquet"
    _write_rows(path, [_png(rng.integers(0, 256, (512, 512), dtype=np.uint8))
                       for _ in range(6)], [1] * 6)
    split = mnistconv.read(path, "parquet").splits["train"]
    assert [len(b.labels) for b in split.batches()] == [2, 2, 2]  # 2 images a budget


def test_a_png_too_large_for_the_fast_path_is_left_to_pillows_bomb_limit(tmp_path):
    # Found by the fuzz pass's PNG bombs: 256 KB of PNG holding 16384 x 16384 zeros was
    # inflated by the fast path (268 MB), which Pillow refuses as a decompression bomb.
    from mnistconv.codecs import png
    out = np.empty((1, 16384, 16384), np.uint8)  # over Pillow's limit: never touched
    assert png.decode_plain_pngs([_png_of_zeros(16384, 16384)], (16384, 16384),
                                 out) == [0]
    path = tmp_path / "train.parquet"
    _write_rows(path, [_png_of_zeros(16384, 16384)] * 2, [1, 2])
    _refused(tmp_path, path, f"{path}: row 0: image of 16384x16384 exceeds mnistconv's "
                             "limit of 16,777,216 pixels per image; raise it with "
                             "--max-image-size WxH if the images are really that large")


def test_not_an_image_and_no_bytes(tmp_path):
    path = tmp_path / "train.parquet"
    _write_rows(path, [_png(np.zeros((28, 28), np.uint8)), b"hello"], [1, 2])
    _refused(tmp_path, path, f"{path}: row 1: image does not decode (cannot identify "
                             f"image file); {BAD_IMAGE}")


def test_missing_shard_of_a_split(tmp_path):
    folder = tmp_path / "hub" / "data"
    _write_rows(folder / "train-00000-of-00002.parquet",
                [_png(np.zeros((28, 28), np.uint8))], [1])
    _refused(tmp_path, tmp_path / "hub", f"{tmp_path / 'hub'}: shard set incomplete: "
             "split 'train' has 1 of 2 shards, first missing 00001; copy the missing shards, "
             "or download the set again".replace(
                 f"{tmp_path / 'hub'}: ", f"{folder / 'train-00000-of-00002.parquet'}: "))


def test_missing_split_asked_for(tmp_path):
    folder = tmp_path / "hub" / "data"
    _write_rows(folder / "train-00000-of-00001.parquet",
                [_png(np.zeros((28, 28), np.uint8))], [1])
    out = tmp_path / "out"
    r = run("convert", tmp_path / "hub", out, "--to", "idx", "--split", "test")
    assert r.returncode != 0 and stderr_of(r).count("\n") == 1
    assert stderr_of(r).startswith("Error: ") and "test" in stderr_of(r)
    assert not out.exists()


def test_not_parquet_at_all(tmp_path):
    path = tmp_path / "x.parquet"
    path.write_bytes(b"PAR1" + b"\0" * 20)
    _refused(tmp_path, path, f"{path}: not a valid Parquet file (Parquet magic bytes not "
                             "found in footer. Either the file is corrupted or this is not "
                             f"a parquet file.); {NOT_THIS_FORMAT}", "--from", "parquet")


def test_unsafe_split_name_from_a_file_name(tmp_path):
    folder = tmp_path / "hub" / "data"
    _write_rows(folder / "tr ain-00000-of-00001.parquet",
                [_png(np.zeros((28, 28), np.uint8))], [1])
    out = tmp_path / "out"
    r = run("convert", tmp_path / "hub", out, "--to", "idx")
    assert r.returncode == 1, stderr_of(r)
    assert stderr_of(r) == f"Error: {folder}: split name 'tr ain' is not a safe name; " \
        "split names are letters, digits, '_', '-' and '.' (not leading), at most 64 " \
        "characters\n"
    assert not out.exists()


def test_writer_refuses_what_parquet_cannot_hold(tmp_path):
    floats = Dataset("t", {"train": ArraySplit("train", np.zeros((2, 4, 4), np.float32),
                                               np.zeros(2, np.uint8))})
    with pytest.raises(mnistconv.CannotWrite) as e:
        mnistconv.write(floats, tmp_path / "f", "parquet")
    assert str(e.value) == ("train: parquet cannot hold split train's float32 pixels (it "
                            "holds uint8); write it as idx, npz or caffe-hdf5, which can")
    assert not (tmp_path / "f").exists()
    two = _generated(10, 10)
    with pytest.raises(mnistconv.UsageError, match="one .parquet file holds one split"):
        mnistconv.write(two, tmp_path / "m.parquet", "parquet")
    assert list(tmp_path.iterdir()) == []


def test_official_files_compressed_gz_rebuild(tmp_path, official_dir):
    """The gz files mnistconv writes hold the official bytes (gzip headers differ)."""
    out, idx = tmp_path / "pq", tmp_path / "idx"
    assert run("convert", official_dir, out, "--to", "parquet", "--split", "test",
               "-q").returncode == 0
    mnistconv.convert(out, idx, to="idx", gzip=True)
    for name in ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        assert gzip.decompress((idx / f"{name}.gz").read_bytes()) == \
            gzip.decompress((official_dir / f"{name}.gz").read_bytes())


def test_make_idx_dir_helper_input_detected(tmp_path):
    """A directory of IDX files is never taken for Parquet (IDX is detected first)."""
    make_idx_dir(tmp_path / "d", np.zeros((2, 28, 28), np.uint8), np.zeros(2, np.uint8))
    assert mnistconv.read(tmp_path / "d").format == "idx"


def test_parquet_never_imports_pandas(tmp_path):
    """pyarrow imports pandas (~55 MB) from pa.array and to_numpy when it is installed;
    the writer and reader use neither, which keeps the writer under 200 MB."""
    import subprocess
    import sys
    from helpers import REPO
    code = ("import sys, mnistconv\n"
            "mnistconv.convert('examples/data/mnist-sample', sys.argv[1], to='parquet')\n"
            "ds = mnistconv.read(sys.argv[1])\n"
            "for s in ds.splits.values():\n"
            "    s.labels(); list(s.batches())\n"
            "assert 'pyarrow' in sys.modules and 'pandas' not in sys.modules\n")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "o")], cwd=REPO,
                       capture_output=True)
    assert r.returncode == 0, r.stderr


def test_images_past_four_million_pixels_are_decoded_on_one_thread(tmp_path, monkeypatch):
    """Each decoding thread holds a decoder's copy of its image besides the batch: two
    threads on 9000 x 9000 PNGs peaked at 330-510 MB (the fuzz pass), so large images
    go one at a time; small JPEGs keep every thread. PNGs under 3,072 pixel bytes are
    decoded on one thread (Pillow releases the GIL for a few microseconds an image)."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from mnistconv import codecs
    from mnistconv.formats.parquet import reader
    seen = []
    real = reader.ordered_map
    monkeypatch.setattr(reader, "ordered_map",
                        lambda f, jobs, workers: seen.append(workers) or real(f, jobs,
                                                                               workers))
    # 4,194,304 pixels: still threaded; one more row: not; a small PNG: not; a 56 x 56
    # PNG (3,136 bytes): threaded.
    for side, encode in ((2048, codecs.encode_jpeg), (2049, codecs.encode_jpeg),
                         (28, codecs.encode_png), (56, codecs.encode_png)):
        table = pa.table({"image": [{"bytes": encode(np.zeros((side, side), np.uint8)),
                                     "path": None}],
                          "label": pa.array([3], pa.int64())})
        (tmp_path / str(side)).mkdir()
        pq.write_table(table, tmp_path / str(side) / "train.parquet")
        split = mnistconv.read(tmp_path / str(side) / "train.parquet", workers=2) \
            .splits["train"]
        assert next(split.batches()).images.shape == (1, side, side)
    assert seen == [2, 1, 1, 2]
