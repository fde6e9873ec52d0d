"""One memory budget (issue 24, class 4): every reader, writer and view sizes its batches
by bytes of decoded pixels (mnistconv.io.budget), images are capped at 4096 x 4096 unless
--max-image-size raises it, and every codec is held to one expansion rule.

The hostile files are built here (tests/fuzz/bombs.py), each under 1 MB; commands whose
peak memory matters run as a child process that reports its own VmHWM (run_measured).
Figures (time, peak) for the same inputs are in benchmarks/bench_memory.py's budget part.
"""

import ast
import json
import os
from pathlib import Path

import numpy as np
import pytest

import mnistconv
from mnistconv.io import budget
from mnistconv import limits
from mnistconv.formats import registry
from mnistconv.model import stream
from mnistconv.errors import FormatError
from mnistconv.model.records import ArraySplit, Dataset, gather_from_file, Header
from helpers import REPO, run
from fuzz import bombs
from test_safety_idx_npz import run_measured

PEAK_MB = 300


# --- the budget over the registry ------------------------------------------------------------

def _written(tmp_path, writer, images, labels):
    ds = Dataset("gen", {"train": ArraySplit("train", images, labels)})
    out = tmp_path / (f"w-{writer.name}" + ("/" if writer.output_is_directory else
                                            (writer.extensions[0] if writer.extensions
                                             else "")))
    options = {"image_format": "png"} if writer.name == "tfrecord" else {}
    mnistconv.write(ds, out, writer.name, **options)
    return out


def _family_inputs(tmp_path):
    """The readers no writer makes: KMNIST (npz pairs), Quick, Draw! (.npy), CIFAR."""
    rng = np.random.default_rng(5)
    k = tmp_path / "kmnist"
    k.mkdir()
    np.savez_compressed(k / "kmnist-train-imgs.npz", rng.integers(0, 256, (11, 28, 28),
                                                                   dtype=np.uint8))
    np.savez_compressed(k / "kmnist-train-labels.npz", np.arange(11, dtype=np.uint8) % 10)
    q = tmp_path / "quickdraw"
    q.mkdir()
    for name in ("cat", "dog"):
        np.save(q / f"full_numpy_bitmap_{name}.npy",
                rng.integers(0, 256, (11, 784), dtype=np.uint8))
    c = tmp_path / "cifar"
    c.mkdir()
    pixels = rng.integers(0, 256, (11, 3072), dtype=np.uint8)
    c.joinpath("test_batch.bin").write_bytes(
        np.hstack([np.arange(11, dtype=np.uint8)[:, None] % 10, pixels]).tobytes())
    p = tmp_path / "cifar-python"
    p.mkdir()
    import pickle
    p.joinpath("test_batch").write_bytes(pickle.dumps(
        {b"labels": [i % 10 for i in range(11)], b"data": pixels}, protocol=2))
    m = tmp_path / "bloodmnist.npz"
    np.savez(m, train_images=rng.integers(0, 256, (11, 40, 40, 3), dtype=np.uint8),
             train_labels=(np.arange(11, dtype=np.uint8) % 8)[:, None])
    s = tmp_path / "train_32x32.mat"
    import scipy.io
    scipy.io.savemat(s, {"X": rng.integers(0, 256, (40, 40, 3, 11), dtype=np.uint8),
                         "y": (np.arange(11) % 10 + 1.0)[:, None]}, do_compression=True)
    return [("kmnist", k), ("quickdraw", q), ("cifar", c), ("cifar-python", p),
            ("medmnist", m), ("svhn", s)]


def _batches_within(split, limit):
    sizes = []
    for how in (lambda s: s.batches(), lambda s: s.batches(10 ** 6)):
        for batch in how(split):
            assert len(batch) >= 1
            assert batch.images.nbytes <= limit or len(batch) == 1, \
                (split.header.source, batch.images.nbytes, limit)
            sizes.append(len(batch))
    return sizes


