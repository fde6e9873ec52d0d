"""Fixtures and hooks: the official MNIST files, the marks (process, client, slow) that
`make check` leaves out, and skips that fail in CI but name the extra to install
elsewhere. The helpers the tests call live in helpers.py."""

import importlib.util
import os
import re
import signal

import pytest

import marks
# Re-exported for test modules that still import helpers from conftest.
from helpers import (OFFICIAL, OFFICIAL_SHA256, REPO, SAMPLE,  # noqa: F401
                     cli_fails, converts_back_to_the_sample, files_in, idx_bytes,
                     make_idx_dir, mnist_gz_arrays, png, run, run_main, sample_arrays,
                     small_digits, stderr_of, tfrecord_example, tfrecord_frame, tree_hashes)

# `make test` runs pytest inside make: its MAKELEVEL and MAKEFLAGS would make the
# Makefiles the tests run print "make[1]:" and take the outer make's flags. The tests
# run them as a user does, from a shell.
for _name in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES"):
    os.environ.pop(_name, None)


def _clients_deselected(config) -> bool:
    return "not client" in (config.getoption("markexpr", "") or "")


def pytest_configure(config):
    # A shell's background job, and an xdist worker, may start with SIGINT ignored, and
    # the processes the tests start would inherit that: the Ctrl-C tests need it
    # delivered, as in a terminal.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # torch (through triton's native library) crashes the process when it is imported
    # after TensorFlow in the same process; the other way round both work. The tests
    # read outputs with both clients in this one pytest process, so torch comes first
    # (unless no client test is to run: `make check`).
    if not _clients_deselected(config):
        try:
            import torchvision  # noqa: F401
        except ImportError:
            pass


def pytest_ignore_collect(collection_path, config):
    """With clients deselected, a file that imports one at its top is not even
    collected: collecting it would cost the client's import (seconds)."""
    if _clients_deselected(config) and collection_path.suffix == ".py" and \
            collection_path.name.startswith("test_") and \
            marks.imports_heavy_at_top(str(collection_path)):
        return True
    return None


# Files whose module-scoped fixtures take seconds (a docs site build, reference
# conversions): under `make test` (pytest-xdist, --dist loadgroup) one worker runs each
# whole, so the fixture is built once, not once per worker.
ONE_WORKER_FILES = frozenset({"test_docs_site.py", "test_browser.py", "test_plan.py",
                              "test_plan_tfds_webdataset.py", "test_pack.py",
                              "test_tfrecord_tensorflow.py"})


def pytest_collection_modifyitems(config, items):
    """Mark each test `process` and/or `client` from what its code refers to."""
    classifier = marks.Classifier()
    grouped = config.pluginmanager.hasplugin("xdist")
    for item in items:
        for feature in sorted(marks.features(item, classifier)):
            item.add_marker(feature)
        if grouped and item.path.name in ONE_WORKER_FILES:
            item.add_marker(pytest.mark.xdist_group(item.path.stem))


@pytest.fixture(scope="session")
def official_dir():
    """The official MNIST .gz files; tests using them skip in a clone without ../shared."""
    if not all((OFFICIAL / f"{name}.gz").is_file() for name in OFFICIAL_SHA256):
        pytest.skip(f"official MNIST files not found in {OFFICIAL}")
    return OFFICIAL


@pytest.fixture(scope="session")
def official_arrays(official_dir):
    """The official files decoded independently of mnistconv (gzip + numpy at offsets)."""
    return mnist_gz_arrays(official_dir)


