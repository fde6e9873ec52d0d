"""Pipelines as people write them (issue 28): --json reports on failure, --force over
an earlier output set, --list-outputs, --resume on a complete output, and compare
saying why two datasets differ."""

import json
import subprocess

import numpy as np
import pytest

from helpers import SAMPLE, make_idx_dir, run, run_main, small_digits, stderr_of


def _commands_taking_json():
    """Every command of the CLI with a --json option, and one a-to-b command."""
    import click
    from mnistconv.cli import COMMANDS, cli
    ctx = click.Context(cli)
    names = list(COMMANDS) + ["idx-to-npz"]
    found = []
    for name in names:
        command = cli.get_command(ctx, name)
        for sub in (command.commands.values() if isinstance(command, click.Group)
                    else [command]):
            if any("--json" in p.opts for p in sub.params):
                found.append([name] + ([sub.name] if sub is not command else []))
    return found


def test_every_command_taking_json_reports_a_usage_error_as_json(capsys):
    commands = _commands_taking_json()
    assert {"convert", "info", "compare", "formats", "idx-to-npz"} <= \
        {c[0] for c in commands}
    for command in commands:
        code, out, err = run_main(capsys, *command, "--zzz", "--json")
        assert code == 2, command
        assert json.loads(out) == {"error": "No such option '--zzz'.",
                                   "exit": 2}, command
        assert "Error: No such option '--zzz'." in err


@pytest.mark.parametrize("args, code, error", [
    (["info", "{tmp}/missing"], 2, "{tmp}/missing: no such file or directory; check the path"),
    (["convert", "{tmp}/bad", "{tmp}/out.npz"], 1, None),
    (["compare", str(SAMPLE), "{tmp}/bad"], 1, None),
])
def test_a_failing_run_with_json_prints_one_object_and_keeps_its_exit_code(
        tmp_path, args, code, error):
    (tmp_path / "bad").write_bytes(b"\0\0\x08\x03" + b"\0\0\0\x09" * 3)  # truncated IDX
    args = [a.format(tmp=tmp_path) for a in args]
    r = run(*args, "--json", "-q") if args[0] != "info" else run(*args, "--json")
    assert r.returncode == code
    report = json.loads(r.stdout)  # one object, nothing else
    line = stderr_of(r).strip()
    assert line.startswith("Error: ") and "\n" not in line
    assert report["error"] == line[len("Error: "):]
    assert report["exit"] == code
    if error is not None:
        assert report["error"] == error.format(tmp=tmp_path)
    assert report["file"].startswith(str(tmp_path))
    assert not (tmp_path / "out.npz").exists()


def _sums(folder):
    lines = (folder / "SHA256SUMS").read_text().splitlines()
    return sorted(line.split("  ", 1)[1] for line in lines)


def _sha256sum_c(folder):
    return subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=folder,
                          capture_output=True, text=True)


def test_force_with_another_shard_count_replaces_the_whole_set_and_its_sums(tmp_path):
    out = tmp_path / "out"
    assert run("convert", SAMPLE, out / "other.npz", "--sha256sums", "-q").returncode == 0
    base = ["convert", SAMPLE, out / "m.tfrecord", "--limit", "40", "-q"]
    assert run(*base, "--shards", "4", "--sha256sums").returncode == 0
    r = run(*base, "--shards", "2", "--sha256sums", "--force")
    assert r.returncode == 0, stderr_of(r)
    new = [f"m-{s}.tfrecord-0000{i}-of-00002" for s in ("test", "train") for i in (0, 1)]
    assert sorted(p.name for p in out.iterdir()) == sorted(
        new + ["SHA256SUMS", "other.npz"])  # no stale shard of the 4-shard set
    assert _sums(out) == sorted(new + ["other.npz"])  # the other output's line kept
    check = _sha256sum_c(out)
    assert check.returncode == 0, check.stdout + check.stderr

    # Without --sha256sums, -q: the SHA256SUMS there is rewritten all the same, since
    # the files it lists are replaced.
    assert run(*base, "--shards", "3", "--force").returncode == 0
    three = [f"m-{s}.tfrecord-0000{i}-of-00003" for s in ("test", "train") for i in range(3)]
    assert _sums(out) == sorted(three + ["other.npz"])
    check = _sha256sum_c(out)
    assert check.returncode == 0, check.stdout + check.stderr


