"""What the tests share: the official MNIST files (when ../shared is beside the clone),
generated IDX data, and running the command line, as a subprocess (run) or in-process
(run_main). Test modules import these from here; conftest.py holds the fixtures and
hooks (and still re-exports these names for modules that import them from conftest)."""

import copy
import gzip
import hashlib
import os
import subprocess
import sys
import tempfile
import traceback
import warnings
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
OFFICIAL = REPO.parent / "shared" / "data" / "mnist"
SAMPLE = REPO / "examples" / "data" / "mnist-sample"

# What an error of each advised kind says to do, as the command line prints it
# (mnistconv/errors.py's kinds).
DAMAGED = "the file is damaged: download, copy or convert it again"
BAD_IMAGE = "check that the images are 8-bit PNG or JPEG, or download the file again"
CUT_SHORT = "the file is cut short: download or copy it again"
NOT_THIS_FORMAT = "check the path, or name its format with --from"
OVER_LIMIT = "check that the file is not damaged, or split its data into smaller files"
ACCEPTED = "pass a value it accepts (see --help)"
OTHER_FORMAT = "write it to another format (--to; `mnistconv formats` lists them)"

# SHA-256 of the decompressed official files (../shared/data/mnist/README.md).
OFFICIAL_SHA256 = {
    "train-images-idx3-ubyte": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    "train-labels-idx1-ubyte": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
    "t10k-images-idx3-ubyte": "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
    "t10k-labels-idx1-ubyte": "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
}


def mnist_gz_arrays(folder):
    """The four MNIST .gz files in folder (the official ones, or SAMPLE) decoded
    independently of mnistconv: gzip, then numpy at the IDX data offsets."""
    def load(name, offset):
        return np.frombuffer(gzip.decompress((Path(folder) / f"{name}.gz").read_bytes()),
                             np.uint8, offset=offset)
    return {
        "x_train": load("train-images-idx3-ubyte", 16).reshape(-1, 28, 28),
        "y_train": load("train-labels-idx1-ubyte", 8),
        "x_test": load("t10k-images-idx3-ubyte", 16).reshape(-1, 28, 28),
        "y_test": load("t10k-labels-idx1-ubyte", 8),
    }


def run(*args, stdin=None, env=None, cwd=None):
    """Run the command line on ARGS in this process, through the entry point
    `python -m mnistconv` calls (mnistconv.cli.main: its signal handling, one-line
    errors and exit codes), with click's stdin/stdout/stderr isolation; returns a
    CompletedProcess (bytes stdout and stderr). An exception main() lets through ends
    as it would in a process: its traceback on stderr, exit code 1. Tests that need a
    real process (signals, SIGPIPE, limits, a fresh interpreter) use run_process.
    (Its CompletedProcess makes tests/marks.py mark its callers `process`: whole
    conversions, which `make check` leaves to `make test` to stay within its minute.)"""
    from click.testing import CliRunner

    from mnistconv.cli import main
    code = 0
    previous, tempdir = os.getcwd(), tempfile.tempdir
    with CliRunner().isolation(input=stdin, env=env) as (out, err, _), \
            warnings.catch_warnings():
        _warn_as_a_process_does()
        fsspec_conf = _fsspec_env_applied()
        try:
            tempfile.tempdir = None  # a TMPDIR in env applies, as in a new process
            if cwd is not None:
                os.chdir(cwd)
            main([str(a) for a in args])
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if e.code is not None and not isinstance(e.code, int):
                print(e.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc(file=sys.stderr)
            code = 1
        finally:
            os.chdir(previous)
            tempfile.tempdir = tempdir
            if fsspec_conf is not None:
                fsspec_conf[0].clear()
                fsspec_conf[0].update(fsspec_conf[1])
            sys.stdout.flush()
            sys.stderr.flush()
        return subprocess.CompletedProcess(list(args), code, out.getvalue(),
                                           err.getvalue())


def _fsspec_env_applied():
    """fsspec reads its FSSPEC_* variables (an S3 endpoint) once, when imported: apply
    the ones in os.environ now, as a new process would see them; returns (its config,
    a copy to restore), or None where fsspec is not imported yet."""
    config = sys.modules.get("fsspec.config")
    if config is None:
        return None
    saved = copy.deepcopy(config.conf)
    config.set_conf_env(config.conf, os.environ)
    return config.conf, saved


def _warn_as_a_process_does():
    """Python's default warning filters, printing to the (isolated) stderr: a warning
    the command lets out shows in its stderr as it would in a process, not in pytest's
    record."""
    warnings.resetwarnings()
    for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning,
                     ResourceWarning):
        warnings.simplefilter("ignore", category)

    def show(message, category, filename, lineno, file=None, line=None):
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))
    warnings.showwarning = show


def run_process(*args, stdin=None, env=None, cwd=None):
    """Run `python -m mnistconv ARGS` as users do, in a new process; returns the
    CompletedProcess."""
    full_env = dict(os.environ, **(env or {}))
    full_env["PYTHONPATH"] = str(REPO) + os.pathsep + full_env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "mnistconv", *map(str, args)],
                          input=stdin, capture_output=True, env=full_env, cwd=cwd)


