"""The corpus: inputs that once broke a reader (or nearly did), kept as regression tests.

tests/fuzz/corpus/<format>/<case> is a file or a directory; corpus/<format>/expected.json
records what reading it must give, "ok" with the example count or the exact error with
the case's own path written as <case>. Each case is also run through the command line
(`mnistconv info`, in-process) to check the user sees one line and exit code 1 or 2.

To add a case: copy the input the fuzz suite saved (the path is in its failure message)
into corpus/<format>/, fix the reader, then run this file once with
MNISTCONV_CORPUS_UPDATE=1 and review the diff of expected.json.
"""

import json
import os
from pathlib import Path

import pytest

from mnistconv.cli import main
from .harness import check_case

CORPUS = Path(__file__).resolve().parent / "corpus"
UPDATE = os.environ.get("MNISTCONV_CORPUS_UPDATE") == "1"


def _cases():
    for fmt_dir in sorted(p for p in CORPUS.iterdir() if p.is_dir()):
        for case in sorted(fmt_dir.iterdir()):
            if case.name != "expected.json":
                yield pytest.param(fmt_dir.name, case, id=f"{fmt_dir.name}/{case.name}")


def _expected(fmt):
    path = CORPUS / fmt / "expected.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _record(fmt, name, value):
    path = CORPUS / fmt / "expected.json"
    data = _expected(fmt)
    data[name] = value
    path.write_text(json.dumps(dict(sorted(data.items())), indent=2) + "\n")


@pytest.mark.parametrize("fmt,case", list(_cases()))
def test_corpus_case(fmt, case, capsys):
    kind, detail = check_case(case, fmt)
    got = {"ok": detail} if kind == "ok" else {"error": detail.replace(str(case), "<case>")}
    if UPDATE:
        _record(fmt, case.name, got)
    assert got == _expected(fmt).get(case.name), \
        f"{case}: {got}; run with MNISTCONV_CORPUS_UPDATE=1 to record a deliberate change"

    with pytest.raises(SystemExit) as exit_info:
        main(["info", str(case), "--from", fmt, "--json"])
    err = capsys.readouterr().err
    if kind == "ok":
        assert exit_info.value.code == 0, err
    else:
        assert exit_info.value.code in (1, 2), err
        assert err.startswith("Error: ") and err.count("\n") == 1, err
        assert "Traceback" not in err
