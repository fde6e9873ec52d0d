"""The command line as pipelines use it: selections, '-' for stdin/stdout, --json,
info and formats, and one walk over every reader/writer pair in the registry."""

import json
import os

import numpy as np
import pytest

import mnistconv
from mnistconv.formats import registry
from helpers import SAMPLE, make_idx_dir, run, small_digits


@pytest.fixture()
def src(tmp_path):
    images, labels = small_digits(100, classes=10)
    make_idx_dir(tmp_path / "src", images, labels)
    make_idx_dir(tmp_path / "src", images[:30], labels[:30], split="test")
    return tmp_path / "src", images, labels


def load(path):
    with np.load(path, allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files}


def test_limit_and_split(tmp_path, src):
    folder, images, labels = src
    assert run("idx-to-npz", folder, tmp_path / "a.npz", "--limit", "7", "--split",
               "train").returncode == 0
    arrays = load(tmp_path / "a.npz")
    assert sorted(arrays) == ["x_train", "y_train"]
    np.testing.assert_array_equal(arrays["x_train"], images[:7])
    np.testing.assert_array_equal(arrays["y_train"], labels[:7])


def test_per_class_is_balanced_and_interleaved_in_source_order(tmp_path, src):
    folder, images, labels = src
    assert run("idx-to-npz", folder, tmp_path / "b.npz", "--per-class", "3",
               "--split", "train").returncode == 0
    arrays = load(tmp_path / "b.npz")
    assert list(arrays["y_train"]) == list(range(10)) * 3
    expected = [np.flatnonzero(labels == c)[k] for k in range(3) for c in range(10)]
    np.testing.assert_array_equal(arrays["x_train"], images[expected])


def test_shuffle_is_reproducible_by_seed(tmp_path, src):
    folder, images, labels = src
    for name, seed in (("s1", 5), ("s2", 5), ("s3", 6)):
        assert run("idx-to-npz", folder, tmp_path / f"{name}.npz", "--shuffle", "--seed",
                   seed).returncode == 0
    s1, s2, s3 = (load(tmp_path / f"{n}.npz") for n in ("s1", "s2", "s3"))
    np.testing.assert_array_equal(s1["x_train"], s2["x_train"])
    assert not np.array_equal(s1["y_train"], s3["y_train"])
    order = np.random.default_rng(5).permutation(100)
    np.testing.assert_array_equal(s1["x_train"], images[order])
    assert (tmp_path / "s1.npz").read_bytes() == (tmp_path / "s2.npz").read_bytes()


def test_per_class_more_than_available_is_an_error(tmp_path, src):
    folder, *_ = src
    result = run("idx-to-npz", folder, tmp_path / "c.npz", "--per-class", "50")
    assert result.returncode == 2
    assert "has only 10 examples, fewer than --per-class 50" in result.stderr.decode()
    assert not (tmp_path / "c.npz").exists()


def test_unknown_split_is_named(tmp_path, src):
    folder, *_ = src
    result = run("idx-to-npz", folder, tmp_path / "c.npz", "--split", "validation")
    assert (result.returncode, result.stderr.decode()) == (
        2, f"Error: {folder / 'train-images-idx3-ubyte'}: no split named validation; "
           "splits present: train, test\n")


def test_stdout_and_stdin(tmp_path, src):
    folder, images, labels = src
    to_stdout = run("idx-to-npz", folder, "-")
    assert to_stdout.returncode == 0 and to_stdout.stdout[:4] == b"PK\x03\x04"
    run("idx-to-npz", folder, tmp_path / "file.npz")
    assert to_stdout.stdout == (tmp_path / "file.npz").read_bytes()
    from_stdin = run("npz-to-idx", "-", tmp_path / "back", stdin=to_stdout.stdout)
    assert from_stdin.returncode == 0, from_stdin.stderr
    assert (tmp_path / "back" / "train-images-idx3-ubyte").read_bytes() == \
        (folder / "train-images-idx3-ubyte").read_bytes()
    result = run("npz-to-idx", tmp_path / "file.npz", "-")
    assert (result.returncode, result.stderr.decode()) == (
        2, "Error: -: idx cannot be written to stdout; name an output file instead\n")


