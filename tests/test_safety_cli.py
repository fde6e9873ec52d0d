"""Safety and first contact, as the command line meets them: what --force replaces,
staging leftovers and concurrent writers, closed and broken streams, file names that
hold newlines, option values, output names and split names (issues 11 and 12)."""

import json
import os
import pty
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import mnistconv
from helpers import REPO, SAMPLE, make_idx_dir, run, small_digits
from mnistconv.io.fileio import STAGING_MARK


def one_error_line(result, code):
    err = result.stderr.decode()
    assert result.returncode == code, err
    assert err.startswith("Error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err[len("Error: "):-1]


def cli(*args, **kw):
    """The `mnistconv` program itself (console(): os._exit, SIGPIPE handling)."""
    return subprocess.run([str(REPO / ".venv" / "bin" / "mnistconv"), *map(str, args)]
                          if (REPO / ".venv" / "bin" / "mnistconv").exists()
                          else [sys.executable, "-m", "mnistconv", *map(str, args)],
                          capture_output=True, **kw)


# --- what --force replaces -------------------------------------------------------------

@pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")
def test_force_never_replaces_a_device_node(tmp_path):
    node = tmp_path / "full"
    os.mknod(node, 0o644 | 0o020000, os.makedev(1, 7))  # a private copy of /dev/full
    for args in (["--force"], []):
        result = run("convert", SAMPLE, node, "--to", "npz", *args)
        message = one_error_line(result, 2)
        if args:
            assert message == (f"{node}: exists and is not a regular file (device, FIFO "
                               "or socket); mnistconv will not replace it, even with force; "
                               "write to a file name, or to '-' for stdout")
        assert os.path.exists(node) and not node.is_file()  # still the device
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full"]


def test_dev_stdout_is_written_as_a_stream(tmp_path):
    out = tmp_path / "via-dev-stdout.npz"
    with open(out, "wb") as f:
        result = subprocess.run([sys.executable, "-m", "mnistconv", "idx-to-npz", SAMPLE,
                                 "/dev/stdout", "--split", "test", "-q"], stdout=f,
                                stderr=subprocess.PIPE, cwd=REPO)
    assert result.returncode == 0, result.stderr
    with np.load(out) as z:
        assert z["x_test"].shape == (200, 28, 28)


def test_library_tells_library_callers_to_pass_force(tmp_path):
    ds = mnistconv.read(str(SAMPLE))
    mnistconv.write(ds, tmp_path / "a.npz")
    with pytest.raises(mnistconv.UsageError) as e:
        mnistconv.write(ds, tmp_path / "a.npz")
    assert str(e.value) == f"{tmp_path / 'a.npz'}: already exists; pass force=True to " \
                           "replace it"
    result = run("convert", SAMPLE, tmp_path / "a.npz")
    assert one_error_line(result, 2) == f"{tmp_path / 'a.npz'}: already exists; use --force " \
                                        "to overwrite it"


# --- staging leftovers, concurrent writers, what a failed run leaves ------------------

def _dead_pid():
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_dead_runs_leftovers_are_removed_live_ones_kept(tmp_path):
    out = tmp_path / "out"
    run("convert", SAMPLE, out, "--to", "idx").check_returncode()
    dead = out / f".train-images-idx3-ubyte{STAGING_MARK}{_dead_pid()}-abc"
    dead.write_bytes(b"partial")
    dead_dir = tmp_path / f".out2{STAGING_MARK}{_dead_pid()}-xyz"
    dead_dir.mkdir()
    (dead_dir / "t10k-images-idx3-ubyte").write_bytes(b"partial")
    live = out / f".t10k-images-idx3-ubyte{STAGING_MARK}{os.getpid()}-def"
    live.write_bytes(b"another run, still going")
    # Readers never take a staging name for data.
    info = json.loads(run("info", out, "--json").stdout)
    assert sorted(info["splits"]) == ["test", "train"]
    result = run("convert", SAMPLE, out, "--to", "idx", "--force")
    assert result.returncode == 0, result.stderr
    assert not dead.exists() and live.exists()
    run("convert", SAMPLE, tmp_path / "sibling.npz").check_returncode()
    assert not dead_dir.exists()


def test_concurrent_force_writers_leave_one_whole_output(tmp_path):
    """Five writers --force into one IDX directory: the result is one run's images with
    the same run's labels (here each source has its own labels)."""
    sources = []
    for k in range(5):
        images, labels = small_digits(300, seed=k)
        sources.append((make_idx_dir(tmp_path / f"src{k}", images, labels), images, labels))
    out = tmp_path / "out"
    procs = [subprocess.Popen([sys.executable, "-m", "mnistconv", "convert", src, out,
                               "--to", "idx", "--force", "-q"], cwd=REPO,
                              stderr=subprocess.PIPE) for src, _, _ in sources]
    errors = [p.communicate()[1].decode() for p in procs]
    assert [p.returncode for p in procs] == [0] * 5, errors
    ds = mnistconv.read(str(out))
    got_images = np.concatenate([b.images for b in ds.splits["train"].batches()])
    got_labels = ds.splits["train"].labels()
    winners = [k for k, (_, images, labels) in enumerate(sources)
               if np.array_equal(images, got_images)]
    assert len(winners) == 1
    assert np.array_equal(sources[winners[0]][2], got_labels)
    assert [p.name for p in out.iterdir() if STAGING_MARK in p.name] == []


def test_concurrent_writers_into_a_new_directory(tmp_path):
    images, labels = small_digits(300)
    src = make_idx_dir(tmp_path / "src", images, labels)
    out = tmp_path / "new"
    procs = [subprocess.Popen([sys.executable, "-m", "mnistconv", "convert", src, out,
                               "--to", "idx", "-q"], cwd=REPO, stderr=subprocess.PIPE)
             for _ in range(5)]
    errors = [p.communicate()[1].decode() for p in procs]
    codes = [p.returncode for p in procs]
    assert codes.count(0) >= 1
    for code, err in zip(codes, errors):
        if code:  # the others are told the output exists, naming it, not a staging dir
            assert code == 2 and err.startswith(f"Error: {out}") and STAGING_MARK not in err
            assert "already exists; use --force" in err
    assert [p.name for p in tmp_path.iterdir() if STAGING_MARK in p.name] == []


def test_failed_run_leaves_no_directory_it_made(tmp_path):
    images, labels = small_digits(20)
    src = make_idx_dir(tmp_path / "src", images, labels)
    bad = src / "train-images-idx3-ubyte"
    bad.write_bytes(bad.read_bytes()[:-100])  # fails while the data is read
    for target in (tmp_path / "int" / "deeper" / "m.tfrecord", tmp_path / "int2" / "m.npz",
                   tmp_path / "int3" / "x" / "out.bin"):
        result = run("convert", src, target)
        one_error_line(result, 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


def test_interrupted_run_leaves_no_directory_it_made(tmp_path):
    target = tmp_path / "int" / "m.tfrecord"
    proc = subprocess.Popen([sys.executable, "-m", "mnistconv", "idx-to-tfrecord", SAMPLE,
                             target, "-q"], cwd=REPO, stderr=subprocess.PIPE)
    deadline = time.time() + 30
    while not (tmp_path / "int").exists() and time.time() < deadline \
            and proc.poll() is None:
        time.sleep(0.005)
    proc.send_signal(signal.SIGINT)
    proc.communicate()
    if proc.returncode == 0:
        pytest.skip("the conversion finished before the signal")
    assert proc.returncode == 130
    assert not (tmp_path / "int").exists()


def test_long_output_names_work(tmp_path):
    name = "n" * 245 + ".npz"
    result = run("convert", SAMPLE, tmp_path / name, "-q")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / name).is_file()


def test_errors_name_the_users_path_not_a_staging_one(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "SHA256SUMS").mkdir()
    result = run("convert", SAMPLE, out, "--to", "idx", "--sha256sums")
    assert one_error_line(result, 2) == f"{out / 'SHA256SUMS'}: is a directory, where " \
                                        "--sha256sums writes a file; move it away, or drop " \
                                        "--sha256sums"
    assert sorted(p.name for p in out.iterdir()) == ["SHA256SUMS"]  # nothing written


# --- streams ----------------------------------------------------------------------------

def test_closed_stdout_is_one_line():
    result = subprocess.run(f"'{sys.executable}' -m mnistconv info '{SAMPLE}' >&-",
                            shell=True, capture_output=True, cwd=REPO)
    assert one_error_line(result, 1) == ("stdout: standard output is closed; redirect it "
                                         "(> file) instead of closing it (>&-)")


def test_a_reader_gone_from_the_pipe_ends_as_unix_filters_do(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "mnistconv", "idx-to-npz", SAMPLE, "-"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    proc.stdout.read(10)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.wait()
    assert proc.returncode == -signal.SIGPIPE  # a shell shows 141
    assert err == ""
    assert [p for p in Path(os.environ.get("TMPDIR", "/tmp")).glob(
        f"stdout{STAGING_MARK}{proc.pid}-*")] == []


def test_terminal_stdin_is_refused_not_waited_on(tmp_path):
    master, slave = pty.openpty()
    try:
        result = subprocess.run([sys.executable, "-m", "mnistconv", "convert", "-",
                                 tmp_path / "x.npz"], stdin=slave, capture_output=True,
                                cwd=REPO, timeout=60)
    finally:
        os.close(master)
        os.close(slave)
    assert one_error_line(result, 2) == ("-: stdin is a terminal, not a dataset; pipe one "
                                         "in: cat mnist.npz | mnistconv convert - out/")


def test_stdin_notes_name_dash_not_the_spool(tmp_path):
    run("idx-to-tfrecord", SAMPLE, tmp_path / "x.tfrecord", "--split", "test",
        "-q").check_returncode()
    result = run("tfrecord-to-npz", "-", tmp_path / "y.npz",
                 stdin=(tmp_path / "x.tfrecord").read_bytes())
    assert result.returncode == 0, result.stderr
    assert result.stderr.decode().splitlines()[-1] == (
        "  note: -: split name 'train' assumed (the file does not record it); choose "
        "another with --split-name")


def test_stdin_errors_name_dash_not_the_spool():
    result = run("convert", "-", "x.npz", stdin=b"just some text\n")
    assert one_error_line(result, 2).startswith("-: is text, not a dataset; ")


def test_newline_in_a_file_name_stays_one_line(tmp_path):
    bad = tmp_path / "bad\nname.npz"
    bad.write_bytes(b"PK\x03\x04 not really a zip")
    message = one_error_line(run("info", bad), 1)
    assert message.startswith(f"{tmp_path}/bad\\nname.npz: not a valid npz (zip) file")


@pytest.mark.parametrize("dtype", ["float64", "float16"])
def test_json_never_holds_nan(tmp_path, dtype):
    images = np.zeros((3, 4, 4), np.uint8)
    labels = np.array([0.0, np.nan, np.inf], dtype)  # float16 once warned of overflow
    np.savez(tmp_path / "f.npz", x_train=images, y_train=labels)
    result = run("info", tmp_path / "f.npz", "--json")
    if result.returncode == 0:
        text = result.stdout.decode()
        assert "NaN" not in text and "Infinity" not in text
        json.loads(text)
    else:  # or the labels are refused where they are read
        one_error_line(result, 1)


# --- options and hints ----------------------------------------------------------------

@pytest.mark.parametrize("args, message", [
    (["--seed", "7"], "--seed applies only with --shuffle or --split-off; add one of them, "
     "or drop --seed"),
])
def test_option_values_are_checked(tmp_path, args, message):
    result = run("convert", SAMPLE, tmp_path / "x.npz", *args)
    assert one_error_line(result, 2) == message
    assert not (tmp_path / "x.npz").exists()


def test_negative_seed_is_a_usage_error(tmp_path):
    result = run("convert", SAMPLE, tmp_path / "x.npz", "--shuffle", "--seed", "-1")
    assert result.returncode == 2 and "Traceback" not in result.stderr.decode()
    assert "'--seed': -1 is not in the range x>=0" in result.stderr.decode()


def test_mistyped_command_gets_did_you_mean():
    result = run("convrt", "a", "b")
    assert result.returncode == 2
    assert "No such command 'convrt'. Did you mean 'convert'?" in result.stderr.decode()


# --- output names ---------------------------------------------------------------------

@pytest.mark.parametrize("command, dst, message", [
    ("idx-to-tfrecord", "x.npz", "x.npz: the name says npz (.npz), but the output format is "
     "tfrecord; write npz with --to npz or a *-to-npz command, or name it x.tfrecord"),
    ("idx-to-gdmnist", "x.tfrecord", "x.tfrecord: the name says tfrecord (.tfrecord), but "
     "the output format is gdmnist; write tfrecord with --to tfrecord or a *-to-tfrecord "
     "command, or name it x.bin"),
    ("idx-to-npz", "out", "out: npz writes one file holding every split, not a directory; "
     "name the file, e.g. out.npz"),
    ("idx-to-npz", "x.npz.gz", "x.npz.gz: npz output does not take a .gz suffix; use "
     "--compress instead"),
])
def test_a_name_of_another_format_is_a_usage_error(tmp_path, command, dst, message):
    result = run(command, SAMPLE, dst, cwd=tmp_path)
    assert one_error_line(result, 2) == message
    assert list(tmp_path.iterdir()) == []


def test_compression_suffix_selects_compression_and_stays_last(tmp_path):
    run("idx-to-tfrecord", SAMPLE, "m.tfrecord.gz", "-q", cwd=tmp_path).check_returncode()
    run("idx-to-tfrecord", SAMPLE, "z.tfrecord.zz", "-q", cwd=tmp_path).check_returncode()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "m-test.tfrecord.gz", "m-train.tfrecord.gz", "z-test.tfrecord.zz",
        "z-train.tfrecord.zz"]
    assert (tmp_path / "m-train.tfrecord.gz").read_bytes()[:2] == b"\x1f\x8b"
    assert (tmp_path / "z-train.tfrecord.zz").read_bytes()[:1] == b"\x78"  # zlib header
    import tensorflow as tf
    n = sum(1 for _ in tf.data.TFRecordDataset(str(tmp_path / "m-train.tfrecord.gz"),
                                               compression_type="GZIP"))
    assert n == 1000
    result = run("idx-to-tfrecord", SAMPLE, "q.tfrecord.gz", "--compression", "zlib",
                 cwd=tmp_path)
    assert one_error_line(result, 2) == ("q.tfrecord.gz: the name says .gz but "
                                         "--compression says zlib; make them agree, or "
                                         "drop one")


def test_a_name_without_extension_is_a_directory(tmp_path):
    run("idx-to-tfrecord", SAMPLE, "out", "-q", cwd=tmp_path).check_returncode()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["test.tfrecord",
                                                                     "train.tfrecord"]
    run("convert", SAMPLE, "idxout", "-q", cwd=tmp_path).check_returncode()
    assert (tmp_path / "idxout" / "train-images-idx3-ubyte").is_file()


# --- split names ----------------------------------------------------------------------

def test_split_names_are_kept_or_said_to_be_assumed(tmp_path):
    run("idx-to-npz", SAMPLE, tmp_path / "m.npz", "-q").check_returncode()
    result = run("convert", tmp_path / "m.npz", tmp_path / "t.tfrecord", "--split", "test")
    assert result.returncode == 0
    assert result.stderr.decode().splitlines()[-1] == (
        f"  note: {tmp_path / 't.tfrecord'} does not record the split name 'test'; read "
        "it back with --split-name test")
    info = json.loads(run("info", tmp_path / "t.tfrecord", "--json").stdout)
    assert list(info["splits"]) == ["train"]
    assert info["notes"] == [f"{tmp_path / 't.tfrecord'}: split name 'train' assumed (the "
                             "file does not record it); choose another with --split-name"]
    info = json.loads(run("info", tmp_path / "t.tfrecord", "--json", "--split-name",
                          "test").stdout)
    assert list(info["splits"]) == ["test"] and info["notes"] == []
    # GDMNIST1 takes --split-name too.
    run("npz-to-gdmnist", tmp_path / "m.npz", tmp_path / "conv3.bin", "--split", "test",
        "-q").check_returncode()
    run("gdmnist-to-npz", tmp_path / "conv3.bin", tmp_path / "o.npz", "--split-name",
        "test", "-q").check_returncode()
    with np.load(tmp_path / "o.npz") as z:
        assert sorted(z.files) == ["x_test", "y_test"]
    for bad in ("../x", "/abs", "a\nb", "x" * 65, ".hidden"):
        result = run("info", tmp_path / "conv3.bin", "--split-name", bad)
        assert result.returncode == 2 and "is not a safe name" in result.stderr.decode()


# --- signals at any instant -----------------------------------------------------------

def _wait_for_handlers(proc):
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None:
        try:
            with open(f"/proc/{proc.pid}/status") as f:
                caught = int(next(l.split()[1] for l in f if l.startswith("SigCgt:")), 16)
        except (OSError, StopIteration):
            caught = 0
        if caught & (1 << (signal.SIGTERM - 1)):
            return
        time.sleep(0.001)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_at_any_instant_ends_cleanly(tmp_path, signum):
    """From the interpreter's start (imports, the first protobuf import of the TFRecord
    writer) to the last rename: exit 128+signal (or killed by it before mnistconv's
    handler exists), never a traceback, and the output whole or absent."""
    # SIGINT is Python's own until mnistconv's code runs: Ctrl-C while the interpreter
    # itself starts prints its "Could not import runpy module" for any program. So the
    # SIGINT runs count from the moment main() has installed its handlers (SIGTERM
    # appears among the signals the process catches); SIGTERM's from the exec.
    delays = [i * 0.03 for i in range(20)]
    for i, delay in enumerate(delays):
        target = tmp_path / f"run{i}" / "m.tfrecord"
        proc = subprocess.Popen([sys.executable, "-m", "mnistconv", "idx-to-tfrecord",
                                 SAMPLE, target, "-q", "--split", "test"], cwd=REPO,
                                stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                start_new_session=True)
        if signum == signal.SIGINT:
            _wait_for_handlers(proc)
        time.sleep(delay)
        os.killpg(proc.pid, signum)
        _, err = proc.communicate(timeout=120)
        err = err.decode()
        assert "Traceback" not in err, (delay, err)
        assert proc.returncode in (0, 128 + signum, -signum), (delay, proc.returncode, err)
        assert err in ("", "Interrupted.\n"), (delay, err)
        left = sorted(p.name for p in tmp_path.joinpath(f"run{i}").glob("*")) \
            if target.parent.exists() else []
        assert left in ([], ["m.tfrecord"]), (delay, left)
        if left:
            assert target.stat().st_size > 0


def test_a_full_disk_behind_stdout_names_stdout():
    for args in (["info", SAMPLE, "--json"], ["idx-to-npz", SAMPLE, "-", "-q"]):
        with open("/dev/full", "wb") as full:
            result = subprocess.run([sys.executable, "-m", "mnistconv", *map(str, args)],
                                    stdout=full, stderr=subprocess.PIPE, cwd=REPO)
        assert result.returncode == 1
        assert result.stderr.decode() == ("Error: stdout: No space left on device; free "
                                          "some space and run again\n")


def test_summary_lists_at_most_twenty_files_json_lists_all(tmp_path):
    pytest.importorskip("PIL")
    result = run("idx-to-imagefolder", SAMPLE, tmp_path / "images", "--split", "test")
    assert result.returncode == 0, result.stderr
    lines = result.stderr.decode().splitlines()
    assert sum(1 for l in lines if "sha256" in l) == 20
    # 200 PNGs and the tree's croissant.json
    assert any(l.startswith("  ... and 181 more files, ") for l in lines)
    result = run("idx-to-imagefolder", SAMPLE, tmp_path / "again", "--split", "test",
                 "--json")
    assert len(json.loads(result.stdout)["files"]) == 201


def test_split_names_from_file_names_are_checked_for_every_reader(tmp_path):
    """Found by the long fuzz pass: a TFRecord directory whose file names are not UTF-8
    gave split names the npz writer could not encode (a traceback). Every reader's
    split names now pass the safe-name rule, wherever they came from."""
    run("idx-to-tfrecord", SAMPLE, tmp_path / "d", "-q").check_returncode()
    os.rename(tmp_path / "d" / "train.tfrecord",
              os.fsencode(tmp_path / "d") + b"/ev\xffil.tfrecord")
    result = run("convert", tmp_path / "d", tmp_path / "o.npz")
    message = one_error_line(result, 1)
    assert "is not a safe name" in message and "Traceback" not in message
    assert not (tmp_path / "o.npz").exists()


def test_a_torchvision_root_reads_back(tmp_path):
    """--layout torchvision writes ROOT/MNIST/raw/: the root reads as the dataset."""
    run("convert", SAMPLE, tmp_path / "root", "--to", "idx", "--layout", "torchvision",
        "-q").check_returncode()
    info = json.loads(run("info", tmp_path / "root", "--json").stdout)
    assert info["format"] == "idx"
    assert {n: s["count"] for n, s in info["splits"].items()} == {"train": 1000, "test": 200}
