"""The examples users copy: examples/Makefile (a data-prep build), examples/pipeline.sh
(conversions through pipes) and the CI workflow with its script. Each runs for real on
a copy of examples/, with the bundled sample, and its outputs are checked by content
against the sample decoded independently (gzip + numpy at the IDX offsets)."""

import gzip
import json
import os
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from helpers import REPO, SAMPLE

EXAMPLES = REPO / "examples"
# The console script installed beside the Python running the tests (the venv's).
MNISTCONV = Path(sys.executable).parent / "mnistconv"

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")

DATA_FILES = {
    "mnist.npz",
    "idx/train-images-idx3-ubyte.gz", "idx/train-labels-idx1-ubyte.gz",
    "idx/t10k-images-idx3-ubyte.gz", "idx/t10k-labels-idx1-ubyte.gz",
    "tfrecord/mnist-train.tfrecord-00000-of-00002",
    "tfrecord/mnist-train.tfrecord-00001-of-00002",
    "tfrecord/mnist-test.tfrecord-00000-of-00002",
    "tfrecord/mnist-test.tfrecord-00001-of-00002",
    *(f"browser/{split}.bin{gz}" for split in ("train", "validation", "test", "test-full")
      for gz in ("", ".gz")),
    "browser/manifest.json", "browser/preview.json",
}
SETTINGS = {f"{step}.settings" for step in ("input", "npz", "idx", "tfrecord", "browser")}
REPORTS = SETTINGS | {"input.json", "npz.json", "idx.json", "tfrecord.json",
           "browser.json", "npz.compare.json", "idx.compare.json",
           "tfrecord.compare.json", "browser.verify.json"}


def read_idx(path):
    """An IDX file (gzip or not) decoded from its header, without mnistconv."""
    data = Path(path).read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    assert data[:3] == b"\0\0\x08"
    ndim = data[3]
    shape = struct.unpack(f">{ndim}I", data[4:4 + 4 * ndim])
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(shape)


def read_gdmnist(path):
    """A GDMNIST1 file (layout in mnistconv/formats/gdmnist.py) as images, labels, indices."""
    data = Path(path).read_bytes()
    magic, count, rows, cols, pixels, labels, indices = struct.unpack("<8s6I", data[:32])
    assert magic == b"GDMNIST1" and pixels == 32
    images = np.frombuffer(data, np.uint8, count * rows * cols, pixels)
    return (images.reshape(count, rows, cols),
            np.frombuffer(data, np.uint8, count, labels),
            np.frombuffer(data, "<u4", count, indices))


@pytest.fixture(scope="module")
def sample():
    return {
        "x_train": read_idx(SAMPLE / "train-images-idx3-ubyte.gz"),
        "y_train": read_idx(SAMPLE / "train-labels-idx1-ubyte.gz"),
        "x_test": read_idx(SAMPLE / "t10k-images-idx3-ubyte.gz"),
        "y_test": read_idx(SAMPLE / "t10k-labels-idx1-ubyte.gz"),
    }


@pytest.fixture
def examples(tmp_path):
    """A copy of examples/ without anything an earlier run left in it."""
    if not MNISTCONV.exists():  # python run from outside a venv holding mnistconv
        pytest.skip(f"needs the mnistconv program beside {sys.executable}: "
                    "pip install -e '.[test]' in that venv")
    copy = tmp_path / "examples"
    shutil.copytree(EXAMPLES, copy, ignore=shutil.ignore_patterns(
        "out", "downloads", "pipeline-out", "__pycache__"))
    return copy


def files_under(folder):
    return {p.relative_to(folder).as_posix(): p.stat().st_mtime_ns
            for p in Path(folder).rglob("*") if p.is_file()}


def make(examples, *args, env=None):
    return subprocess.run(["make", "-C", str(examples), f"MNISTCONV={MNISTCONV}", *args],
                          capture_output=True, text=True, env=env)