def test_every_readers_batches_hold_at_most_the_budget(tmp_path, monkeypatch):
    """Walk the registry: each writer writes 11 images of 40 x 40, and its reader (and a
    shuffled selection of it) is read back with the budget set to 3 images' pixels: no
    batch holds more, whatever batch size is asked for."""
    rng = np.random.default_rng(3)
    images = rng.integers(0, 256, (11, 40, 40), dtype=np.uint8)
    labels = (np.arange(11) % 10).astype(np.uint8)
    inputs = [(w.name, _written(tmp_path, w, images, labels)) for w in registry.writers()]
    inputs += _family_inputs(tmp_path)
    assert sorted(name for name, _ in inputs) == sorted(r.name for r in registry.readers())
    for name, path in inputs:
        ds = mnistconv.read(path, name)
        split = next(iter(ds.splits.values()))
        image = budget.image_bytes(split.header.shape, split.header.dtype)
        monkeypatch.setattr(budget, "BATCH_BYTES", 3 * image)
        sizes = _batches_within(split, 3 * image)
        # Caffe HDF5 stores float32 that it scales back to uint8 in float64: a batch is
        # counted by what it makes on the way, 12 bytes a pixel (issue 35), so one row.
        most = 1 if name == "caffe-hdf5" else 3
        assert max(sizes) == most, (name, sizes)
        shuffled = stream.select(ds, shuffle=True, seed=1).splits[split.name]
        assert max(_batches_within(shuffled, 3 * image)) == 3, name
        monkeypatch.undo()


def test_an_image_larger_than_the_budget_is_a_batch_alone(monkeypatch):
    monkeypatch.setattr(budget, "BATCH_BYTES", 1000)
    split = ArraySplit("train", np.zeros((5, 40, 40), np.uint8), np.zeros(5, np.uint8))
    assert [len(b) for b in split.batches()] == [1, 1, 1, 1, 1]
    assert budget.rows_for((40, 40)) == 1
    assert budget.rows_for((10, 10), "float32", 100) == 2


def test_the_budgets_figures():
    assert budget.BATCH_BYTES == 32 << 20 and budget.MAX_ROWS == 8192
    assert budget.rows_for((28, 28)) == 8192  # MNIST batches as before
    assert budget.rows_for((4096, 4096)) == 2
    assert budget.rows_for((4096, 4096, 3), "float32") == 1
    assert budget.piece_rows(784, 1000) == 1000 and budget.piece_rows(4096 * 4096, 1000) == 1


def _functions(tree, name):
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name]


def test_every_batches_method_takes_its_size_from_the_budget():
    """The budget is the only way a batch is sized: each batches() in the package asks
    budget.rows / budget.spans, or hands the size on to another split's batches(); and
    no module but budget.py spells a batch's bytes."""
    found = []
    for path in sorted((REPO / "mnistconv").rglob("*.py")):
        source = path.read_text()
        tree = ast.parse(source)
        for f in _functions(tree, "batches"):
            body = ast.get_source_segment(source, f)
            uses = "budget." in body or ".batches(" in body or "row_batches(" in body
            assert uses, f"{path.relative_to(REPO)}:{f.lineno} sizes batches itself"
            found.append(path.name)
        if path.name != "budget.py":
            for node in ast.walk(tree):
                if isinstance(node, ast.Assign):
                    names = [t.id for t in node.targets if isinstance(t, ast.Name)]
                    assert not any("BATCH_BYTES" in n or n == "_CHUNK_BYTES" for n in names), \
                        f"{path.relative_to(REPO)}: {names} (use mnistconv.io.budget)"
    assert len(found) >= 15


def test_a_gather_maps_the_file_a_budgets_span_at_a_time(tmp_path, monkeypatch):
    """Shuffled positions across a file: the same images as one big map gave, gathered
    through maps of at most the budget (a shuffled gather once held the whole file)."""
    count = 1000
    data = np.random.default_rng(2).integers(0, 256, (count, 8, 8), dtype=np.uint8)
    path = tmp_path / "raw"
    path.write_bytes(b"xyz" + data.tobytes())
    monkeypatch.setattr(budget, "BATCH_BYTES", 64 * 50)
    maps = []
    real = np.memmap

    def counting(*args, **kwargs):
        maps.append(kwargs["shape"][0])
        return real(*args, **kwargs)
    monkeypatch.setattr(np, "memmap", counting)
    positions = np.random.default_rng(1).permutation(count)[:300]
    with open(path, "rb") as f:
        got = gather_from_file(f, 3, Header(count, (8, 8), np.dtype(np.uint8)), positions)
    np.testing.assert_array_equal(got, data[positions])
    assert max(maps) <= 51 and len(maps) >= 19


# --- the image size limit ------------------------------------------------------------------

