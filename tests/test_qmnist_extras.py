"""QMNIST's seven extra label columns (hsf_series, writer_id, ...) travel as per-record
fields through WebDataset (integer keys of each sample's .json) and Parquet (int32
columns after label, Value("int32") in the features), are read back from both (so
webdataset -> npz and parquet -> npz keep them exactly), and are what the webdataset
library and Hugging Face datasets read. Shard plans give a one-machine run's bytes;
hostile extras are one line each, exit 1, nothing written."""

import io
import json
import os
import tarfile

import numpy as np
import pytest

import mnistconv
from mnistconv.runners import plan as plans
from mnistconv.model.records import ArraySplit, Dataset
from helpers import tree_hashes
from test_family import qmnist, run

COLUMNS = ["hsf_series", "writer_id", "writer_digit_index", "nist_class_code",
           "nist_digit_index", "duplicate", "unused"]
NOTE = ("note: QMNIST labels carry 7 more columns (hsf_series, writer_id, "
        "writer_digit_index, nist_class_code, nist_digit_index, duplicate, unused): npz "
        "(extra_<split>, extra_columns), Parquet (int32 columns), WebDataset (.json "
        "keys) and TFRecord (int64 features) keep them; other formats drop them")


def _assert_extras(npz, tables):
    """The npz holds the seven columns of every split, int32, as QMNIST's labels had
    them (tables: split -> N x 8)."""
    back = _npz_extras(npz)
    assert back["extra_columns"].tolist() == COLUMNS
    for split in ("train", "test"):
        assert back[f"extra_{split}"].dtype == np.int32
        assert np.array_equal(back[f"extra_{split}"], tables[split][:, 1:])


def _npz_extras(path):
    with np.load(path) as f:
        return {k: f[k] for k in f.files if k.startswith("extra_")}


# --- WebDataset -----------------------------------------------------------------------

def test_qmnist_to_webdataset_to_npz_keeps_the_seven_columns(tmp_path, capsys):
    src, tables = qmnist(tmp_path / "q")
    code, _, err = run(capsys, "convert", src, tmp_path / "w" / "q.tar")
    assert code == 0
    assert "QMNIST labels carry" not in err
    with tarfile.open(tmp_path / "w" / "q-train-000000.tar") as tar:
        assert tar.getnames()[:3] == ["000000.cls", "000000.json", "000000.png"]
        text = tar.extractfile("000001.json").read()
    row = tables["train"][1].tolist()
    # The keys there before, then the seven, as json.dumps writes them.
    assert text == json.dumps({"index": 1, "class": "1",
                               **dict(zip(COLUMNS, row[1:]))}).encode()
    code, _, err = run(capsys, "convert", tmp_path / "w", tmp_path / "back.npz")
    assert code == 0
    _assert_extras(tmp_path / "back.npz", tables)
    # ... and from npz back to WebDataset: the same tars.
    code, *_ = run(capsys, "convert", tmp_path / "back.npz", tmp_path / "w2" / "q.tar")
    assert code == 0
    assert tree_hashes(tmp_path / "w2") == tree_hashes(tmp_path / "w")


def test_webdataset_library_reads_the_extra_fields(tmp_path, capsys):
    wds = pytest.importorskip("webdataset")
    src, tables = qmnist(tmp_path / "q", n_train=25)
    code, *_ = run(capsys, "convert", src, tmp_path / "w" / "q.tar", "--shard-size", "10",
                   "--split", "train", "--shuffle", "--seed", "3")
    assert code == 0
    samples = list(wds.WebDataset(str(tmp_path / "w" / "q-train-{000000..000002}.tar"),
                                  shardshuffle=False).decode())
    assert len(samples) == 25
    for s in samples:
        meta = s["json"]
        assert list(meta) == ["index", "class"] + COLUMNS
        row = tables["train"][meta["index"]]  # shuffled: each record keeps its own row
        assert [meta[c] for c in COLUMNS] == row[1:].tolist()
        assert all(type(meta[c]) is int for c in COLUMNS)
        assert int(s["cls"]) == row[0]
    # mnistconv reads them back in the shuffled order.
    split = mnistconv.read(tmp_path / "w").splits["train"]
    names, table = mnistconv.model.stream.extra_fields(split)
    assert list(names) == COLUMNS and table.dtype == np.int32
    assert np.array_equal(table, tables["train"][split.indices(), 1:])


