"""The command line through click's CliRunner, in-process: exact stdout, stderr and exit
codes where a subprocess is not the point. Errors a user can cause reach click as a
CliError, so the runner shows the same one `Error:` line that `mnistconv` prints; the
last tests hold the runner's view against main()'s (what the program runs) and keep
mnistconv/cli/ free of import cycles."""

import ast
import errno
import json
import os

import numpy as np
import pytest
from click.testing import CliRunner

from helpers import SAMPLE
from mnistconv.formats import registry
from mnistconv.cli import CliError, cli, main

CLI_DIR = os.path.join(os.path.dirname(os.path.dirname(registry.__file__)), "cli")

SAMPLE_FILES = (
    ("0a725c351dacd1932a68938c0366707d4a6069c4a542eeb44ba6f7b8126ee1b5", 161728,
     "train-images-idx3-ubyte.gz"),
    ("699722d875ade1a0fab522aef419b4506c45b83e05c71f6b7a13b57b2aba9212", 517,
     "train-labels-idx1-ubyte.gz"),
    ("420b2e16ea0de6226cb272b43c337a943de254713959643ede826b4b6f9e7f70", 31045,
     "t10k-images-idx3-ubyte.gz"),
    ("35e471546a21d6ea8a8f2157a0cbcc16c25dcba8115fe3e71d1379e1b393f1e3", 129,
     "t10k-labels-idx1-ubyte.gz"),
)

# Not UTF-8 (so not "text"), no format's magic, no format's extension.
NOT_A_DATASET = b"\x7fnot a dataset\xff" * 4


def invoke(*args, **kwargs):
    # COLUMNS: rich sizes the histogram from it instead of the test's own terminal.
    return CliRunner().invoke(cli, [str(a) for a in args], env={"COLUMNS": "80"},
                              **kwargs)


def outcome(result):
    return result.exit_code, result.stdout, result.stderr


# info's per-class bars in plain ASCII (not a terminal), 80 columns.
TRAIN_BARS = [
    "      0 #################################################            97",
    "      1 ##########################################################  116",
    "      2 ##################################################           99",
    "      3 ###############################################              93",
    "      4 #####################################################       105",
    "      5 ##############################################               92",
    "      6 ###############################################              94",
    "      7 ########################################################### 117",
    "      8 ############################################                 87",
    "      9 ##################################################          100",
]
TEST_BARS = [
    "      0 ####################################                         17",
    "      1 ############################################################ 28",
    "      2 ##################################                           16",
    "      3 ##################################                           16",
    "      4 ############################################################ 28",
    "      5 ###########################################                  20",
    "      6 ###########################################                  20",
    "      7 ###################################################          24",
    "      8 #####################                                        10",
    "      9 #############################################                21",
]


def test_info_on_the_sample_is_exact():
    want = [f"{SAMPLE}: idx, 2 split(s)",
            "  train: 1000 images 28x28 uint8, labels uint8 0..9",
            "    schema: 28x28 grey uint8, class", "    per class:",
            *TRAIN_BARS,
            "  test: 200 images 28x28 uint8, labels uint8 0..9",
            "    schema: 28x28 grey uint8, class", "    per class:",
            *TEST_BARS]
    want += [f"  {digest}  {size:>10}  {SAMPLE / name}" for digest, size, name in SAMPLE_FILES]
    assert outcome(invoke("info", SAMPLE)) == (0, "\n".join(want) + "\n", "")


def test_info_json_with_a_selection():
    result = invoke("info", SAMPLE, "--split", "test", "--per-class", "2", "--json")
    assert (result.exit_code, result.stderr) == (0, "")
    facts = json.loads(result.stdout)
    assert facts["path"] == str(SAMPLE) and facts["format"] == "idx"
    assert list(facts["splits"]) == ["test"]
    test = facts["splits"]["test"]
    assert (test["count"], test["class_counts"]) == (20, {str(c): 2 for c in range(10)})