def test_the_default_cap_is_4096_squared_and_the_option_raises_it(tmp_path):
    src = tmp_path / "big"
    src.mkdir()
    side = 4097
    (src / "train-images-idx3-ubyte").write_bytes(
        bombs.idx_header(8, (1, side, side)) + bytes(side * side))
    (src / "train-labels-idx1-ubyte").write_bytes(bombs.idx_header(8, (1,)) + b"\x03")
    refused = run("info", src)
    assert refused.returncode == 1
    assert refused.stderr.decode() == (
        f"Error: {src / 'train-images-idx3-ubyte'}: image of 4097x4097 exceeds "
        "mnistconv's limit of 16,777,216 pixels per image; raise it with "
        "--max-image-size WxH if the images are really that large\n")
    allowed = run("info", src, "--json", "--max-image-size", "4097x4097")
    assert allowed.returncode == 0, allowed.stderr
    assert b'"count": 1' in allowed.stdout
    for bad, message in [("4097", "--max-image-size '4097' is not WxH; write e.g. 8192x8192"),
                         ("20000x20000", "the image size limit must be between 1 and "
                                         "268,435,456 pixels, not 400,000,000; give "
                                         "e.g. --max-image-size 8192x8192")]:
        r = run("info", src, "--max-image-size", bad)
        assert (r.returncode, r.stderr.decode()) == (2, f"Error: {message}\n")


@pytest.mark.parametrize("command", ["info", "convert", "show", "preview", "compare",
                                     "idx-to-npz"])
def test_every_reading_command_has_the_option_and_its_help_states_the_memory(command):
    r = run(command, "--help")
    text = " ".join(r.stdout.decode().split())
    assert "--max-image-size WxH" in text
    assert "each image held costs W*H bytes per channel (16 MiB at the default, 64 MiB " \
           "at 8192x8192, 256 MiB at 16384x16384)" in text


def test_the_library_limit_is_set_and_restored():
    before = limits.set_max_image_pixels(100)
    try:
        with pytest.raises(FormatError, match="limit of 100 pixels"):
            limits.check_image_size((11, 10), "x")
    finally:
        limits.set_max_image_pixels(before)
    assert limits.MAX_IMAGE_PIXELS == 4096 * 4096


# --- bombs, one per codec: refused in one line, or read within the budget -----------------

def _one_line(err):
    assert err.count("\n") == 1 and err.startswith("Error: ") and "Traceback" not in err, err
    return err


def _check_refused(tmp_path, args, message):
    code, err, peak, _ = run_measured(tmp_path, *args)
    assert code == 1, err
    assert message in _one_line(err)
    assert peak < PEAK_MB
    return err


def test_qmnist_labels_in_xz_claiming_more_than_xz_may_expand(tmp_path):
    src = bombs.qmnist_xz(str(tmp_path), examples=1_000_000)
    labels = Path(src) / "train-labels-idx2-int.xz"
    assert os.path.getsize(labels) < 10_000
    for args in (["info", src], ["convert", src, tmp_path / "o.npz"]):
        err = _check_refused(tmp_path, args, "header declares 1000000 x 8 int32 (32000000 "
                                             "bytes), more than a xz file of")
        assert str(labels) in err
    assert not (tmp_path / "o.npz").exists()


def test_hdf5_chunk_larger_than_the_budget(tmp_path):
    path = bombs.hdf5_gzip(str(tmp_path), count=200_000)
    assert os.path.getsize(path) < 1 << 20
    for args in (["info", path], ["preview", path, "-o", tmp_path / "s.png"],
                 ["compare", path, path]):
        _check_refused(tmp_path, args, f"{path}: 'data' is stored in chunks of 156,800,000 "
                                       "bytes, more than mnistconv's memory budget of "
                                       "33,554,432 per batch; rechunk it")


def test_parquet_rows_sharing_one_dictionary_value(tmp_path):
    path = bombs.parquet_dictionary(str(tmp_path), rows=4_000_000)
    size = os.path.getsize(path)
    assert size < 100_000
    for args in (["info", path], ["convert", path, tmp_path / "o.npz"],
                 ["show", path, "--per-class", "1"]):
        # The values the dictionary expands to (4 M rows of one 73-byte PNG), from its
        # page headers, before any row is made (issue 35).
        _check_refused(tmp_path, args, f"{path}: its image values make 292,000,000 bytes "
                                       f"from {size:,} bytes of file, more than 1032:1 "
                                       "expansion; such a ratio is a decompression bomb, "
                                       "not a dataset")