def test_webdataset_without_extras_json_is_index_and_class_only(tmp_path):
    split = ArraySplit("train", np.zeros((3, 4, 4), np.uint8), np.array([2, 0, 1]))
    mnistconv.write(Dataset("t", {"train": split}), tmp_path / "w" / "m.tar", "webdataset")
    with tarfile.open(tmp_path / "w" / "m-train-000000.tar") as tar:
        assert tar.extractfile("000000.json").read() == b'{"index": 0, "class": "2"}'
    back = mnistconv.read(tmp_path / "w").splits["train"]
    assert mnistconv.model.stream.extra_fields(back) is None


def _tar(path, metas):
    """A WebDataset tar of 4x4 black PNG samples with these .json objects."""
    from PIL import Image
    buf = io.BytesIO()
    Image.fromarray(np.zeros((4, 4), np.uint8)).save(buf, "PNG")
    png = buf.getvalue()
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:
        for i, meta in enumerate(metas):
            for ext, data in (("cls", b"1"), ("json", json.dumps(meta).encode()),
                              ("png", png)):
                info = tarfile.TarInfo(f"{i:06d}.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))


@pytest.mark.parametrize("second, message", [
    ({"index": 1, "writer_id": "7", "duplicate": 0},
     "member '000001.json': writer_id is \"7\", not an integer; extra fields are int32"),
    ({"index": 1, "writer_id": 2 ** 40, "duplicate": 0},
     "member '000001.json': writer_id is 1099511627776, which does not fit int32; extra "
     "fields are int32"),
    ({"index": 1, "duplicate": 0},
     "member '000001.json' has no writer_id, which the split's first sample has; every "
     "sample's .json holds the same extra fields"),
    ({"index": 1, "writer_id": 5, "duplicate": 0, "hsf_series": 4},
     "member '000001.json' has 'hsf_series', which the split's first sample has not; "
     "every sample's .json holds the same extra fields"),
])
def test_hostile_json_extras_are_one_line(tmp_path, capsys, second, message):
    path = tmp_path / "d-train.tar"
    _tar(path, [{"index": 0, "writer_id": 12, "duplicate": 0}, second])
    code, out, err = run(capsys, "convert", path, tmp_path / "out.npz")
    assert (code, out, err) == (1, "", f"Error: {path}: {message}\n")
    assert not (tmp_path / "out.npz").exists()
    # Another tool's uneven .json keys stop only the writers that would keep them.
    code, out, err = run(capsys, "convert", path, tmp_path / "idx", "--quiet")
    assert (code, err) == (0, "")
    code, out, err = run(capsys, "info", path, "--json")
    assert code == 0 and f"train: no extra fields carried ({path}: {message})" in \
        json.loads(out)["notes"]


def test_a_first_sample_with_a_huge_or_unsafe_key_is_one_line(tmp_path, capsys):
    path = tmp_path / "d-train.tar"
    _tar(path, [{"index": 0, "writer_id": -2 ** 31 - 1}])
    code, _, err = run(capsys, "convert", path, tmp_path / "out.npz")
    assert (code, err) == (1, f"Error: {path}: member '000000.json': writer_id is "
                              "-2147483649, which does not fit int32; extra fields are "
                              "int32\n")
    _tar(path, [{"index": 0, "../x": 3}])
    code, _, err = run(capsys, "convert", path, tmp_path / "out.npz")
    assert (code, err) == (1, f"Error: {path}: member '000000.json': extra field name "
                              "'../x' is not a plain name (letters, digits, _ . -; at "
                              "most 64 characters); rename the field\n")
    assert not (tmp_path / "out.npz").exists()


def test_json_keys_that_are_not_integers_in_every_sample_are_ignored(tmp_path, capsys):
    path = tmp_path / "d-train.tar"
    _tar(path, [{"index": 0, "caption": "a", "w": 2.5, "ok": True, "n": 7},
                {"index": 1, "caption": "b", "w": 1.0, "ok": False, "n": -7}])
    split = mnistconv.read(path).splits["train"]
    names, table = mnistconv.model.stream.extra_fields(split)
    assert names == ("n",) and table.tolist() == [[7], [-7]]


# --- Parquet --------------------------------------------------------------------------

def test_qmnist_to_parquet_to_npz_keeps_the_seven_columns(tmp_path, capsys):
    pq = pytest.importorskip("pyarrow.parquet")
    src, tables = qmnist(tmp_path / "q")
    code, _, err = run(capsys, "convert", src, tmp_path / "hf", "--to", "parquet",
                       "--shards", "2", "--row-group-size", "4")
    assert code == 0
    assert "QMNIST labels carry" not in err
    f = pq.ParquetFile(tmp_path / "hf" / "data" / "train-00001-of-00002.parquet")
    schema = f.schema_arrow
    assert schema.names == ["image", "label"] + COLUMNS
    assert [str(schema.field(c).type) for c in COLUMNS] == ["int32"] * 7
    features = json.loads(schema.metadata[b"huggingface"])["info"]["features"]
    assert list(features) == ["image", "label"] + COLUMNS
    assert features["writer_id"] == {"dtype": "int32", "_type": "Value"}
    assert f.read().column("writer_id").to_pylist() == tables["train"][6:, 2].tolist()
    card = (tmp_path / "hf" / "README.md").read_text()
    assert '  - name: "unused"\n    dtype: int32\n  splits:' in card
    code, *_ = run(capsys, "convert", tmp_path / "hf", tmp_path / "back.npz")
    assert code == 0
    _assert_extras(tmp_path / "back.npz", tables)


def test_datasets_reads_the_extra_columns_typed(tmp_path, capsys, hf_env):
    datasets = pytest.importorskip("datasets")
    src, tables = qmnist(tmp_path / "q")
    code, *_ = run(capsys, "convert", src, tmp_path / "hf", "--to", "parquet")
    assert code == 0
    files = {s: str(tmp_path / "hf" / "data" / f"{s}-00000-of-00001.parquet")
             for s in ("train", "test")}
    for ds in (datasets.load_dataset("parquet", data_files=files),
               datasets.load_dataset(str(tmp_path / "hf"))):  # its card
        for split in ("train", "test"):
            features = ds[split].features
            assert list(features) == ["image", "label"] + COLUMNS
            assert all(features[c] == datasets.Value("int32") for c in COLUMNS)
            assert [ds[split][c] for c in COLUMNS] == tables[split][:, 1:].T.tolist()
            assert ds[split]["label"] == tables[split][:, 0].tolist()


def test_parquet_without_extras_has_only_image_and_label(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    split = ArraySplit("train", np.zeros((3, 4, 4), np.uint8), np.array([2, 0, 1]))
    mnistconv.write(Dataset("t", {"train": split}), tmp_path / "m.parquet", "parquet")
    schema = pq.ParquetFile(tmp_path / "m.parquet").schema_arrow
    assert schema.names == ["image", "label"]
    # Labels 0..2 and no names: three classes (no floor of ten).
    assert schema.metadata[b"huggingface"] == (
        b'{"info": {"features": {"image": {"_type": "Image"}, "label": {"names": ["0", '
        b'"1", "2"], "_type": "ClassLabel"}}}}')
    assert mnistconv.model.stream.extra_fields(mnistconv.read(tmp_path / "m.parquet")
                                         .splits["m"]) is None


def test_hub_parquet_integer_columns_are_extra_fields(tmp_path, capsys):
    """A Hub dataset's other integer columns of 32 bits or fewer are extra fields;
    int64 columns (ids, timestamps: their values need not fit int32) and columns of
    other types are not, and never stop a conversion."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from mnistconv.codecs import png
    data, offsets = png.encode_batch(np.zeros((3, 4, 4), np.uint8))
    images = [{"bytes": data[offsets[i]:offsets[i + 1]], "path": None} for i in range(3)]
    table = pa.table({"image": images, "label": pa.array([1, 2, 3], pa.int64()),
                      "writer": pa.array([7, -8, 2 ** 31 - 1], pa.int32()),
                      "id": pa.array([2 ** 40, 1, 2], pa.int64()),
                      "note": ["a", "b", "c"], "flag": pa.array([1, 0, 1], pa.uint8())})
    pq.write_table(table, tmp_path / "train.parquet")
    names, extra = mnistconv.model.stream.extra_fields(
        mnistconv.read(tmp_path / "train.parquet").splits["train"])
    assert names == ("writer", "flag") and extra.dtype == np.int32
    assert extra.tolist() == [[7, 1], [-8, 0], [2 ** 31 - 1, 1]]
    code, out, err = run(capsys, "convert", tmp_path / "train.parquet",
                         tmp_path / "out.npz", "--quiet")
    assert (code, err) == (0, "")
    with np.load(tmp_path / "out.npz") as f:
        assert f["extra_columns"].tolist() == ["writer", "flag"]


def test_hostile_parquet_extra_columns_are_one_line(tmp_path, capsys):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from mnistconv.codecs import png
    data, offsets = png.encode_batch(np.zeros((3, 4, 4), np.uint8))
    images = [{"bytes": data[offsets[i]:offsets[i + 1]], "path": None} for i in range(3)]
    pq.write_table(pa.table({"image": images, "label": pa.array([1, 2, 3]),
                             "writer": pa.array([5, None, 0], pa.int32())}),
                   tmp_path / "train.parquet")
    code, out, err = run(capsys, "convert", tmp_path / "train.parquet",
                         tmp_path / "out.npz")
    assert (code, out, err) == (1, "", f"Error: {tmp_path / 'train.parquet'}: 1 rows "
                                       "have no 'writer'; give every row a value, or drop "
                                       "the column\n")
    assert not (tmp_path / "out.npz").exists()
    # Formats that drop extra fields never read them.
    code, *_ = run(capsys, "convert", tmp_path / "train.parquet", tmp_path / "idx")
    assert code == 0


def test_splits_with_other_extra_fields_are_one_line(tmp_path, capsys):
    pytest.importorskip("pyarrow")  # it writes Parquet
    src, _ = qmnist(tmp_path / "q")
    code, *_ = run(capsys, "convert", src, tmp_path / "q.npz")
    with np.load(tmp_path / "q.npz") as f:
        arrays = {k: f[k] for k in f.files if k != "extra_test"}
    np.savez(tmp_path / "half.npz", **arrays)
    code, out, err = run(capsys, "convert", tmp_path / "half.npz", tmp_path / "hf",
                         "--to", "parquet")
    assert (code, out) == (1, "")
    assert err == (f"Error: {tmp_path / 'hf'}/: split test has extra fields (none), split "
                   f"train has ({', '.join(COLUMNS)}); write one split at a time "
                   "(--split)\n")
    assert not (tmp_path / "hf").exists()
    code, *_ = run(capsys, "convert", tmp_path / "half.npz", tmp_path / "hf", "--to",
                   "parquet", "--split", "train")
    assert code == 0


# --- The note, and shard plans --------------------------------------------------------

def test_the_note_stays_for_a_format_that_drops_them(tmp_path, capsys):
    pytest.importorskip("pyarrow")  # it writes Parquet
    src, _ = qmnist(tmp_path / "q")
    code, _, err = run(capsys, "convert", src, tmp_path / "img", "--to", "imagefolder")
    assert code == 0
    assert NOTE in err
    code, _, err = run(capsys, "convert", src, tmp_path / "hf", "--to", "parquet")
    # (its only note: the identity the metadata states, given none and proved none)
    assert code == 0 and "QMNIST labels carry" not in err
    assert [line for line in err.splitlines() if "note:" in line] == [
        f"  note: {tmp_path / 'hf'}/: the metadata names the dataset 'hf' and states no "
        "license or citation: its input is not a published dataset's files (no published "
        "checksum matches); describe it with --name, --description, --license, --citation, "
        "--homepage, --version and --date-published (the same keywords of mnistconv.write)"]


@pytest.mark.parametrize("fmt, path, opts", [
    ("webdataset", "w/q.tar", {"shard_size": "5"}),
    ("parquet", "hf", {"shards": 3, "row_group_size": 2}),
])
def test_shard_plans_give_a_local_runs_bytes(tmp_path, fmt, path, opts):
    pytest.importorskip("pyarrow")
    src, tables = qmnist(tmp_path / "q", n_train=14, n_test=7)
    # Shuffled: each planned shard takes its rows' extra fields from the selection.
    ds = mnistconv.model.stream.select(mnistconv.read(src), shuffle=True, seed=9)
    mnistconv.write(ds, str(tmp_path / "a" / path), fmt, **opts)
    with plans.PlanRun(ds, str(tmp_path / "b" / path), fmt, opts) as run:
        run.prepare()
        for number in reversed(range(len(run.plan["tasks"]))):
            run.run_task(number)
        assert run.finish()[0] is True
    assert tree_hashes(tmp_path / "a") == tree_hashes(tmp_path / "b")
    back = mnistconv.read(tmp_path / "b" / os.path.dirname(path) if fmt == "webdataset"
                          else tmp_path / "b" / path)
    for name, split in back.splits.items():
        names, table = mnistconv.model.stream.extra_fields(split)
        order = ds.splits[name].indices()
        assert list(names) == COLUMNS
        assert np.array_equal(table, tables[name][order, 1:])