def test_json_summary_for_ci(tmp_path, src):
    folder, *_ = src
    result = run("idx-to-npz", folder, tmp_path / "j.npz", "--json")
    assert result.returncode == 0 and result.stderr == b""
    summary = json.loads(result.stdout)
    assert summary["input"] == {"path": str(folder), "format": "idx"}
    assert summary["output"] == {"path": str(tmp_path / "j.npz"), "format": "npz"}
    assert summary["splits"] == {"train": {"count": 100, "shape": [28, 28], "dtype": "uint8"},
                                 "test": {"count": 30, "shape": [28, 28], "dtype": "uint8"}}
    import hashlib
    data = (tmp_path / "j.npz").read_bytes()
    assert summary["files"] == [{"path": str(tmp_path / "j.npz"), "bytes": len(data),
                                 "sha256": hashlib.sha256(data).hexdigest()}]


def test_quiet_and_non_tty_print_no_progress(tmp_path, src):
    folder, *_ = src
    result = run("idx-to-npz", folder, tmp_path / "q.npz", "-q")
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
    result = run("idx-to-npz", folder, tmp_path / "r.npz")
    lines = result.stderr.decode().splitlines()
    assert lines[0].startswith("idx -> npz: train 100, test 30 in ")
    assert lines[1].startswith(f"  {tmp_path / 'r.npz'}  ")
    assert len(lines) == 2  # no progress bar drawn into a log


@pytest.mark.parametrize("layout,shape", [("nhw", (100, 28, 28)), ("nhwc", (100, 28, 28, 1)),
                                          ("nchw", (100, 1, 28, 28))])
def test_npz_layouts_and_float(tmp_path, src, layout, shape):
    folder, images, labels = src
    out = tmp_path / f"{layout}.npz"
    assert run("idx-to-npz", folder, out, "--layout", layout, "--float",
               "--compress").returncode == 0
    arrays = load(out)
    assert arrays["x_train"].shape == shape and arrays["x_train"].dtype == np.float32
    np.testing.assert_allclose(arrays["x_train"].reshape(100, 28, 28), images / 255.0,
                               rtol=1e-6)
    assert arrays["y_train"].dtype == np.uint8


def test_info_text_and_json(src):
    folder, images, labels = src
    result = run("info", folder, "--json")
    facts = json.loads(result.stdout)
    assert facts["format"] == "idx"
    train = facts["splits"]["train"]
    assert (train["count"], train["shape"], train["dtype"], train["label_range"]) == \
        (100, [28, 28], "uint8", [0, 9])
    assert train["class_counts"] == {str(c): 10 for c in range(10)}
    import hashlib
    files = {f["path"]: f["sha256"] for f in facts["files"]}
    path = str(folder / "train-images-idx3-ubyte")
    assert files[path] == hashlib.sha256(open(path, "rb").read()).hexdigest()
    text = run("info", folder).stdout.decode()
    assert f"{folder}: idx, 2 split(s)" in text
    assert "train: 100 images 28x28 uint8, labels uint8 0..9\n    schema: 28x28 grey " \
           "uint8, class\n" in text
    assert train["schema"] == {
        "image": {"shape": [28, 28], "height": 28, "width": 28, "channels": 1,
                  "dtype": "uint8"},
        "target": {"kind": "class", "classes": None, "names": [], "dtype": "uint8"},
        "extras": []}


def test_info_reads_gzip_through(tmp_path):
    """A truncated .gz is only found by decompressing: info must do it."""
    import gzip
    images, labels = small_digits(20)
    make_idx_dir(tmp_path, images, labels, gz=True)
    path = tmp_path / "train-images-idx3-ubyte.gz"
    data = gzip.decompress(path.read_bytes())
    path.write_bytes(gzip.compress(data[:-784]))
    result = run("info", tmp_path)
    assert (result.returncode, result.stderr.decode()) == (
        1, f"Error: {path}: truncated data: header declares 20 x 28 x 28 uint8 (15680 bytes), "
           "the file holds 14896; the file is cut short: download or copy it again\n")


