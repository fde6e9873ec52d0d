"""compare: exact equality across formats, the right error figures for lossy copies
(JPEG made with OpenCV, and a JPEG TFRecord read back by TensorFlow), exit codes, and
how splits pair up. Expected figures are computed here with numpy, not by mnistconv."""

import json
import math

import numpy as np
import pytest

from mnistconv import ArraySplit, Batch, Dataset
from mnistconv.views import compare as comparing
from mnistconv.formats import registry
from mnistconv.model.records import Split
from helpers import SAMPLE, make_idx_dir, run, small_digits


def figures(a, b, worst=5):
    """Independent expected figures for uint8 image stacks a and b."""
    diff = np.abs(a.astype(np.int64) - b.astype(np.int64))
    mse = (diff.astype(np.float64) ** 2).mean()
    per_max = diff.reshape(len(a), -1).max(axis=1)
    per_mean = diff.reshape(len(a), -1).mean(axis=1)
    # worst first by max error, then mean error, then earlier position
    order = sorted(range(len(a)), key=lambda i: (-per_max[i], -per_mean[i], i))
    return {
        "mean": diff.mean(), "max": float(diff.max()),
        "share_differing": np.count_nonzero(diff) / diff.size,
        "psnr_db": 10 * math.log10(255 ** 2 / mse) if mse else None,
        "worst": [i for i in order[:worst] if per_max[i] > 0],
        "worst_max": [float(per_max[i]) for i in order[:worst] if per_max[i] > 0],
    }


def check_figures(split_json, expected):
    err = split_json["pixel_error"]
    assert err["mean"] == pytest.approx(expected["mean"], rel=1e-9)
    assert err["max"] == expected["max"]
    assert err["share_differing"] == pytest.approx(expected["share_differing"], rel=1e-12)
    if expected["psnr_db"] is None:
        assert err["psnr_db"] is None and err["identical"] is True
    else:
        assert err["psnr_db"] == pytest.approx(expected["psnr_db"], rel=1e-9)
    assert [w["position"] for w in split_json["worst"]] == expected["worst"]
    assert [w["max_error"] for w in split_json["worst"]] == expected["worst_max"]


@pytest.fixture()
def data(tmp_path):
    images, labels = small_digits(120)
    test_images, test_labels = small_digits(40, seed=2)
    folder = make_idx_dir(tmp_path / "idx", images, labels)
    make_idx_dir(folder, test_images, test_labels, split="test")
    return folder, images, labels, test_images, test_labels


def compare_json(*args):
    result = run("compare", *args, "--json")
    return result.returncode, json.loads(result.stdout) if result.stdout else None, \
        result.stderr.decode()


def test_idx_and_npz_of_the_same_data_are_equal(tmp_path, data):
    folder = data[0]
    for k, extra in enumerate([[], ["--float", "--layout", "nchw"],
                               ["--compress", "--layout", "nhwc"]]):
        npz = tmp_path / f"copy{k}.npz"
        assert run("convert", folder, npz, "-q", *extra).returncode == 0
        code, facts, err = compare_json(folder, npz)
        assert (code, facts["equal"]) == (0, True), (extra, err)
        assert [(s["a"], s["b"], s["compared"]) for s in facts["splits"]] == \
            [("train", "train", 120), ("test", "test", 40)]
        for s in facts["splits"]:
            assert s["label_agreement"] == 1.0 and s["label_mismatches"] == 0
            assert s["pixel_error"] == {"mean": 0.0, "max": 0.0, "share_differing": 0.0,
                                        "psnr_db": None, "identical": True,
                                        "non_finite": 0}
            assert s["worst"] == [] and s["problems"] == []
    text = run("compare", folder, tmp_path / "copy0.npz")
    assert text.returncode == 0
    out = text.stdout.decode()
    assert "train: 120 vs 120 images, 28x28\n  labels: 120/120 agree (100.00%)\n" \
           "  pixels: mean error 0, max 0, 0.00% differ, PSNR inf (identical)\n" \
           "  equal\n" in out
    assert out.endswith("result: equal (tolerance 0)\n")