def _mtimes(folder):
    """{file name: mtime} of every file under folder but the hidden ones."""
    return {p.name: p.stat().st_mtime_ns for p in folder.rglob("*")
            if p.is_file() and not p.name.startswith(".")}


@pytest.mark.parametrize("fmt, dst, options", [
    ("tfrecord", "m.tfrecord", ["--shards", "2"]),
    ("tfrecord", "m.tfrecord", []),
    ("parquet", "hf", ["--shards", "2"]),
])
def test_resume_on_the_complete_output_of_a_plain_run_exits_0(tmp_path, fmt, dst,
                                                              options):
    out = tmp_path / "out"
    command = ["convert", SAMPLE, out / dst, "--to", fmt, "--limit", "60", *options]
    assert run(*command, "-q").returncode == 0
    before = _mtimes(out)
    for _ in range(2):  # a CI retry, then another: both a check that writes no shard
        r = run(*command, "--resume")
        assert r.returncode == 0, stderr_of(r)
        lines = stderr_of(r).splitlines()
        # Headed as a plain conversion's lines are: what from what.
        assert lines[0] == f"idx -> {fmt}: the shard plan, resumed"
        assert lines[-1].startswith("  complete: every shard of plan ") or any(
            line.startswith("  complete: every shard of plan ") and
            line.endswith(" was already there (hashes checked)") for line in lines)
        assert all(line.endswith("(kept)") for line in lines
                   if "sha256" in line and "-of-0000" in line)
        assert {k: v for k, v in _mtimes(out).items() if "-of-" in k} == \
            {k: v for k, v in before.items() if "-of-" in k}
    # The same with --json: every task kept.
    report = json.loads(run(*command, "--resume", "--json").stdout)
    assert report["finished"] is True and {t["status"] for t in report["tasks"]} == {"kept"}


def test_resume_refuses_an_output_written_with_other_options_in_one_line(tmp_path):
    out = tmp_path / "out"
    command = ["convert", SAMPLE, out / "m.tfrecord", "--limit", "60", "--shards", "2"]
    assert run(*command, "-q").returncode == 0
    before = _mtimes(out)
    r = run(*command, "--image-format", "png", "--resume")
    assert r.returncode == 2
    assert stderr_of(r) == (
        f"Error: {out / 'm-train.tfrecord-00000-of-00002'}: exists and is not what this "
        "conversion writes (an earlier run with another input or other options wrote "
        "it); run that conversion again, or use --force to replace it\n")
    assert _mtimes(out) == before
    # And a set the plan recorded with other options: refused in one line too.
    assert run(*command, "--resume", "-q").returncode == 0
    r = run(*command[:-1], "3", "--resume")
    assert r.returncode == 2 and len(stderr_of(r).splitlines()) == 1
    assert "holds the progress of another plan" in stderr_of(r)


# --- compare says why ------------------------------------------------------------------

def _hints(result):
    return [line[len("hint: "):] for line in result.stdout.decode().splitlines()
            if line.startswith("hint: ")]


def test_compare_after_a_jpeg_conversion_names_the_tolerance_that_passes(tmp_path):
    out = tmp_path / "out"
    assert run("convert", SAMPLE, out / "m.tfrecord", "-q").returncode == 0  # JPEG
    r = run("compare", SAMPLE, out, "--json")
    assert r.returncode == 1
    report = json.loads(r.stdout)
    worst = max(s["pixel_error"]["max"] for s in report["splits"])
    assert worst > 0 and all(s["label_mismatches"] == 0 for s in report["splits"])
    advice = f"B is JPEG (lossy): pass --tolerance {worst:g}, or convert with " \
        "--image-format png"
    assert report["advice"] == [advice]
    assert _hints(run("compare", SAMPLE, out)) == [advice]
    # Both ways out work: the tolerance it names, and PNG.
    assert run("compare", SAMPLE, out, "--tolerance", f"{worst:g}", "-q").returncode == 0
    assert run("compare", SAMPLE, out, "--tolerance", f"{worst - 1:g}", "-q").returncode == 1
    assert run("convert", SAMPLE, out / "m.tfrecord", "--image-format", "png", "--force",
               "-q").returncode == 0
    assert run("compare", SAMPLE, out, "-q").returncode == 0
    # Lossless on both sides: the hint says only pixels differ, not JPEG.
    (tmp_path / "idx").mkdir()
    images, labels = small_digits(40)
    make_idx_dir(tmp_path / "idx", images, labels)
    make_idx_dir(tmp_path / "idx2", np.minimum(images.astype(int) + 3, 255).astype(
        np.uint8), labels)
    assert _hints(run("compare", tmp_path / "idx", tmp_path / "idx2")) == [
        "only pixel values differ, by up to 3: pass --tolerance 3 if that is expected"]