def test_makefile_converts_checks_and_then_has_nothing_to_do(examples, sample):
    before = files_under(examples)
    result = make(examples)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # mnistconv -q: only make's command echo, on stdout

    out = examples / "out"
    dataset, reports = out / "dataset", out / "reports"
    after = files_under(examples)
    assert {k: v for k, v in after.items() if not k.startswith("out/")} == before
    assert set(files_under(dataset)) == DATA_FILES | {"SHA256SUMS"}
    assert set(files_under(reports)) == REPORTS

    # SHA256SUMS lists every output once, checks with sha256sum -c, and agrees with the
    # hashes mnistconv reported while writing.
    check = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=dataset,
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    sums = dict(reversed(line.split("  ", 1))
                for line in (dataset / "SHA256SUMS").read_text().splitlines())
    assert set(sums) == DATA_FILES
    for name in ("npz", "idx", "tfrecord", "browser"):
        for f in json.loads((reports / f"{name}.json").read_text())["files"]:
            assert sums[Path(f["path"]).relative_to("out/dataset").as_posix()] == f["sha256"]

    # The values: the input's counts, npz and IDX equal to the sample, the checks passed.
    info = json.loads((reports / "input.json").read_text())
    assert {s: v["count"] for s, v in info["splits"].items()} == {"train": 1000, "test": 200}
    with np.load(dataset / "mnist.npz") as npz:
        assert sorted(npz.files) == ["x_test", "x_train", "y_test", "y_train"]
        for key, array in sample.items():
            assert np.array_equal(npz[key], array), key
    for name, key in (("train-images-idx3-ubyte", "x_train"),
                      ("train-labels-idx1-ubyte", "y_train"),
                      ("t10k-images-idx3-ubyte", "x_test"),
                      ("t10k-labels-idx1-ubyte", "y_test")):
        assert np.array_equal(read_idx(dataset / "idx" / f"{name}.gz"), sample[key])
    for name in ("npz", "idx", "tfrecord"):
        report = json.loads((reports / f"{name}.compare.json").read_text())
        assert report["equal"] is True and report["tolerance"] == 0
        assert [(s["a"], s["count_b"], s["label_mismatches"]) for s in report["splits"]] \
            == [("train", 1000, 0), ("test", 200, 0)]
    tfrecord_info = subprocess.run([MNISTCONV, "info", dataset / "tfrecord", "--json"],
                                   capture_output=True, text=True, check=True)
    splits = json.loads(tfrecord_info.stdout)["splits"]
    for split in ("train", "test"):
        counts = np.bincount(sample[f"y_{split}"], minlength=10)
        assert splits[split]["count"] == counts.sum()
        assert splits[split]["class_counts"] == {str(c): int(n) for c, n in enumerate(counts)}
    assert json.loads((reports / "browser.verify.json").read_text())["ok"] is True
    images, labels, indices = read_gdmnist(dataset / "browser" / "train.bin")
    assert np.bincount(labels).tolist() == [50] * 10
    assert np.array_equal(images, sample["x_train"][indices])
    assert np.array_equal(labels, sample["y_train"][indices])

    # A second make: nothing to do, nothing touched.
    assert make(examples, "-q").returncode == 0
    again = make(examples)
    assert again.returncode == 0 and again.stderr == ""
    assert "make: Nothing to be done for 'all'." in again.stdout
    assert str(MNISTCONV) not in again.stdout
    assert files_under(examples) == after

    # An option changed: that output alone is redone (the old shard set replaced, not
    # left beside the new files), then SHA256SUMS.
    assert make(examples, "-q", "TFRECORD_OPTS=--preset tfds").returncode == 1
    result = make(examples, "TFRECORD_OPTS=--preset tfds")
    assert result.returncode == 0, result.stderr
    ran = [line.split()[1] for line in result.stdout.splitlines()
           if line.startswith(str(MNISTCONV))]
    assert ran == ["convert", "compare"]
    assert "tfrecord/mnist.tfrecord --preset tfds" in result.stdout
    assert sorted(p.name for p in (dataset / "tfrecord").iterdir()) == [
        "mnist-test.tfrecord", "mnist-train.tfrecord"]
    assert "  tfrecord/mnist-train.tfrecord\n" in (dataset / "SHA256SUMS").read_text()
    changed = {k for k, v in files_under(examples).items() if after.get(k) != v}
    assert changed == {
        "out/reports/tfrecord.settings", "out/reports/tfrecord.json",
        "out/reports/tfrecord.compare.json", "out/dataset/SHA256SUMS",
        "out/dataset/tfrecord/mnist-train.tfrecord", "out/dataset/tfrecord/mnist-test.tfrecord"}

    # An input file changed: everything is redone.
    os.utime(examples / "data/mnist-sample/t10k-labels-idx1-ubyte.gz")
    result = make(examples, "-n", "TFRECORD_OPTS=--preset tfds")
    assert [line.split()[1] for line in result.stdout.splitlines()
            if line.startswith(str(MNISTCONV))] == ["info"] + ["convert", "compare"] * 3 + [
                "pack", "verify"]