def jpeg_copy(images, quality):
    cv2 = pytest.importorskip("cv2")
    out = np.empty_like(images)
    for i, image in enumerate(images):
        ok, data = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, quality])
        out[i] = cv2.imdecode(data, cv2.IMREAD_GRAYSCALE)
    return out


def test_jpeg_degraded_copy_gives_the_right_figures(tmp_path):
    import gzip
    images = np.frombuffer(gzip.decompress(
        (SAMPLE / "t10k-images-idx3-ubyte.gz").read_bytes()), np.uint8,
        offset=16).reshape(-1, 28, 28)
    labels = np.frombuffer(gzip.decompress(
        (SAMPLE / "t10k-labels-idx1-ubyte.gz").read_bytes()), np.uint8, offset=8)
    lossy = jpeg_copy(images, 75)
    np.savez(tmp_path / "lossy.npz", x_test=lossy, y_test=labels)
    code, facts, _ = compare_json(SAMPLE, tmp_path / "lossy.npz", "--worst", "4")
    assert code == 1 and facts["equal"] is False
    [split] = facts["splits"]
    assert (split["a"], split["b"], split["compared"]) == ("test", "test", 200)
    assert facts["only_in_a"] == ["train"] and facts["only_in_b"] == []
    expected = figures(images, lossy, worst=4)
    check_figures(split, expected)
    assert expected["max"] > 0 and split["problems"] == [
        f"pixels differ by up to {expected['max']:g} (tolerance 0)"]
    # within tolerance the same copy is equal, and exit code 0
    code, facts, _ = compare_json(SAMPLE, tmp_path / "lossy.npz", "--tolerance",
                                  str(expected["max"]))
    assert (code, facts["equal"]) == (0, True)
    code, _, _ = compare_json(SAMPLE, tmp_path / "lossy.npz", "--tolerance",
                              str(expected["max"] - 0.5))
    assert code == 1


def test_jpeg_tfrecord_against_tensorflow_decoding(tmp_path):
    if "tfrecord" not in registry.FORMATS:
        pytest.skip("tfrecord format not registered")
    tf = pytest.importorskip("tensorflow")
    out = tmp_path / "train.tfrecord"
    result = run("convert", SAMPLE, out, "--split", "train", "-q")
    assert result.returncode == 0, result.stderr
    # What the users' input pipeline gets back (FORMATS.md): decode_jpeg of `image` with
    # TensorFlow's defaults (dct_method "" = INTEGER_FAST). mnistconv's reader decodes
    # the same way, so compare reports the error users' models will see.
    decoded = []
    for record in tf.data.TFRecordDataset(str(out)):
        ex = tf.io.parse_single_example(record, {
            "image": tf.io.FixedLenFeature((), tf.string),
            "label": tf.io.VarLenFeature(tf.int64)})  # the users' schema, parsed whole
        decoded.append(tf.io.decode_jpeg(ex["image"], channels=1).numpy()[..., 0])
    decoded = np.stack(decoded)
    import gzip
    original = np.frombuffer(gzip.decompress(
        (SAMPLE / "train-images-idx3-ubyte.gz").read_bytes()), np.uint8,
        offset=16).reshape(-1, 28, 28)
    code, facts, _ = compare_json(SAMPLE, out)
    [split] = facts["splits"]
    assert (split["a"], split["b"], split["compared"]) == ("train", "train", 1000)
    assert split["label_agreement"] == 1.0
    expected = figures(original, decoded)
    assert expected["max"] > 0  # JPEG is lossy on MNIST
    check_figures(split, expected)
    assert code == 1
    tolerance = str(expected["max"])
    assert run("compare", SAMPLE, out, "--tolerance", tolerance, "-q").returncode == 0
    # the same JPEGs written to npz (via the TFRecord reader) compare exactly equal
    npz = tmp_path / "from-tfrecord.npz"
    assert run("convert", out, npz, "-q").returncode == 0
    code, facts, _ = compare_json(out, npz)
    assert (code, facts["equal"]) == (0, True)


