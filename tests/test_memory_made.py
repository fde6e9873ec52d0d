"""Memory at the point it is made (issue 35): every materialization draws from the budget
before it happens, using the container's own metadata (Parquet page headers and
dictionary pages, a TFRecord record's length, an HDF5 dataset's stored dtype, a label
file's dimensions) to refuse or stream.

Each finding is an input under 1 MB built here (tests/fuzz/expansion.py) and run as a
child process whose whole process tree is measured from outside (tests/fuzz/peak.py:
Pss summed over the tree, and every process's own VmHWM). The oracle is the rule, not
the budget's arithmetic: peak under 300 MB, and either the work done or one line
`Error: ...` with exit 1. On the code before this change each of these took from 791 MB
to 3.2 GB.
"""

import os

import numpy as np

from fuzz import expansion, peak

PEAK_MB = peak.PEAK_MB
MB = 1 << 20


def _size(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path)
               for f in files)


def _refused(tmp_path, path, *args, message):
    assert _size(path) < MB
    code, out, err, mb, _ = peak.cli(*args, cwd=tmp_path)
    assert code == 1, err
    assert err.count("\n") == 1 and err.startswith("Error: ") and "Traceback" not in err, err
    assert message in err, err
    assert mb < PEAK_MB, f"peak {mb:.0f} MB"
    return err


def test_parquet_rows_sharing_one_large_dictionary_value_are_refused_from_the_footer(tmp_path):
    """925 bytes: rows sharing one 4 MB value make 2.5 GB (3.2 GB before, when pyarrow
    expanded the dictionary); the page headers and the dictionary page say so first."""
    path = expansion.parquet_dictionary(str(tmp_path), 2_500_000_000)
    err = _refused(tmp_path, path, "info", path,
                   message=f"{path}: its image values make 2,499,796,244 bytes from "
                           f"{_size(path):,} bytes of file, more than 1032:1 expansion; "
                           "such a ratio is a decompression bomb, not a dataset")
    assert "\n" not in err[:-1]


def test_parquet_value_of_320_mib_is_refused_by_its_page_size(tmp_path):
    """One 320 MiB value in 11 KB (1.7 GB before): its page's uncompressed size, from
    the page header, is over what one value may hold."""
    path = expansion.parquet_value(str(tmp_path), 320 << 20)
    for command in (["info", path], ["convert", path, tmp_path / "o.npz"]):
        _refused(tmp_path, path, *command,
                 message=f"{path}: row group 0, column image.bytes: page of 335,544,646 "
                         "bytes, more than mnistconv's limit of 68,157,440 bytes per page")
    assert not (tmp_path / "o.npz").exists()


