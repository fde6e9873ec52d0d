"""One line, never a traceback, for what the newer readers and options are given: numbers
past int64 or Python's limits, digits that are not ASCII, JSON nested past the
recursion limit, names no writer can store, and a damaged plan progress record."""

import io
import json
import tarfile

import numpy as np
import pytest

import mnistconv
from mnistconv.model.records import ArraySplit, Dataset

from helpers import run_main as run, tree_hashes


def _dataset(n=12, names=()):
    images = (np.arange(n * 28 * 28) % 253).astype(np.uint8).reshape(n, 28, 28)
    split = ArraySplit("train", images, np.arange(n, dtype=np.uint8) % 10)
    split.header = split.header.with_(class_names=tuple(names))
    return Dataset("x", {"train": split})


@pytest.fixture
def src(tmp_path):
    path = tmp_path / "src.npz"
    mnistconv.write(_dataset(), path)
    return path


def test_webdataset_index_past_int64(tmp_path, capsys):
    folder = tmp_path / "w"
    mnistconv.write(_dataset(), folder, "webdataset")
    shard = folder / "w-train-000000.tar"
    with tarfile.open(shard) as t:
        members = [(m, t.extractfile(m).read()) for m in t.getmembers()]
    with tarfile.open(shard, "w") as t:
        for m, data in members:
            if m.name == "000003.json":
                data = b'{"index": 9223372036854775808, "class": "3"}'
                m.size = len(data)
            t.addfile(m, io.BytesIO(data))
    code, _, err = run(capsys, "info", folder)
    assert (code, err) == (1, f"Error: {shard}: member '000003.json' gives index "
                              "9223372036854775808, which does not fit int64; an index is "
                              "a sample's position in its collection\n")


def test_imagefolder_file_named_with_a_superscript_digit(tmp_path, capsys):
    folder = tmp_path / "f"
    mnistconv.write(_dataset(), folder, "imagefolder")
    png = next((folder / "train").rglob("03.png"))
    png.rename(png.parent / "\u00b2.png")  # '²'.isdigit() is True, int('²') fails
    code, out, err = run(capsys, "info", folder, "--json")
    assert (code, err) == (0, "")
    assert json.loads(out)["splits"]["train"]["count"] == 12


def test_class_map_index_with_a_superscript_digit(tmp_path):
    from mnistconv.codecs.classes import read_classmap_csv
    path = tmp_path / "k49_classmap.csv"
    path.write_text("index,codepoint,char\n0,U+3042,\u3042\n\u00b2,U+3044,\u3044\n")
    with pytest.raises(mnistconv.FormatError) as e:
        read_classmap_csv(path)
    assert str(e.value) == f"{path}: line 3 is not 'index,codepoint,char': " \
                           "'\u00b2,U+3044,\u3044'; fix that line, or download the class map again"


def _parquet_with_metadata(tmp_path, huggingface):
    import pyarrow.parquet as pq
    mnistconv.write(_dataset(names=[str(i) for i in range(10)]), tmp_path / "p/", "parquet")
    path = next((tmp_path / "p").rglob("*.parquet"))
    table = pq.read_table(path)
    pq.write_table(table.replace_schema_metadata({b"huggingface": huggingface}), path)
    return path


def test_parquet_huggingface_metadata_nested_100000_deep(tmp_path, capsys):
    path = _parquet_with_metadata(tmp_path, b'{"info": ' + b"[" * 100_000 + b"]" * 100_000
                                  + b"}")
    code, _, err = run(capsys, "convert", path, tmp_path / "out.npz")
    assert (code, err) == (1, f"Error: {path}: its huggingface metadata is not valid JSON "
                              "(nested deeper than mnistconv reads); the file is damaged: download, copy or convert it again\n")
    assert not (tmp_path / "out.npz").exists()


@pytest.mark.parametrize("to", ["idx", "tfds", "gdmnist"])
def test_classlabel_name_with_a_lone_surrogate(tmp_path, capsys, to):
    names = [str(i) for i in range(10)]
    names[3] = "\ud800x"
    path = _parquet_with_metadata(tmp_path, json.dumps(
        {"info": {"features": {"image": {"_type": "Image"},
                               "label": {"_type": "ClassLabel", "names": names}}}}).encode())
    code, _, err = run(capsys, "convert", path, tmp_path / "out/", "--to", to)
    assert (code, err) == (1, f"Error: {path}: ClassLabel names, class 3: class name "
                              "'\\ud800x' is not UTF-8 text; write the class names as "
                              "UTF-8 text\n")
    assert not (tmp_path / "out").exists()


def test_tfds_metadata_nested_past_the_recursion_limit(tmp_path, capsys):
    mnistconv.write(_dataset(), tmp_path / "t/", "tfds")
    info = next((tmp_path / "t").rglob("dataset_info.json"))
    info.write_text("[" * 100_000)
    code, _, err = run(capsys, "info", tmp_path / "t")
    assert (code, err) == (1, f"Error: {info}: is not valid JSON (nested deeper than "
                              "mnistconv reads); the file is damaged: download, copy or convert it again\n")


