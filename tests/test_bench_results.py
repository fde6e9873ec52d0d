"""benchmarks/results.json is the one home of the figures the documentation shows:
run.py keeps there what a bench printed (its tables and targets, noted by common.py, and
its whole output), replacing that bench's entry and no other, and the Performance page is
rendered from it (docs/hooks.py)."""

import importlib.util
import json
import textwrap

import pytest

from helpers import REPO


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_bench_run_replaces_its_own_entry_and_the_page_shows_it(tmp_path, monkeypatch):
    pytest.importorskip("mkdocs")  # docs/hooks.py renders with it (the docs extra)
    run = _load("bench_run", REPO / "benchmarks" / "run.py")
    hooks = _load("docs_hooks", REPO / "docs" / "hooks.py")
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"about": "a", "benches": {
        "summary": {"title": "S", "date": "2026-12-01", "source": "README",
                    "tables": [{"title": "", "columns": ["task", "time"],
                                "rows": [["old", "1 s"]]}]}}}))
    monkeypatch.setattr(run, "RESULTS", results)
    monkeypatch.setattr(hooks, "RESULTS", str(results))
    bench = tmp_path / "bench_fake.py"
    bench.write_text(textwrap.dedent(f'''\
        """A fake bench: two commands, one target.

        More words."""
        import sys
        sys.path.insert(0, {str(REPO / "benchmarks")!r})
        import common
        results = {{"mnistconv x": common.Result("mnistconv x", [0.5, 0.7], [0.4], 2048),
                    "baseline y": common.Result("baseline y", [2.0], [1.9], 4096)}}
        common.print_table("Fake table", results, "mnistconv x")
        targets = common.Targets()
        targets.check(False, "at least 5x faster")
        targets.exit()
        '''))

    code, output, records = run.run_bench(bench)
    assert code == 1
    assert "baseline y" in output and "[MISSED] at least 5x faster" in output
    run.keep(bench, "FAILED (exit 1)", output, records)

    data = json.loads(results.read_text())
    assert list(data["benches"]) == ["summary", "bench_fake"]
    assert data["benches"]["summary"]["tables"][0]["rows"] == [["old", "1 s"]]
    entry = data["benches"]["bench_fake"]
    assert entry["title"] == "bench_fake.py: A fake bench: two commands, one target"
    assert entry["source"].startswith("make bench (FAILED (exit 1)) on ")
    assert entry["tables"] == [{
        "title": "Fake table",
        "columns": ["command", "median s", "min..max s", "cpu s", "peak MB",
                    "time / mnistconv"],
        "rows": [["mnistconv x", "0.600", "0.500..0.700", "0.40", "2.1", "1.00 (ref)"],
                 ["baseline y", "2.000", "2.000..2.000", "1.90", "4.2", "3.33x"]]}]
    assert entry["targets"] == [{"description": "at least 5x faster", "met": False}]
    assert entry["output"] == output

    page = hooks.results("measured")
    assert "### bench_fake.py: A fake bench: two commands, one target" in page
    assert "| baseline y | 2.000 | 2.000..2.000 | 1.90 | 4.2 | 3.33x |" in page
    assert "- **missed**: at least 5x faster" in page
    assert "| old | 1 s |" in hooks.results("summary")
    assert "old" not in page  # the summary has its own place on the page


def test_the_committed_results_file_has_a_date_and_source_for_every_entry():
    data = json.loads((REPO / "benchmarks" / "results.json").read_text())
    assert {"summary", "bench_scale"} <= set(data["benches"])
    for key, entry in data["benches"].items():
        assert entry["date"][:4].isdigit() and entry["source"], key
        for table in entry.get("tables", ()):
            assert all(len(row) == len(table["columns"]) for row in table["rows"]), key
