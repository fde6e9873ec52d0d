"""Options for the fuzz suite.

`make test` runs a short, derandomized pass (the same cases every run, a few seconds);
`make fuzz` runs `pytest tests/fuzz --fuzz-long`: at least 10000 random cases per reader
for each fuzz test. MNISTCONV_FUZZ_CASES=N sets the number of cases per test explicitly
(it also works when pytest is started from another directory, where this conftest's
option is not registered).

What runs where: test_fuzz_cuts (every structural boundary, always whole) and the short
pass of everything else run in-process; test_fuzz_long's hostile names, labels and
compression bombs run in worker processes (worker.py), MNISTCONV_FUZZ_JOBS of them (one
per core by default), each measuring its cases' peak memory.
"""

import os

import pytest

SHORT_CASES = 25
LONG_CASES = 10000


def pytest_sessionstart(session):
    """Start array_record's thread pool before any case runs under the harness's
    address-space limit: started under that limit, its threads never come up and the
    first ArrayRecordReader waits forever (mnistconv's own start happens on first use,
    which here may be inside a limited case)."""
    try:
        from mnistconv.codecs.spool import array_record_module
        array_record_module()
    except Exception:  # no array-record (Python < 3.11, or not installed): nothing to start
        pass


@pytest.fixture(scope="session", autouse=True)
def _pyarrow_started():
    """pyarrow's allocator and thread pools reserve address space on first use: under
    the harness's limit (in a worker of pytest -n that has read no Parquet yet) a malloc
    then fails."""
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        return
    sink = pyarrow.BufferOutputStream()
    pyarrow.parquet.write_table(pyarrow.table({"x": list(range(4096))}), sink)
    pyarrow.parquet.read_table(pyarrow.BufferReader(sink.getvalue())).to_pylist()


def pytest_addoption(parser):
    parser.addoption("--fuzz-long", action="store_true", default=False,
                     help=f"run the long fuzz pass ({LONG_CASES} cases per reader and test)")


@pytest.fixture(scope="session")
def fuzz_cases(request):
    """(number of cases, derandomize) for this run."""
    if os.environ.get("MNISTCONV_FUZZ_CASES"):
        return int(os.environ["MNISTCONV_FUZZ_CASES"]), False
    if request.config.getoption("--fuzz-long", default=False):
        return LONG_CASES, False
    return SHORT_CASES, True


def pytest_collection_modifyitems(config, items):
    """The long pass runs 10000 cases in one test: lift pytest-timeout's per-test limit
    for it (each case still has the harness's own watchdog)."""
    long = os.environ.get("MNISTCONV_FUZZ_CASES") or \
        config.getoption("--fuzz-long", default=False)
    if long:
        for item in items:
            if "fuzz" in item.nodeid.split("::")[0]:
                item.add_marker(pytest.mark.timeout(0))