def test_makefile_stops_at_a_corrupt_input_before_writing_anything(examples):
    path = examples / "data/mnist-sample/t10k-images-idx3-ubyte.gz"
    path.write_bytes(path.read_bytes()[:100])
    result = make(examples)
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1
    assert errors[0].startswith("Error: data/mnist-sample/t10k-images-idx3-ubyte.gz: ")
    assert "make: *** Deleting file 'out/reports/input.json'" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (examples / "out/dataset").exists()
    assert set(files_under(examples / "out/reports")) == SETTINGS


def test_makefile_without_mnistconv_says_how_to_point_at_it(examples):
    result = subprocess.run(["make", "-C", str(examples), "MNISTCONV=no-such-mnistconv"],
                            capture_output=True, text=True)
    assert result.returncode == 2
    assert "no-such-mnistconv not found; put it on PATH or set " \
           "MNISTCONV=path/to/mnistconv.  Stop." in result.stderr
    assert not (examples / "out").exists()


def test_makefile_downloads_first_when_given_a_dataset(examples):
    result = make(examples, "-n", "DATASET=fashion-mnist")
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if str(MNISTCONV) in line]
    assert lines[0] == (f"{MNISTCONV} download fashion-mnist downloads/fashion-mnist -q "
                        "--json > out/reports/download.json")
    assert lines[1] == f"{MNISTCONV} info downloads/fashion-mnist --json > out/reports/input.json"
    # Full-size data: the browser pack's own defaults, files named after the dataset.
    assert (f"{MNISTCONV} pack browser downloads/fashion-mnist out/dataset/browser  --force "
            "-q --json > out/reports/browser.json") in lines
    assert (f"{MNISTCONV} convert downloads/fashion-mnist out/dataset/fashion-mnist.npz  "
            "--force -q --json > out/reports/npz.json") in lines
    assert not (examples / "downloads").exists()