def test_one_label_changed_is_a_difference(tmp_path, data):
    folder, images, labels, test_images, test_labels = data
    changed = labels.copy()
    changed[37] = (changed[37] + 1) % 10
    copy = make_idx_dir(tmp_path / "changed", images, changed)
    make_idx_dir(copy, test_images, test_labels, split="test")
    result = run("compare", folder, copy)
    assert result.returncode == 1
    out = result.stdout.decode()
    assert (f"train: 120 vs 120 images, 28x28\n  labels: 119/120 agree (99.17%)\n"
            f"    position 37 (#37): label {labels[37]} vs {changed[37]}\n") in out
    assert "  DIFFERENT: 1 label(s) differ\n" in out
    assert out.endswith("result: different\n")
    code, facts, _ = compare_json(folder, copy)
    train = facts["splits"][0]
    assert (code, train["label_mismatches"], train["equal"]) == (1, 1, False)
    assert train["first_label_mismatches"][0] == {
        "position": 37, "index_a": 37, "index_b": 37, "label_a": int(labels[37]),
        "label_b": int(changed[37]), "max_error": 0.0, "mean_error": 0.0}
    assert facts["splits"][1]["equal"] is True
    assert run("compare", folder, copy, "--split", "test", "-q").returncode == 0
    quiet = run("compare", folder, copy, "-q")
    assert (quiet.returncode, quiet.stdout) == (1, b"")


def test_counts_and_shapes_that_differ(tmp_path, data):
    folder, images, labels = data[:3]
    short = make_idx_dir(tmp_path / "short", images[:100], labels[:100])
    code, facts, _ = compare_json(folder, short, "--split", "train")
    [s] = facts["splits"]
    assert (code, s["compared"], s["problems"]) == (1, 100, ["counts differ (120 vs 100)"])
    cropped = make_idx_dir(tmp_path / "crop", images[:, :27, :].copy(), labels)
    code, facts, _ = compare_json(folder, cropped, "--split", "train")
    [s] = facts["splits"]
    assert (code, s["compared"]) == (1, 0)
    assert s["problems"] == ["image shapes differ (28x28 vs 27x28)"]


def test_split_pairing(tmp_path, data):
    folder, images, labels = data[:3]
    np.savez(tmp_path / "one.npz", x_images=images, y_images=labels)
    result = run("compare", folder, tmp_path / "one.npz")
    assert (result.returncode, result.stderr.decode()) == (
        2, "Error: B has the single split 'images' and the other side has train, test; "
           "choose one with --split NAME (or --split images:NAME / NAME:images)\n")
    code, facts, _ = compare_json(folder, tmp_path / "one.npz", "--split", "train:images")
    assert (code, facts["equal"], facts["only_in_a"]) == (0, True, ["test"])
    result = run("compare", folder, tmp_path / "one.npz", "--split", "valid:images")
    assert (result.returncode, result.stderr.decode()) == (
        2, f"Error: {folder}: no split named valid; splits present: train, test\n")
    # two multi-split datasets must have the same splits
    np.savez(tmp_path / "two.npz", x_train=images, y_train=labels, x_extra=images[:3],
             y_extra=labels[:3])
    code, facts, _ = compare_json(folder, tmp_path / "two.npz")
    assert (code, facts["equal"], facts["only_in_a"], facts["only_in_b"]) == \
        (1, False, ["test"], ["extra"])
    assert facts["splits"][0]["equal"] is True
    text = run("compare", folder, tmp_path / "two.npz").stdout.decode()
    assert "only in A, not compared: test (missing on the other side)\n" in text