def test_info_hashes_on_a_thread_and_raises_what_hashing_raised(tmp_path):
    """info's digests run beside the label counts (cli/info.py hash_in_background): the
    caller gets each file's size and SHA-256 in order, or the refusal hashing met."""
    import hashlib
    from mnistconv.cli.info import hash_in_background
    from mnistconv.errors import MnistconvError
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"x" * 3_000_000)
    b.write_bytes(b"")
    assert hash_in_background([str(a), str(b)])() == [
        (str(a), 3_000_000, hashlib.sha256(a.read_bytes()).hexdigest()),
        (str(b), 0, hashlib.sha256(b"").hexdigest())]
    os.mkfifo(tmp_path / "fifo")
    wait = hash_in_background([str(a), str(tmp_path / "fifo")])
    with pytest.raises(MnistconvError, match="fifo"):
        wait()


def test_sha256sums_is_named_as_the_files_are(tmp_path, src):
    """A relative DST: the written files and their SHA256SUMS are shown relative alike
    (the text summary and --json); an absolute DST: absolute."""
    folder = src[0]
    r = run("convert", folder, "s1/m.npz", "--sha256sums", cwd=tmp_path)
    lines = r.stderr.decode().splitlines()
    assert (r.returncode, lines[1].split()[0], lines[-1]) == (
        0, "s1/m.npz", "  s1/SHA256SUMS  (sha256sum -c)")
    r = run("convert", folder, "s2/m.npz", "--sha256sums", "--json", cwd=tmp_path)
    assert json.loads(r.stdout)["sha256sums"] == "s2/SHA256SUMS"
    r = run("convert", folder, tmp_path / "s3" / "m.npz", "--sha256sums", "--json")
    assert json.loads(r.stdout)["sha256sums"] == str(tmp_path / "s3" / "SHA256SUMS")
    assert (tmp_path / "s1" / "SHA256SUMS").read_text().endswith("  m.npz\n")


def test_formats_lists_the_registry():
    result = run("formats", "--json")
    names = [f["name"] for f in json.loads(result.stdout)]
    assert names == list(registry.FORMATS)
    assert {"idx", "npz"} <= set(names)


def test_formats_lists_an_option_both_sides_take_once():
    lines = run("formats").stdout.decode().splitlines()
    parquet = lines[[line.split(" ")[0] for line in lines].index("parquet") + 1]
    assert parquet.split() == ["options:", "--split-name", "--config", "--shards",
                               "--row-group-size", "--workers", "--name", "--description",
                               "--license", "--citation", "--homepage", "--version",
                               "--date-published"]


def test_formats_lines_up_its_columns():
    # Every description starts in one column, every options line in the next, whatever
    # the length of a format's name (arrayrecord and imagefolder once pushed theirs on).
    lines = run("formats").stdout.decode().splitlines()
    rows = [line for line in lines if not line.startswith(" ")]
    options = [line for line in lines if line.startswith(" ")]
    assert [row.split()[0] for row in rows] == list(registry.FORMATS)
    width = max(len(name) for name in registry.FORMATS)
    for row in rows:  # name, two spaces, modes (r, w, rw) padded to 2, two spaces
        name, modes = row.split()[:2]
        assert row[:width + 2] == f"{name:<{width}}  " and row[width + 2:width + 6] \
            == f"{modes:<2}  " and row[width + 6] != " ", row
    assert {len(line) - len(line.lstrip(" ")) for line in options} == {width + 6}
    assert all(line.lstrip(" ").startswith(("options: ", "holds: ")) for line in options)
    assert sum(line.lstrip(" ").startswith("holds: ") for line in options) == len(rows)