def _npz(path, **arrays):
    np.savez(path, **arrays)
    return path


@pytest.fixture()
def digits(tmp_path):
    images, labels = small_digits(60)
    a = _npz(tmp_path / "a.npz", x_train=images, y_train=labels, x_test=images[:20],
             y_test=labels[:20])
    return tmp_path, images, labels, a


def test_compare_explains_labels_off_by_one_and_shifted(digits):
    tmp_path, images, labels, a = digits
    plus = _npz(tmp_path / "plus.npz", x_train=images, y_train=labels + 1,
                x_test=images[:20], y_test=labels[:20] + 1)
    r = run("compare", a, plus)
    assert r.returncode == 1
    assert _hints(r) == ["B's labels are A's +1 for every example (train, test): B numbers "
                         "its classes from 1, A from 0"]
    moved = _npz(tmp_path / "moved.npz", x_train=images[2:], y_train=labels[2:],
                 x_test=images[:20], y_test=labels[:20])
    assert _hints(run("compare", a, moved)) == [
        "train: labels shifted: B's example 0 is A's example 2 (2 example(s) dropped or "
        "added at the start of one side)"]
    assert _hints(run("compare", moved, a))[0].startswith(
        "train: labels shifted: A's example 0 is B's example 2")


def test_compare_explains_image_sizes_and_split_names(digits):
    tmp_path, images, labels, a = digits
    big = _npz(tmp_path / "big.npz", x_train=np.zeros((60, 32, 32), np.uint8),
               y_train=labels, x_test=np.zeros((20, 32, 32), np.uint8), y_test=labels[:20])
    r = run("compare", a, big)
    assert r.returncode == 1
    assert _hints(r) == ["A's images are 28x28 and B's 32x32 (train, test): compare does "
                         "not resize, so no option makes them equal; convert without "
                         "resizing or padding"]
    renamed = _npz(tmp_path / "v.npz", x_train=images, y_train=labels,
                   x_validation=images[:20], y_validation=labels[:20])
    r = run("compare", a, renamed)
    assert r.returncode == 1
    assert _hints(r) == ["splits named differently (only in A: test; only in B: "
                         "validation): pass --split train --split test:validation"]
    assert run("compare", a, renamed, "--split", "train", "--split", "test:validation",
               "-q").returncode == 0
    # No name in common: the error names the flags to pass.
    other = _npz(tmp_path / "o.npz", x_a=images, y_a=labels, x_b=images[:20],
                 y_b=labels[:20])
    r = run("compare", a, other)
    assert r.returncode == 2
    assert stderr_of(r) == ("Error: no split names in common (A: train, test; B: a, b); "
                            "pair them with --split train:a --split test:b\n")
    assert run("compare", a, other, "--split", "train:a", "--split", "test:b",
               "-q").returncode == 0


# --- --list-outputs ----------------------------------------------------------------------

def _files(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                  if p.is_file() and not p.name.startswith("."))


@pytest.mark.parametrize("dst, options", [
    ("out/m.tfrecord", ["--shards", "2", "--sha256sums"]),
    ("out/m.tfrecord", []),
    ("out/mnist.npz", []),
    ("out/idx", ["--to", "idx", "--gzip"]),
    ("out/hf", ["--to", "parquet", "--shards", "2"]),
    ("out/wds/m.tar", ["--shard-size", "25"]),
    ("out/tfds", ["--to", "tfds"]),
    ("out/images", ["--to", "imagefolder", "--limit", "12"]),
    ("out/caffe", ["--to", "caffe-hdf5"]),
    ("out/mnist.npz", ["--card"]),
])
def test_list_outputs_names_exactly_what_a_run_writes_and_writes_nothing(
        tmp_path, dst, options):
    base = ["convert", SAMPLE, dst, "--limit", "40", *options]
    listed = run(*base, "--list-outputs", cwd=tmp_path)
    assert listed.returncode == 0, stderr_of(listed)
    assert listed.stderr == b""
    assert list(tmp_path.iterdir()) == []  # nothing written
    names = listed.stdout.decode().splitlines()
    assert json.loads(run(*base, "--list-outputs", "--json", cwd=tmp_path).stdout) == names
    assert run(*base, "-q", cwd=tmp_path).returncode == 0
    assert sorted(names) == _files(tmp_path)
    # Absolute DST: absolute names.
    absolute = run("convert", SAMPLE, tmp_path / dst, "--limit", "40", *options,
                   "--list-outputs")
    assert absolute.stdout.decode().splitlines() == [str(tmp_path / n) for n in names]