class Uneven(Split):
    """Batches of varying sizes (as a sharded reader may give), for the lockstep cut."""

    def __init__(self, name, images, labels, sizes):
        from mnistconv import Header
        super().__init__(name, Header(len(labels), images.shape[1:], images.dtype))
        self.images, self.labels_, self.sizes = images, labels, sizes

    def batches(self, batch_size=8192):
        start, k = 0, 0
        while start < len(self.labels_):
            n = self.sizes[k % len(self.sizes)]
            yield Batch(self.images[start:start + n], self.labels_[start:start + n],
                        np.arange(start, start + n)[:len(self.labels_) - start])
            start, k = start + n, k + 1


def test_streams_line_up_whatever_the_batch_sizes():
    rng = np.random.default_rng(5)
    a = rng.integers(0, 256, (257, 6, 5), dtype=np.uint8)
    b = a.copy()
    b[[3, 100, 200]] ^= 7
    b[150, 2, 2] = 255 - b[150, 2, 2]
    labels = rng.integers(0, 10, 257).astype(np.uint8)
    wrong = labels.copy()
    wrong[[0, 256]] += 1
    expected = figures(a, b, worst=3)
    reference = comparing.compare_splits(ArraySplit("x", a, labels),
                                         ArraySplit("x", b, wrong), worst=3)
    for sizes_a, sizes_b, batch in (([7], [13], 8192), ([1, 50], [64], 8192),
                                    ([257], [256, 1], 8192), ([300], [300], 5)):
        got = comparing.compare_splits(Uneven("x", a, labels, sizes_a),
                                       Uneven("x", b, wrong, sizes_b), worst=3,
                                       batch_size=batch)
        assert got.compared == 257 and got.label_mismatches == 2
        assert [e.position for e in got.first_label_mismatches] == [0, 256]
        check_figures(got.to_json(), expected)
        assert got.to_json() == reference.to_json()


def test_float_pixels_are_scaled_and_channel_axes_ignored():
    rng = np.random.default_rng(6)
    a = rng.integers(0, 256, (20, 4, 4), dtype=np.uint8)
    b = (a.astype(np.float64) / 255.0).astype(np.float32)[:, None]  # N,1,H,W floats
    result = comparing.compare(Dataset("x", {"t": ArraySplit("t", a, np.zeros(20))}),
                               Dataset("y", {"t": ArraySplit("t", b, np.zeros(20))}))
    assert result.equal and result.splits[0].pixels_differing == 0


def test_read_options_apply_to_each_side(tmp_path):
    images, labels = small_digits(30)
    folder = make_idx_dir(tmp_path / "fam", images, labels, prefix="mine-x-")
    np.savez(tmp_path / "x.npz", x_train=images, y_train=labels)
    code, facts, _ = compare_json(folder, tmp_path / "x.npz", "--prefix", "mine-x")
    assert (code, facts["equal"], facts["splits"][0]["compared"]) == (0, True, 30)


def _npz(path, images, labels=None):
    labels = np.arange(len(images)) % 10 if labels is None else labels
    np.savez(path, x_train=images, y_train=labels.astype(np.uint8))
    return path


def _no_constant(name):
    raise AssertionError(f"{name} is not JSON")