HUGE = "1" + "0" * 400
SIZES = ["1e400MB", HUGE + "MB", HUGE + ".5MB", "1" + "0" * 5000 + "MB", "\u00b2MB", "\u0663MB"]
SAID = {"tfds": "--shard-size must be bytes with a unit, e.g. 256MB or 1GiB (MB = "
                "1,000,000 bytes, MiB = 1,048,576; 1 KiB to 1 TiB)",
        "webdataset": "--shard-size must be a number of samples (10000) or of bytes with "
                      "a unit (100MB, 1GiB; MB = 1,000,000 bytes, MiB = 1,048,576)"}


@pytest.mark.parametrize("to", list(SAID))
@pytest.mark.parametrize("size", SIZES, ids=["1e400", "10**400", "10**400.5", "10**5000",
                                             "superscript", "arabic-indic"])
def test_shard_size_out_of_every_range(src, tmp_path, capsys, to, size):
    from mnistconv.limits import printable
    code, _, err = run(capsys, "convert", src, tmp_path / "out/", "--to", to,
                       "--shard-size", size)
    assert (code, err) == (2, f"Error: {SAID[to]}, not {printable(size)}; pass a value it "
                              "accepts (see --help)\n")
    assert not (tmp_path / "out").exists()


# --- a damaged plan progress record under --resume --------------------------------------

def _plan(src, out, *extra):
    return ["convert", src, out, "--shards", "2", "-q", *extra]


SHARD = "out.tfrecord-00000-of-00002"


def _entry(**change):
    """A damage that changes fields of the recorded shard's entry (its file intact)."""
    return lambda record: record["shards"][SHARD].update(change)


@pytest.mark.parametrize("damage", [
    lambda r: r.update(shards=[]), lambda r: r.update(shards=None),
    lambda r: r["shards"].update({SHARD: 5}), _entry(bytes="x"), _entry(sha256=1),
    _entry(counters=[1]), _entry(counters=None), _entry(counters=[1, 2, 3, 4, "5"]),
    lambda r: r.update(finished=[1])],
    ids=["list", "null", "number", "bytes", "sha256", "counters-short", "counters-null",
         "counters-text", "finished"])
def test_damaged_progress_record_is_redone(src, tmp_path, capsys, damage):
    clean = tmp_path / "clean"
    clean.mkdir()
    assert run(capsys, *_plan(src, clean / "out.tfrecord"))[0] == 0
    folder = tmp_path / "plan"
    folder.mkdir()
    out = folder / "out.tfrecord"
    assert run(capsys, *_plan(src, out, "--num-tasks", "2", "--task-index", "0"))[0] == 0
    record = folder / ".out.tfrecord.mnistconv-plan.json"
    data = json.loads(record.read_text())
    damage(data)
    record.write_text(json.dumps(data))
    for task in ("0", "1"):
        code, _, err = run(capsys, *_plan(src, out, "--num-tasks", "2", "--task-index",
                                          task, "--resume"))
        assert (code, err) == (0, "")
    assert tree_hashes(folder) == tree_hashes(clean)  # (the record is hidden)
    assert json.loads(record.read_text())["finished"] is True


@pytest.mark.parametrize("text", ["[" * 100_000, "{", '{"plan_hash": 5}', "[]"],
                         ids=["deep", "cut", "hash-type", "list"])
def test_unreadable_progress_record_says_it_is_damaged(src, tmp_path, capsys, text):
    out = tmp_path / "out.tfrecord"
    record = tmp_path / ".out.tfrecord.mnistconv-plan.json"
    record.write_text(text)
    code, _, err = run(capsys, *_plan(src, out, "--resume"))
    assert (code, err) == (2, f"Error: {record}: is damaged: it names no plan whose "
                              "progress it holds; use --force to start over\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == [record.name, "src.npz"]
    assert run(capsys, *_plan(src, out, "--resume", "--force"))[0] == 0


# --- siblings: numbers in `show`'s options --------------------------------------------

DIGITS_5000 = "1" + "0" * 5000


@pytest.mark.parametrize("option,value,said", [
    ("--index", DIGITS_5000, "is not a list of positions or ranges; write e.g. 0:20 or "
                             "3,7,10:12"),
    ("--index", "0:" + DIGITS_5000, "is not a list of positions or ranges; write e.g. 0:20 "
                                    "or 3,7,10:12"),
    ("--index", "\u00b2", "is not a list of positions or ranges; write e.g. 0:20 or "
                          "3,7,10:12"),
    ("--grid", DIGITS_5000 + "x2", "is not COLSxROWS; write e.g. 10x2"),
    ("--grid", "\u0663x2", "is not COLSxROWS; write e.g. 10x2")],
    ids=["index", "range", "superscript", "grid", "arabic-indic"])
def test_show_numbers_past_every_range(src, capsys, option, value, said):
    from mnistconv.limits import printable
    code, out, err = run(capsys, "show", src, option, value)
    assert (code, out, err) == (2, "", f"Error: {option} {printable(value)} {said}\n")