def stderr_of(result):
    return result.stderr.decode()


def sample_arrays():
    """The bundled sample's (train images, train labels, test images, test labels),
    decoded independently of mnistconv."""
    return tuple(mnist_gz_arrays(SAMPLE).values())


def converts_back_to_the_sample(src, back):
    """`convert src back --to idx` gives the bundled sample's four files, byte for
    byte."""
    r = run("convert", src, back, "--to", "idx", "-q")
    assert r.returncode == 0, stderr_of(r)
    for name in OFFICIAL_SHA256:
        assert (Path(back) / name).read_bytes() == \
            gzip.decompress((SAMPLE / f"{name}.gz").read_bytes())


def png(image):
    """An 8-bit grayscale PNG of image, by mnistconv's encoder."""
    from mnistconv import codecs
    return codecs.encode_png(np.asarray(image, np.uint8))


def run_main(capsys, *args):
    """The real entry point in-process (so monkeypatch reaches what it reads): (exit
    code, stdout, stderr)."""
    from mnistconv.cli import main
    with pytest.raises(SystemExit) as exit_info:
        main([str(a) for a in args])
    out, err = capsys.readouterr()
    return exit_info.value.code, out, err


def cli_fails(tmp_path, *args):
    """Run the CLI: exit 1, nothing written or left under tmp_path, one stderr line
    starting "Error: ", which is returned."""
    before = sorted(tmp_path.rglob("*"))
    r = run(*args)
    assert r.returncode == 1, stderr_of(r)
    assert sorted(tmp_path.rglob("*")) == before  # nothing written, nothing left over
    lines = stderr_of(r).strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), lines
    return lines[0]


def idx_bytes(array, dtype_code=None):
    """Independent IDX encoder for tests (not mnistconv's)."""
    codes = {"uint8": 8, "int8": 9, "int16": 11, "int32": 12, "float32": 13, "float64": 14}
    array = np.asarray(array)
    code = dtype_code if dtype_code is not None else codes[array.dtype.name]
    header = bytes([0, 0, code, array.ndim]) + b"".join(
        int(d).to_bytes(4, "big") for d in array.shape)
    return header + array.astype(array.dtype.newbyteorder(">")).tobytes()


def make_idx_dir(folder, images, labels, split="train", gz=False, prefix=""):
    """Write an images/labels pair with canonical names into folder."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"{prefix}{'t10k' if split == 'test' else split}"
    ext = ".gz" if gz else ""
    for kind, arr in (("images", images), ("labels", labels)):
        data = idx_bytes(arr)
        if gz:
            data = gzip.compress(data, mtime=0)
        (folder / f"{stem}-{kind}-idx{np.ndim(arr)}-ubyte{ext}").write_bytes(data)
    return folder


def small_digits(n=50, seed=1, classes=10):
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
    labels = (np.arange(n) % classes).astype(np.uint8)
    rng.shuffle(labels)
    return images, labels


def files_in(folder):
    return sorted(p.name for p in Path(folder).iterdir())


def tfrecord_frame(records):
    """TFRecord framing of payloads (the layout in tfrecord's docstring): length, its
    masked CRC-32C, data, its masked CRC-32C."""
    import struct

    from mnistconv.formats import tfrecord
    out = []
    for data in records:
        length = struct.pack("<Q", len(data))
        out += [length, struct.pack("<I", tfrecord.masked_crc(length)), data,
                struct.pack("<I", tfrecord.masked_crc(data))]
    return b"".join(out)


def tfrecord_example(features=None, **more):
    """A serialized tf.train.Example: bytes values are bytes_list, ints int64_list."""
    from mnistconv.codecs.example import example_class
    ex = example_class()()
    for key, values in {**(features or {}), **more}.items():
        values = values if isinstance(values, list) else [values]
        if values and isinstance(values[0], bytes):
            ex.features.feature[key].bytes_list.value.extend(values)
        else:
            ex.features.feature[key].int64_list.value.extend(values)
    return ex.SerializeToString(deterministic=True)


def tree_hashes(folder):
    """{relative path: sha256} of every visible file under folder (progress records and
    staging leftovers are hidden): what "the same bytes as a local run" compares."""
    found = {}
    for root, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in names:
            if not name.startswith("."):
                path = os.path.join(root, name)
                with open(path, "rb") as f:
                    found[os.path.relpath(path, folder)] = hashlib.sha256(f.read()).hexdigest()
    return found


def http_get(port, path, host=None):
    """(status, body) of GET path from 127.0.0.1:port, with the Host header given
    (default: the URL's)."""
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        c.putrequest("GET", path, skip_host=host is not None)
        if host is not None:
            c.putheader("Host", host)
        c.endheaders()
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def refused_in_process(args, capsys):
    """(exit code, error line) of a command refused in this process (mnistconv.cli.main),
    with exactly one Error: line on stderr."""
    import pytest

    from mnistconv.cli import main
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    errors = [line for line in capsys.readouterr().err.splitlines()
              if line.startswith("Error:")]
    assert len(errors) == 1, errors
    return exit_info.value.code, errors[0]