def test_nan_infinity_overflow_and_empty_inputs_print_no_warning(tmp_path):
    """Float pixels that are NaN or infinite, too large for float32, or images without
    pixels are data: compare reports them and numpy never warns on stderr."""
    rng = np.random.default_rng(0)
    x = rng.random((6, 4, 4), dtype=np.float32)
    odd = x.copy()
    odd[0, 0, 0], odd[1, 1, 1], odd[2, 2, 2] = np.nan, np.inf, -np.inf
    huge = x.astype(np.float64)
    huge[3, 0, 0] = 1e300
    files = {
        "plain": _npz(tmp_path / "plain.npz", x),
        "odd": _npz(tmp_path / "odd.npz", odd),
        "odd2": _npz(tmp_path / "odd2.npz", odd.copy()),
        "huge": _npz(tmp_path / "huge.npz", huge),
        "nan": _npz(tmp_path / "nan.npz", np.full((3, 4, 4), np.nan, np.float32)),
        "empty": _npz(tmp_path / "empty.npz", np.zeros((0, 4, 4), np.float32)),
        "empty8": _npz(tmp_path / "empty8.npz", np.zeros((0, 4, 4), np.uint8)),
        "nopixels": _npz(tmp_path / "nopixels.npz", np.zeros((3, 0, 4), np.float32)),
    }
    cases = {
        ("plain", "odd"): (1, "  pixels: mean error inf, max inf, 3.12% differ, "
                              "PSNR -inf dB\n"),
        ("odd", "plain"): (1, "  pixels: mean error inf, max inf, 3.12% differ, "
                              "PSNR -inf dB\n"),
        ("odd", "odd2"): (0, "  pixels: mean error 0, max 0, 0.00% differ, "
                             "PSNR inf (identical)\n"),
        ("huge", "huge"): (0, "  pixels: mean error 0, max 0, 0.00% differ, "
                              "PSNR inf (identical)\n"),
        ("nan", "nan"): (0, "  pixels: mean error 0, max 0, 0.00% differ, "
                            "PSNR inf (identical)\n"),
        ("empty", "empty8"): (0, "train: 0 vs 0 images, 4x4\n  equal\n"),
        ("nopixels", "nopixels"): (0, "  pixels: none (the images have no pixels)\n"),
    }
    for (a, b), (code, line) in cases.items():
        result = run("compare", files[a], files[b])
        out, err = result.stdout.decode(), result.stderr.decode()
        assert (result.returncode, err) == (code, ""), (a, b, err)
        assert line in out, (a, b, out)
        assert "Warning" not in out + err
        result = run("compare", files[a], files[b], "--json")
        assert result.returncode == code and result.stderr == b""
        json.loads(result.stdout, parse_constant=_no_constant)  # strict JSON
    # The three pixels that are NaN or infinite on one side only are the reason.
    result = run("compare", files["plain"], files["odd"], "--json")
    s = json.loads(result.stdout)["splits"][0]
    assert s["pixel_error"] == {"mean": None, "max": None, "share_differing": 3 / 96,
                                "psnr_db": None, "identical": False, "non_finite": 3}
    assert s["problems"] == ["3 pixel(s) NaN or infinite on one side only",
                             "pixels differ by up to inf (tolerance 0)"]
    assert [w["position"] for w in s["worst"]] == [0, 1, 2]
    assert {w["max_error"] for w in s["worst"]} == {None}
    # A finite value beyond float32 is compared as itself, not as infinity.
    result = run("compare", files["plain"], files["huge"])
    assert (result.returncode, result.stderr) == (1, b"")
    assert "  DIFFERENT: pixels differ by up to 1e+300 (tolerance 0)\n" in \
        result.stdout.decode()
    result = run("compare", files["plain"], files["huge"], "--json")
    assert json.loads(result.stdout)["splits"][0]["pixel_error"]["non_finite"] == 0


def test_an_undetected_side_names_its_own_option(tmp_path):
    notes = tmp_path / "notes.dat"
    notes.write_bytes(b"\x00\x01 not a dataset")
    npz = _npz(tmp_path / "a.npz", np.zeros((2, 4, 4), np.uint8))
    for args, option in [((notes, npz), "--from-a"), ((npz, notes), "--from-b")]:
        result = run("compare", *args)
        err = result.stderr.decode()
        assert result.returncode == 2 and err.count("\n") == 1, err
        assert err.startswith(f"Error: {notes}: ") and option in err, err
        assert "--from " not in err and "--from (" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npz", "notes.dat"]