def test_pipeline_script_outputs_equal_the_sample(examples, sample, tmp_path):
    out = tmp_path / "piped"
    env = dict(os.environ, MNISTCONV=str(MNISTCONV))
    result = subprocess.run([examples / "pipeline.sh", SAMPLE, out], env=env,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "" and result.stderr == ""
    assert set(files_under(out)) == {
        "test.bin", "subset.npz", "subset.npz.sha256", "test-via-tfrecord.npz",
        *(f"subset-idx/{stem}-{kind}.gz" for stem in ("train", "t10k")
          for kind in ("images-idx3-ubyte", "labels-idx1-ubyte"))}

    images, labels, indices = read_gdmnist(out / "test.bin")
    assert np.array_equal(images, sample["x_test"])
    assert np.array_equal(labels, sample["y_test"])
    assert np.array_equal(indices, np.arange(200))

    with np.load(out / "test-via-tfrecord.npz") as npz:
        assert sorted(npz.files) == ["x_test", "y_test"]
        assert np.array_equal(npz["x_test"], sample["x_test"])
        assert np.array_equal(npz["y_test"], sample["y_test"])

    check = subprocess.run(["sha256sum", "-c", "subset.npz.sha256"], cwd=out,
                           capture_output=True, text=True)
    assert check.stdout == "subset.npz: OK\n"
    with np.load(out / "subset.npz") as npz:
        subset = {key: npz[key] for key in npz.files}
    for split, stem in (("train", "train"), ("test", "t10k")):
        x, y = subset[f"x_{split}"], subset[f"y_{split}"]
        assert np.bincount(y).tolist() == [10] * 10
        # Every image is one of the sample's, with its label, each at most once.
        where = {img.tobytes(): i for i, img in enumerate(sample[f"x_{split}"])}
        rows = [where[img.tobytes()] for img in x]
        assert len(set(rows)) == 100
        assert np.array_equal(sample[f"y_{split}"][rows], y)
        assert rows != sorted(rows)  # shuffled
        assert np.array_equal(read_idx(out / f"subset-idx/{stem}-images-idx3-ubyte.gz"), x)
        assert np.array_equal(read_idx(out / f"subset-idx/{stem}-labels-idx1-ubyte.gz"), y)

    # Run again: same bytes (seeded shuffle, --force for the outputs it owns).
    first = {p: (out / p).read_bytes() for p in files_under(out)}
    assert subprocess.run([examples / "pipeline.sh", SAMPLE, out], env=env).returncode == 0
    assert {p: (out / p).read_bytes() for p in files_under(out)} == first


def workflow_steps(text):
    """The workflow's steps as dicts of their top-level keys (a reader for this file's
    plain block style, since PyYAML is not a dependency)."""
    steps, current = [], None
    for line in text.splitlines():
        stripped = line.strip()
        if line.startswith("      - "):
            current = {}
            steps.append(current)
            stripped = stripped[2:]
        elif not line.startswith("        ") or current is None or \
                line.startswith("          "):
            continue
        key, _, value = stripped.partition(":")
        current[key] = value.strip()
    return steps


def test_workflow_runs_the_script_the_test_runs(examples):
    text = (examples / "ci" / "convert-dataset.yml").read_text()
    steps = workflow_steps(text)
    try:
        import yaml
    except ImportError:
        yaml = None
    if yaml is not None:  # the real parser, where it is installed, sees the same steps
        parsed = yaml.safe_load(text)["jobs"]["convert"]["steps"]
        assert [s.get("run") for s in parsed] == [s.get("run") for s in steps]
        assert [s.get("uses") for s in parsed] == [s.get("uses") for s in steps]
    assert [s["run"] for s in steps if "run" in s] == [
        "python -m pip install '.[tfrecord]'", "examples/ci/convert-dataset.sh"]
    uses = [s["uses"] for s in steps if "uses" in s]
    assert uses == ["actions/checkout@v4", "actions/setup-python@v5", "actions/cache@v4",
                    "actions/upload-artifact@v4", "actions/upload-artifact@v4"]
    assert "          path: examples/out/dataset/\n" in text
    assert "          path: examples/out/reports/\n" in text
    assert "          DATASET: ${{ inputs.dataset }}\n" in text
    assert "\t" not in text


def test_ci_script_runs_locally_as_in_the_workflow(examples, tmp_path):
    # As in the workflow: mnistconv installed on PATH, run from the repository root.
    root = tmp_path  # examples/ is tmp_path/examples
    env = dict(os.environ, PATH=f"{MNISTCONV.parent}{os.pathsep}{os.environ['PATH']}")
    env.pop("MNISTCONV", None)
    env.pop("DATASET", None)
    result = subprocess.run(["examples/ci/convert-dataset.sh"], cwd=root, env=env,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert "mnistconv convert data/mnist-sample out/dataset/mnist.npz" in result.stdout
    assert result.stdout.rstrip().endswith("sha256sum -c --quiet SHA256SUMS")
    # What the workflow uploads.
    assert set(files_under(root / "examples/out/dataset")) == DATA_FILES | {"SHA256SUMS"}
    assert set(files_under(root / "examples/out/reports")) == REPORTS


def _shards_of(folder):
    return {p.name: p.stat().st_mtime_ns for p in Path(folder).iterdir()}


def test_make_rule_rebuilds_when_an_input_changes_and_does_nothing_otherwise(examples):
    rule = examples / "make"
    first = make(rule)
    assert first.returncode == 0, first.stderr
    out = rule / "out"
    # The targets --list-outputs named are the files written (never out/mnist.tfrecord).
    written = _shards_of(out)
    assert sorted(written) == sorted(f"mnist-{s}.tfrecord-0000{i}-of-00002"
                                     for s in ("train", "test") for i in (0, 1))
    assert first.stdout.count("--force -q") == 1  # one run for the grouped targets
    # Nothing changed: nothing to do, nothing touched; `make -q` agrees.
    again = make(rule)
    assert again.returncode == 0 and "--force" not in again.stdout, again.stdout
    assert "Nothing to be done for 'all'" in again.stdout
    assert _shards_of(out) == written
    assert make(rule, "-q").returncode == 0
    # An input changes: one rerun rewrites every shard; then nothing again. The shards
    # are dated back first, so the changed input is newer than them and older than the
    # rerun's shards however fast the rerun is (a date in the future stayed newer).
    past = time.time_ns() - 20 * 10**9
    for name in written:
        os.utime(out / name, ns=(past, past))
    written = _shards_of(out)
    label = examples / "data" / "mnist-sample" / "t10k-labels-idx1-ubyte.gz"
    later = past + 10 * 10**9
    os.utime(label, ns=(later, later))
    assert make(rule, "-q").returncode == 1
    rerun = make(rule)
    assert rerun.returncode == 0, rerun.stderr
    assert rerun.stdout.count("--force -q") == 1
    rewritten = _shards_of(out)
    assert set(rewritten) == set(written)
    assert all(rewritten[n] > written[n] for n in written)
    assert "--force" not in make(rule).stdout
    # The shards compare equal to the input: PNG is lossless.
    check = subprocess.run([MNISTCONV, "compare", examples / "data" / "mnist-sample", out,
                            "-q"], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


def test_ci_convert_then_compare_keeps_a_json_report_of_every_step(examples, tmp_path):
    script = examples / "ci" / "convert-and-compare.sh"
    env = dict(os.environ, MNISTCONV=str(MNISTCONV), OUT=str(tmp_path / "ci"))
    ok = subprocess.run([script], env=env, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert ok.stderr == ""
    reports = tmp_path / "ci" / "reports"
    convert = json.loads((reports / "convert.json").read_text())
    assert {s: v["count"] for s, v in convert["splits"].items()} == \
        {"train": 1000, "test": 200}
    compare = json.loads((reports / "compare.json").read_text())
    assert compare["equal"] is True and compare["advice"] == []

    # JPEG: compare fails the job, and its report says which tolerance would pass.
    jpeg = subprocess.run([script], env=dict(env, OPTS="--image-format jpeg"),
                          capture_output=True, text=True)
    assert jpeg.returncode == 1
    compare = json.loads((reports / "compare.json").read_text())
    worst = max(s["pixel_error"]["max"] for s in compare["splits"])
    assert compare["equal"] is False and compare["advice"] == [
        f"B is JPEG (lossy): pass --tolerance {worst:g}, or convert with "
        "--image-format png"]

    # A corrupt input: the job fails, and the artifact still holds a report.
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "train-images-idx3-ubyte").write_bytes(b"\0\0\x08\x03\0\0\0\x05")
    failed = subprocess.run([script], env=dict(env, SRC=str(bad)), capture_output=True,
                            text=True)
    assert failed.returncode != 0
    report = json.loads((reports / "convert.json").read_text())
    assert report["exit"] == failed.returncode
    assert failed.stderr == f"Error: {report['error']}\n"