@pytest.fixture
def hf_env(tmp_path, monkeypatch):
    """`datasets` offline, its cache under the test's folder."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    return tmp_path


# The extra that installs a module tests import (the top-level name pip does not say).
EXTRA_OF_MODULE = {
    "tensorflow": "tensorflow", "tensorflow_datasets": "test-tfds", "grain": "grain",
    "array_record": "arrayrecord", "torch": "test-pytorch", "torchvision": "test-pytorch",
    "webdataset": "test-pytorch", "datasets": "test-parquet", "huggingface_hub":
    "test-parquet", "pyarrow": "parquet", "apache_beam": "beam", "lmdb": "caffe",
    "h5py": "caffe", "fsspec": "remote", "s3fs": "remote", "gcsfs": "remote",
    "aiohttp": "remote", "moto": "test-remote", "boto3": "test-remote", "mkdocs": "docs",
    "mlcroissant": "test-croissant", "tfrecord": "test-tfrecord-index",
}
_NOT_IMPORTED = re.compile(r"could not import '([\w.]+)'")
# A test's own skip naming the modules it lacks ("... needs tensorflow, torch; ...").
_NEEDS = re.compile(r"\bneeds ([\w.]+(?:, [\w.]+)*)")
# mnistconv's own MissingDependency line (errors.py), from a test's exception or from
# the stderr of a command the test ran.
_MISSING = re.compile(r"needs the Python package '([\w.-]+)'; install it with: "
                      r"pip install 'mnistconv\[([\w-]+)\]'")


def _missing_dependency(report, call):
    """The 'pip install ...' line when a test failed only for want of an optional
    dependency that really is not installed (None otherwise)."""
    from mnistconv.errors import MissingDependency
    text = str(report.longrepr)
    if call.excinfo is not None and isinstance(call.excinfo.value, MissingDependency):
        text = str(call.excinfo.value)
    if call.excinfo is not None and isinstance(call.excinfo.value, ModuleNotFoundError):
        # A test's own `import pyarrow` of a module an extra installs, not installed.
        name = (call.excinfo.value.name or "").split(".")[0]
        if name in EXTRA_OF_MODULE and importlib.util.find_spec(name) is None:
            return f"needs {name}: pip install 'mnistconv[{EXTRA_OF_MODULE[name]}]'"
    found = _MISSING.search(text)
    if found is None:
        return None
    package, extra = found.groups()
    module = {"pillow": "PIL", "google-crc32c": "google_crc32c", "protobuf": "google.protobuf",
              "array-record": "array_record", "apache-beam": "apache_beam"}.get(
                  package, package.replace("-", "_"))
    try:
        if importlib.util.find_spec(module) is not None:
            return None  # installed: the failure is real
    except (ImportError, ValueError):
        pass
    return f"needs {package}: pip install 'mnistconv[{extra}]'"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """In CI (CI=true, as .ci/run is run) nothing may be skipped: `make test` installs
    TensorFlow, Chromium and the rest, and ../shared is beside the clone, so a skip there
    means a broken install hiding a check. Elsewhere a test that cannot run for want of
    an optional package skips, naming the extra that installs it."""
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("CI"):
        if report.skipped and not hasattr(report, "wasxfail"):
            reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) \
                else report.longrepr
            report.outcome = "failed"
            report.longrepr = f"skipped in CI, where every check must run: {reason}"
        return
    if report.failed and not hasattr(report, "wasxfail"):
        reason = _missing_dependency(report, call)
        if reason:
            report.outcome = "skipped"
            report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {reason}")
    else:
        _name_the_extra(report)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """A whole file skipped for want of a module (a top-level importorskip) names the
    extra too, or fails in CI."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("CI"):
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, where every check must run: {report.longrepr}"
    elif report.skipped:
        _name_the_extra(report)


def _name_the_extra(report):
    """'could not import X' or 'needs X, Y' gets the extras that install them."""
    if report.skipped and isinstance(report.longrepr, tuple):
        path, line, reason = report.longrepr
        found = _NOT_IMPORTED.search(reason) or _NEEDS.search(reason)
        modules = found.group(1).split(", ") if found else []
        extras = sorted({EXTRA_OF_MODULE[m.split(".")[0]] for m in modules
                         if m.split(".")[0] in EXTRA_OF_MODULE})
        if extras and "pip install" not in reason:
            report.longrepr = (path, line,
                               f"{reason}; pip install 'mnistconv[{','.join(extras)}]'")


@pytest.fixture(scope="module")
def s3_server():
    """moto's S3 server on 127.0.0.1 (its endpoint URL), for the tests that write to and
    read from s3://; skips where s3fs or moto is not installed."""
    pytest.importorskip("s3fs")
    moto_server = pytest.importorskip("moto.server")
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def bucket(s3_server):
    """(s3fs filesystem, name) of a new, empty bucket on s3_server."""
    import s3fs
    fs = s3fs.S3FileSystem(key="testing", secret="testing",
                           client_kwargs={"endpoint_url": s3_server})
    name = f"b{os.urandom(4).hex()}"
    fs.mkdir(name)
    fs.invalidate_cache()
    return fs, name