@pytest.mark.parametrize("args, message", [
    (["info", "{tmp}/missing"], "{tmp}/missing: no such file or directory; check the path"),
    (["convert", SAMPLE, "{tmp}/o.npz", "--seed", "3"],
     "--seed applies only with --shuffle or --split-off; add one of them, "
     "or drop --seed"),
    (["idx-to-npz", SAMPLE, "{tmp}/o.npz", "--split", "valid"],
     f"{SAMPLE}/train-images-idx3-ubyte.gz: no split named valid; splits present: "
     "train, test"),
    (["show", SAMPLE, "--grid", "0x1", "-q"],
     "--grid '0x1' is not COLSxROWS; write e.g. 10x2"),
    (["preview", SAMPLE, "-o", "{tmp}/sheet.gif"],
     "{tmp}/sheet.gif: cannot tell the image format from the name; end it in .png, "
     ".jpg, .jpeg or .webp"),
], ids=["missing input", "seed without shuffle", "no such split", "bad grid",
        "preview name"])
def test_usage_errors_are_one_line_exit_2(tmp_path, args, message):
    args = [str(a).format(tmp=tmp_path) for a in args]
    assert outcome(invoke(*args)) == (2, "", f"Error: {message.format(tmp=tmp_path)}\n")
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_format_error_is_one_line_exit_1(tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"PK\x03\x04 not really a zip")
    assert outcome(invoke("info", bad)) == (
        1, "", f"Error: {bad}: not a valid npz (zip) file (File is not a zip file)"
                  "; check that numpy wrote it whole, or name its format with --from\n")
    # Converting it writes nothing.
    assert outcome(invoke("npz-to-idx", bad, tmp_path / "out", "-q"))[0] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.npz"]


def test_control_characters_in_a_name_stay_on_the_line(tmp_path):
    bad = tmp_path / "bad\nname\x1b[2J.npz"
    bad.write_bytes(b"PK\x03\x04 not really a zip")
    assert outcome(invoke("info", bad)) == (
        1, "", f"Error: {tmp_path}/bad\\nname\\x1b[2J.npz: not a valid npz (zip) file "
               "(File is not a zip file); check that numpy wrote it whole, or name its format with --from\n")


def test_an_os_error_is_one_line_with_the_disk_full_hint(tmp_path, monkeypatch):
    from mnistconv.cli import info

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp_path / "x"))
    monkeypatch.setattr(info, "describe", full)
    assert outcome(invoke("info", SAMPLE)) == (
        1, "", f"Error: {tmp_path}/x: No space left on device; free some space and run "
               "again\n")


def test_formats_json_is_the_registry():
    result = invoke("formats", "--json")
    assert (result.exit_code, result.stderr) == (0, "")
    rows = json.loads(result.stdout)
    assert [r["name"] for r in rows] == list(registry.FORMATS)
    for row, fmt in zip(rows, registry.FORMATS.values()):
        assert row == {"name": fmt.name, "read": fmt.can_read, "write": fmt.can_write,
                       "stdio": fmt.stdio, "description": fmt.description,
                       "extensions": list(fmt.extensions),
                       "read_options": [o.flag for o in fmt.read_options],
                       "write_options": [o.flag for o in fmt.write_options],
                       "holds": fmt.holds.table(),
                       "holds_when": [{"option": o, "value": v, "holds": h.table()}
                                      for o, v, h in fmt.holds_when]}
    idx = rows[0]
    assert (idx["name"], idx["read"], idx["write"], idx["stdio"]) == ("idx", True, True,
                                                                      False)
    assert {"--prefix", "--labels"} <= set(idx["read_options"])
    assert "--gzip" in idx["write_options"]
    assert result.stdout == json.dumps(rows, indent=2) + "\n"


def test_pair_command_and_compare_both_sides(tmp_path):
    out = tmp_path / "test.npz"
    assert outcome(invoke("idx-to-npz", SAMPLE, out, "--split", "test", "-q")) == (0, "", "")
    with np.load(out) as npz:
        assert sorted(npz.files) == ["x_test", "y_test"] and len(npz["y_test"]) == 200
    # B under a name that says nothing: --from-b names its format.
    plain = tmp_path / "test.data"
    os.rename(out, plain)
    result = invoke("compare", SAMPLE, plain, "--from-a", "idx", "--from-b", "npz",
                    "--split", "test", "-q")
    assert outcome(result) == (0, "", "")
    result = invoke("compare", SAMPLE, plain, "--from-b", "npz", "--split", "test")
    assert outcome(result) == (0, "\n".join([
        f"A: {SAMPLE} (idx)", f"B: {plain} (npz)", "test: 200 vs 200 images, 28x28",
        "  labels: 200/200 agree (100.00%)",
        "  pixels: mean error 0, max 0, 0.00% differ, PSNR inf (identical)",
        "  equal", "only in A, not compared: train", "result: equal (tolerance 0)"]) + "\n",
        "")