def test_zstd_arrayrecord_of_identical_records(tmp_path):
    path = bombs.arrayrecord_zstd(str(tmp_path))
    size = os.path.getsize(path)
    assert size < 200_000
    for args in (["info", path], ["compare", path, path]):
        _check_refused(tmp_path, args, f"{path}: holds 20,000 examples of 65,536 bytes "
                                       f"(1,310,720,000 bytes) in {size:,} bytes of file")


@pytest.mark.slow
def test_a_million_repeated_zstd_arrayrecord_records_are_read_as_they_repeat(tmp_path):
    """A million identical 28 x 28 records in 1.1 MB of zstd ArrayRecord hold 784 MB of
    pixels, within the 1032:1 rule, so they are read: a record equal to the one before
    it is neither parsed nor decoded again, and every command stays within the budget."""
    path = bombs.arrayrecord_zstd(str(tmp_path), 1_000_000, 28)
    assert os.path.getsize(path) < 1_200_000
    r = run("info", path, "--json")
    assert r.returncode == 0, r.stderr.decode()
    train = json.loads(r.stdout)["splits"]["train"]
    assert (train["count"], train["shape"], train["class_counts"]) == \
        (1_000_000, [28, 28], {"3": 1_000_000})
    for args in (["compare", path, path], ["show", path, "--per-class", "2"]):
        code, err, peak, _ = run_measured(tmp_path, *args)
        assert code == 0, err
        assert peak < PEAK_MB, (args[0], peak)


def test_gdmnist_gz_at_the_deflate_bound_streams_within_the_budget(tmp_path):
    """760,000 images of zeros in 583 KB of .bin.gz: within deflate's bound, so it is
    read, and every command stays within the budget, shuffled too."""
    path = bombs.gdmnist_gz(str(tmp_path))
    assert os.path.getsize(path) < 600_000
    for args in (["info", path, "--json"],
                 ["convert", path, tmp_path / "o.npz", "--shuffle", "-q"],
                 ["preview", path, "-o", tmp_path / "s.png", "-q"]):
        code, err, peak, _ = run_measured(tmp_path, *args)
        assert code == 0, err
        assert peak < PEAK_MB, (args[0], peak)


def test_large_pngs_in_a_tar_are_refused_over_the_cap(tmp_path):
    path = bombs.tar_of_large_pngs(str(tmp_path), count=10, side=9400)
    assert os.path.getsize(path) < 1 << 20
    for args in (["info", path], ["preview", path, "-o", tmp_path / "s.png"],
                 ["compare", path, path], ["convert", path, tmp_path / "o.npz"]):
        _check_refused(tmp_path, args, "member '000000.png' of 9400x9400 exceeds "
                                       "mnistconv's limit of 16,777,216 pixels per image")


@pytest.mark.parametrize("args", [
    ["preview", "{src}", "-o", "{out}/s.png"],
    ["compare", "{src}", "{src}"],
    ["show", "{src}", "--per-class", "3"],
    ["convert", "{src}", "{out}/o.npz", "--shuffle"],
], ids=["preview", "compare", "show", "shuffle"])
def test_images_at_the_cap_stream_through_every_view_within_the_budget(tmp_path, args):
    """Ten 4096 x 4096 PNGs of zeros (184 KB of tar): at the default cap, so read; each
    view and writer holds a few of them at most (preview took 5.4 GB and compare 7 GB
    for 9400 x 9400 ones before)."""
    src = bombs.tar_of_large_pngs(str(tmp_path), count=10, side=4096)
    out = tmp_path / "out"
    out.mkdir()
    code, err, peak, _ = run_measured(tmp_path, *[a.format(src=src, out=out) for a in args],
                                      "-q")
    assert code == 0, err
    assert peak < PEAK_MB, peak


def test_large_valid_images_through_idx_to_tfrecord_png_stay_bounded(tmp_path):
    """4096 x 4096 gradients (PNG has real work): 1.44 GB for twenty before; now the
    pieces in flight share the budget and the PNG filter works a band at a time."""
    src = bombs.idx_of_large_images(str(tmp_path), count=4)
    out = tmp_path / "o.tfrecord"
    code, err, peak, _ = run_measured(tmp_path, "idx-to-tfrecord", src, out,
                                      "--image-format", "png", "-q")
    assert code == 0, err
    assert peak < PEAK_MB, peak
    back = mnistconv.read(out, "tfrecord").splits["train"]
    first = next(back.batches(1)).images[0]
    side = np.arange(4096)
    np.testing.assert_array_equal(first, (np.add.outer(side, side) % 251).astype(np.uint8))