# --- WebDataset and a DataLoader ------------------------------------------------------

SNIPPET = """
import webdataset as wds, torch
ds = wds.WebDataset("out/mnist-test-{000000..000001}.tar", shardshuffle=False) \\
    .decode("l").to_tuple("png", "cls")
loader = torch.utils.data.DataLoader(ds, batch_size=256, num_workers=2)
"""


def test_default_webdataset_shards_feed_a_dataloader_with_two_workers(official_dir,
                                                                      tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("webdataset")
    r = run("convert", official_dir, tmp_path / "out" / "mnist.tar", "--split", "test",
            "-q")
    assert r.returncode == 0, stderr_of(r)
    # The MNIST test split, 10000 samples: two shards by default (one per worker).
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "mnist-test-000000.tar", "mnist-test-000001.tar"]
    check = SNIPPET + """
import collections, numpy as np
seen = collections.Counter()
shapes = set()
for images, labels in loader:
    shapes.add(tuple(images.shape[1:]))
    seen.update(labels.tolist())
print(sum(seen.values()), sorted(shapes), [seen[c] for c in range(10)])
"""
    import sys
    done = subprocess.run([sys.executable, "-c", check], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no warning (shardshuffle, fewer shards than workers)
    counts = np.bincount(mnistconv_labels(official_dir), minlength=10).tolist()
    assert done.stdout.split("\n")[0] == f"10000 [(28, 28)] {counts}"


def mnistconv_labels(folder):
    """The official test labels, decoded independently of mnistconv."""
    import gzip
    data = gzip.decompress((folder / "t10k-labels-idx1-ubyte.gz").read_bytes())
    return np.frombuffer(data, np.uint8, offset=8)


def test_webdataset_default_shard_size_two_shards_from_a_few_thousand(tmp_path):
    from mnistconv.codecs.samples import TWO_SHARDS_FROM, default_samples
    assert default_samples(100000, TWO_SHARDS_FROM - 1) == 100000  # one shard
    assert default_samples(100000, 10000) == 5000
    assert default_samples(100000, 60001) == 30001
    assert default_samples(100000, 1000000) == 100000  # ten shards
    # --shard-size given: as given, whatever the count.
    images, labels = small_digits(TWO_SHARDS_FROM + 1)
    make_idx_dir(tmp_path / "src", images, labels)
    assert run("convert", tmp_path / "src", tmp_path / "a" / "m.tar", "-q").returncode == 0
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == [
        "m-train-000000.tar", "m-train-000001.tar"]
    assert run("convert", tmp_path / "src", tmp_path / "b" / "m.tar", "--shard-size",
               "100000", "-q").returncode == 0
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["m-train-000000.tar"]


def test_force_over_a_planned_output_drops_its_progress_record(tmp_path):
    out = tmp_path / "out"
    command = ["convert", SAMPLE, out / "m.tfrecord", "--limit", "40", "-q"]
    assert run(*command, "--shards", "4", "--num-tasks", "1", "--task-index", "0").returncode == 0
    r = run(*command[:-1], "--shards", "4", "--num-tasks", "2", "--task-index", "1")
    assert stderr_of(r).splitlines()[0] == \
        "idx -> tfrecord: task 1 (counting from 0) of the shard plan's 2"
    record = out / ".m.tfrecord.mnistconv-plan.json"
    assert record.exists()
    assert run(*command, "--shards", "2", "--force").returncode == 0
    assert not record.exists()  # it spoke for the four shards --force replaced
    assert sorted(p.name for p in out.iterdir()) == sorted(
        f"m-{s}.tfrecord-0000{i}-of-00002" for s in ("test", "train") for i in (0, 1))
    # --resume now recognises the new set as complete.
    r = run(*command[:-1], "--shards", "2", "--resume")
    assert r.returncode == 0, stderr_of(r)
    assert "complete: every shard of plan" in stderr_of(r)