def test_parquet_values_within_the_rule_stream_in_batches(tmp_path):
    """A dictionary value of 768 KB (a stored 512 x 512 RGB PNG) shared by rows within
    the expansion rule (300 KB of file, 100 MB made): read in batches that fit the
    budget, every row decoded."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    path = expansion.parquet_dictionary(str(tmp_path), 100 << 20,
                                        expansion.png_stored(512))
    # Pad the file with incompressible bytes in another column: the rule allows more.
    table = pq.read_table(path, read_dictionary=["image.bytes"])
    noise = np.random.default_rng(1).bytes(300_000)
    extra = pa.array([noise] + [b""] * (len(table) - 1), pa.binary())
    pq.write_table(table.append_column("padding", extra), path, compression="zstd",
                   store_schema=False, use_dictionary=["image.bytes"])
    assert _size(path) < MB
    code, out, err, mb, _ = peak.cli("convert", path, tmp_path / "o.npz", cwd=tmp_path)
    assert code == 0, err
    assert mb < PEAK_MB, f"peak {mb:.0f} MB"
    with np.load(tmp_path / "o.npz") as z:
        assert z["x_train"].shape == (len(table), 512, 512, 3) and \
            not z["x_train"].any()


def test_qmnist_labels_of_16_million_examples_are_counted_before_they_are_held(tmp_path):
    """535 KB of .gz: 16.7 M QMNIST label rows (1 GB before: the N x 8 table and a copy
    of its columns); the table a split would hold is refused from the header."""
    folder = expansion.qmnist_labels(str(tmp_path), 16_700_000 * 32)
    labels = os.path.join(folder, "qmnist-train-labels-idx2-int.gz")
    _refused(tmp_path, folder, "info", folder,
             message=f"{labels}: labels of 16,700,000 examples (8 columns) take "
                     "484,300,000 bytes in memory, more than mnistconv's limit of "
                     "134,217,728 for one split's labels")


def test_qmnist_labels_within_the_limit_stream_into_what_is_kept(tmp_path):
    """3 M rows (96 MB of table): read a chunk at a time into the classes and the 7
    extra columns, never the whole table and a copy."""
    folder = expansion.qmnist_labels(str(tmp_path), 3_000_000 * 32)
    assert _size(folder) < MB
    code, out, err, mb, _ = peak.cli("info", folder, "--json", cwd=tmp_path)
    assert code == 0, err
    assert '"count": 3000000' in out.replace(" ", "").replace('"count":', '"count": ')
    assert mb < PEAK_MB, f"peak {mb:.0f} MB"


def test_a_card_keeps_thumbnails_not_full_size_images(tmp_path):
    """815 KB of gzip IDX: 50 images of 4096 x 4096, each of its own class (2.7 GB
    before: 8 full-size images kept per class)."""
    folder = expansion.idx_images(str(tmp_path), 50 * 4096 * 4096)
    assert _size(folder) < MB
    code, out, err, mb, _ = peak.cli("card", folder, "-o", tmp_path / "card.html",
                                     cwd=tmp_path)
    assert code == 0, err
    assert mb < PEAK_MB, f"peak {mb:.0f} MB"
    html = (tmp_path / "card.html").read_text()
    assert html.count('class="sample"') == 50


def test_a_card_sample_is_every_kth_pixel():
    from mnistconv.describe import card
    stats = card.SplitStats("train", None)
    image = np.arange(1024 * 1024, dtype=np.uint32).reshape(1024, 1024) % 251
    stats.add(image[None].astype(np.uint8), np.array([3]))
    (kept,) = stats.samples[3]
    assert kept.shape == (256, 256)
    assert np.array_equal(kept, image[::4, ::4].astype(np.uint8))


def test_a_card_holds_at_most_its_sample_budget_over_many_classes():
    from mnistconv.describe import card
    stats = card.SplitStats("train", None)
    images = np.zeros((8192, 64, 64), np.uint8)
    stats.add(images, np.arange(8192) % 4096)
    assert stats.sample_bytes <= card.SAMPLE_BYTES
    assert sum(len(v) for v in stats.samples.values()) == card.SAMPLE_BYTES // (64 * 64)


def test_a_gzip_tfrecord_record_of_200_mb_is_refused_on_its_length(tmp_path):
    """204 KB of gzip: one 200 MB record (1 GB before: the record, its parsed Example and
    its image); its length header is read before a byte of it is decompressed."""
    path = expansion.tfrecord_record(str(tmp_path), 200 << 20)
    _refused(tmp_path, path, "info", path,
             message=f"{path}: record 0 (counting from 0, at byte 0): length 209,715,233 "
                     "is more than mnistconv's limit of 68,157,440 bytes per record; "
                     "raise --max-image-size if its images are really that large")


def test_a_large_record_under_the_limit_is_read_within_the_budget(tmp_path):
    """A real 4096 x 4096 RGB image (a stored PNG: 50 MB of record in 50 KB of gzip),
    at the default image limit (340 MB before: the first record decoded to learn its
    shape, its range grown and sliced from the stream, Pillow fed a copy)."""
    path = expansion.tfrecord_record(str(tmp_path), 0, image=expansion.png_stored(4096))
    assert _size(path) < MB
    for command in (["info", path], ["convert", path, tmp_path / "o.npz"]):
        code, out, err, mb, _ = peak.cli(*command, cwd=tmp_path)
        assert code == 0, err
        assert mb < PEAK_MB, f"{command[0]}: peak {mb:.0f} MB"
    with np.load(tmp_path / "o.npz") as z:
        assert z["x_train"].shape == (1, 4096, 4096, 3) and not z["x_train"].any()


def test_a_small_image_padded_to_a_large_record_is_refused_before_it_is_decoded(tmp_path):
    """A 28 x 28 PNG carrying 40 MB of an ancillary chunk (362 MB at 64 MB before:
    Pillow reads the chunk in blocks and joins them to drop it)."""
    path = expansion.tfrecord_record(str(tmp_path), 40 << 20)
    _refused(tmp_path, path, "info", path,
             message=f"{path}: record 0 (counting from 0): image does not decode "
                     "(41,943,025 bytes for a 28x28 image, more than its pixels and "
                     "metadata can take (1,051,712): the rest is padding)")


def test_float32_hdf5_is_counted_by_its_stored_dtype(tmp_path):
    """130 KB of HDF5: float32 256 x 256 images the writer scaled from uint8 (791 MB
    before: batches sized by the uint8 output held 20 bytes per pixel)."""
    path = expansion.hdf5_float(str(tmp_path), 160 << 20)
    assert _size(path) < MB
    code, out, err, mb, _ = peak.cli("convert", path, tmp_path / "o.npz", cwd=tmp_path)
    assert code == 0, err
    assert mb < PEAK_MB, f"peak {mb:.0f} MB"
    with np.load(tmp_path / "o.npz") as z:
        assert z["x_train"].shape == (640, 256, 256) and z["x_train"].dtype == np.uint8


def test_workers_share_the_budget_of_the_process_tree(tmp_path):
    """Gzip IDX of 8192 x 8192 images with --max-image-size raised and --workers 4
    (every worker held its own two slots of three images before: 1 GB; then the JPEG
    error check's two whole-image temporaries: 301 MB)."""
    folder = expansion.idx_images(str(tmp_path), 12 * 8192 * 8192, side=8192)
    assert _size(folder) < MB
    code, out, err, mb, _ = peak.cli("convert", folder, tmp_path / "o.tfrecord",
                                     "--workers", "4", "--max-image-size", "8192x8192",
                                     cwd=tmp_path)
    assert code == 0, err
    assert "jpeg_error_records: 12" in err, err
    assert mb < PEAK_MB, f"peak {mb:.0f} MB"


def test_each_worker_gets_its_share():
    from mnistconv.io import budget
    from mnistconv.workers.parallel import ParallelEncoder
    mnist = ParallelEncoder([], workers=4, record_bytes=784, chunk=1000)
    assert mnist.workers == 4
    large = ParallelEncoder([], workers=4, record_bytes=8192 * 8192, chunk=1)
    assert large.workers == 1
    middle = ParallelEncoder([], workers=8, record_bytes=2048 * 2048, chunk=1)
    assert middle.workers == budget.WORKERS_BYTES // (2 * (3 * 2048 * 2048 + 2048)) == 5


def test_a_cards_means_are_drawn_at_the_samples_size():
    """The fuzz pass's one traceback (webdataset images, case 13 of run L1): a mean kept
    at full size beside thumbnail samples could not be drawn in one stack."""
    from types import SimpleNamespace
    from mnistconv.describe import card, card_html
    stats = card.SplitStats("train", SimpleNamespace(shape=(1024, 1024), dtype=np.uint8,
                                                     class_names=()))
    stats.add(np.full((1, 1024, 1024), 7, np.uint8), np.array([3]))
    assert stats.means()[3].shape == stats.samples[3][0].shape == (256, 256)
    assert 'class="sample"' in card_html._split("train", stats)