def test_every_pair_command_exists_and_helps():
    from click.testing import CliRunner
    from mnistconv.cli import cli
    listing = " ".join(run("--help").stdout.decode().split())  # help wraps long lists
    for r in registry.readers():
        writers = [w.name for w in registry.writers() if w.name != r.name]
        assert f"{r.name}-to-WRITER {', '.join(sorted(writers))}" in listing
        for w in writers:
            result = CliRunner().invoke(cli, [f"{r.name}-to-{w}", "--help"])
            assert result.exit_code == 0
            assert f"mnistconv {r.name}-to-{w} " in result.output  # its example


def test_every_reader_writer_pair_round_trips(tmp_path):
    """Walk the registry: idx -> every writer -> every reader -> idx gives the same
    labels, and the same pixels wherever the path is lossless."""
    images, labels = small_digits(20, classes=10)
    ds = mnistconv.Dataset("gen", {"train": mnistconv.ArraySplit("train", images, labels)})
    lossy = {}
    for w in registry.writers():
        out = tmp_path / (f"w-{w.name}" + ("/" if w.output_is_directory else
                                           (w.extensions[0] if w.extensions else "")))
        options = {"image_format": "png"} if w.name == "tfrecord" else {}
        mnistconv.write(ds, out, w.name, **options)
        back = mnistconv.read(out, w.name)
        split = back.splits.get("train") or next(iter(back.splits.values()))
        got = np.concatenate([b.images for b in split.batches()])
        np.testing.assert_array_equal(split.labels(), labels, err_msg=w.name)
        np.testing.assert_array_equal(got.reshape(images.shape), images, err_msg=w.name)
        lossy[w.name] = False
    assert {"idx", "npz"} <= set(lossy)


def test_sample_converts_to_every_writer(tmp_path):
    for w in registry.writers():
        out = tmp_path / (f"s-{w.name}" + ("/" if w.output_is_directory else
                                           (w.extensions[0] if w.extensions else "")))
        # One split: some single-file formats (GDMNIST1) hold one split per file.
        result = run("convert", SAMPLE, out, "--to", w.name, "--split", "train", "-q")
        assert result.returncode == 0, (w.name, result.stderr)


def test_progress_only_for_a_terminal(monkeypatch, capsys):
    from mnistconv.cli import common
    monkeypatch.setattr(common, "stderr_is_terminal", lambda: False)
    assert type(common.make_progress(quiet=False)) is mnistconv.model.records.Progress
    monkeypatch.setattr(common, "stderr_is_terminal", lambda: True)
    assert type(common.make_progress(quiet=True)) is mnistconv.model.records.Progress
    bars = common.make_progress(quiet=False)
    assert isinstance(bars, common.RichProgress)
    bars.start("train", 10)
    bars.advance(10)
    task = bars.bars.tasks[0]
    assert (task.description, task.completed, task.total) == ("train", 10, 10)
    bars.finish()
    # Closed here: a display left open would be stopped (and drawn) by the next
    # command's first note, on whatever stderr that test captures.
    bars.close()
    assert common._open == []


def test_to_offers_only_the_formats_mnistconv_writes():
    r = run("convert", "--help")
    assert r.returncode == 0
    text = " ".join(r.stdout.decode().split())
    writable = [n for n, f in registry.FORMATS.items() if f.can_write]
    read_only = [n for n, f in registry.FORMATS.items() if not f.can_write]
    assert read_only and f"--to [{'|'.join(writable)}]" in text
    r = run("convert", "x", "y", "--to", read_only[0])
    assert r.returncode == 2
    assert f"'{read_only[0]}' is not one of" in r.stderr.decode()


def test_a_misspelt_selection_key_is_a_usage_error_listing_the_valid_ones(tmp_path):
    with pytest.raises(mnistconv.UsageError) as raised:
        mnistconv.convert(SAMPLE, tmp_path / "s.npz", select={"per_clas": 3})
    assert str(raised.value) == (
        "select takes no key 'per_clas'; it takes: splits, limit, per_class, shuffle, "
        "seed, transpose, split_off, split_off_from, stratify")
    assert raised.value.exit_code == 2 and not (tmp_path / "s.npz").exists()
