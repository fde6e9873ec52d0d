"""Options for the fuzz suite.

`make test` runs a short, derandomized pass (the same cases every run, a few seconds);
`make fuzz` runs `pytest tests/fuzz --fuzz-long`: at least 10000 random cases per reader
for each fuzz test. MNISTCONV_FUZZ_CASES=N sets the number of cases per test explicitly
(it also works when pytest is started from another directory, where this conftest's
option is not registered).
"""

import os

import pytest

SHORT_CASES = 25
LONG_CASES = 10000


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