def test_compare_names_the_side_to_fix(tmp_path):
    blob = tmp_path / "blob.dat"
    blob.write_bytes(NOT_A_DATASET)
    reads = ", ".join(f.name for f in registry.readers())
    assert outcome(invoke("compare", SAMPLE, blob)) == (
        2, "", f"Error: {blob}: not a dataset mnistconv recognizes (it reads {reads}); "
               "if it is one of these under another name, say which with --from-b\n")
    assert outcome(invoke("compare", blob, SAMPLE))[2].endswith("say which with --from-a\n")


def test_cli_error_carries_the_code_and_one_line():
    from mnistconv.errors import FormatError, UsageError
    usage = CliError.of(UsageError("a\nb", "bad", "fix it", cli_hint="use --force"))
    assert (usage.exit_code, usage.message) == (2, "a\\nb: bad; use --force")
    assert CliError.of(FormatError(None, "broken")).exit_code == 1
    assert CliError.of(OSError(errno.EACCES, "Permission denied", "f")).message == \
        "f: Permission denied"


@pytest.mark.parametrize("args", [
    ["info", "{tmp}/missing"],
    ["info", "{tmp}/bad.npz"],
    ["convert", SAMPLE, "{tmp}/o.npz", "--seed", "3"],
    ["formats"],
], ids=["usage", "format", "selection", "success"])
def test_the_runner_sees_what_the_program_prints(tmp_path, capsys, args):
    """main() (the program) and CliRunner (the tests) print the same and exit alike."""
    (tmp_path / "bad.npz").write_bytes(b"PK\x03\x04 not really a zip")
    args = [str(a).format(tmp=tmp_path) for a in args]
    with pytest.raises(SystemExit) as e:
        main(args)
    out, err = capsys.readouterr()
    assert outcome(invoke(*args)) == (e.value.code, out, err)


def _cli_imports():
    """{module: set of mnistconv.cli modules it imports}, from every import statement
    in mnistconv/cli/ (inside functions too)."""
    names = {f[:-3] for f in os.listdir(CLI_DIR) if f.endswith(".py")}
    graph = {}
    for name in names:
        with open(os.path.join(CLI_DIR, name + ".py"), encoding="utf-8") as f:
            tree = ast.parse(f.read())
        package = name == "__init__"
        found = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                target = (node.module or "").split(".")[0]
                found |= {target} if target else {a.name for a in node.names} & names
                if not target and not package:
                    found.add("__init__")
            elif isinstance(node, ast.ImportFrom) and node.module == "mnistconv.cli":
                found.add("__init__")
        graph[name] = found - {name}
    return graph


def test_cli_modules_import_no_cycle_and_stay_small():
    graph = _cli_imports()
    # The package lazily imports its commands; no command imports the package back.
    assert [m for m, deps in graph.items() if "__init__" in deps] == []
    done, path = set(), []

    def visit(module):
        assert module not in path, f"import cycle: {' -> '.join(path + [module])}"
        if module in done:
            return
        path.append(module)
        for dep in graph.get(module, ()):
            visit(dep)
        path.pop()
        done.add(module)
    for module in graph:
        visit(module)
    for name in graph:
        with open(os.path.join(CLI_DIR, name + ".py"), encoding="utf-8") as f:
            assert sum(1 for _ in f) <= 600, name


def test_formats_markdown_table_lists_every_registered_format():
    """The site's formats overview (docs/hooks.py) is this table: a format added to the
    registry appears in `mnistconv formats --markdown` and so on the site
    (tests/test_docs_site.py checks the built pages)."""
    result = CliRunner().invoke(cli, ["formats", "--markdown"])
    assert result.exit_code == 0
    from mnistconv.formats import registry
    overview, holds = result.output.split("\n\n")
    for table in (overview, holds):  # then what each holds (contract.admit's table)
        rows = table.splitlines()[2:]
        assert [row.split("**")[1] for row in rows] == list(registry.FORMATS)
