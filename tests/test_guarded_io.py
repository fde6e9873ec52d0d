"""The guarded functions are the only way the package opens input files and places
outputs (issues 24, 35): a walk over mnistconv/'s syntax trees finds every bare `open(`,
os.listdir/scandir/walk, Path.iterdir, shutil.rmtree and os.replace/rename outside
fileio.py (fileio.open_input, input_entries), staging.py (StagedOutput,
check_output_path, create_staged, output_entries, remove_scratch) and journal.py (the
commit's steps, and a killed commit's completion), and gzip/io.open,
hashlib.file_digest and Path's reads and writes. The allowlist is empty: a new call
fails this test until it goes through the guard."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "mnistconv"
GUARDS = {"fileio.py", "staging.py", "journal.py"}
FLAGGED = {("os", "listdir"), ("os", "scandir"), ("os", "walk"), ("shutil", "rmtree"),
           ("os", "replace"), ("os", "rename"), ("io", "open"), ("gzip", "open"),
           ("bz2", "open"), ("lzma", "open"), ("hashlib", "file_digest"),
           # stat-then-read: a size or identity taken by name, then the file read by name
           ("os", "stat"), ("os", "lstat"), ("path", "getsize"), ("path", "getmtime")}
# Libraries that open a file by its name (zip, liblmdb, HDF5, array_record, pyarrow,
# tar): read through io.inputzip.InputZip / fileio.library_path, which hand them the file
# open_input opened. Called with a file object or for writing, they are not flagged.
NAME_OPENERS = {"ZipFile", "ParquetFile", "ArrayRecordReader", "ArrayRecordDataSource",
                "read_table"}
# Path methods that open a file by name, by their positional arguments (a module's own
# read_text(path, ...) is not one).
PATH_READS = {"iterdir": 0, "read_bytes": 0, "read_text": 0, "write_bytes": 1,
              "write_text": 1}

# Every module opens, lists, moves and removes through fileio/staging (issue 35), but
# one: Grain opens ArrayRecord files by name itself, in its worker processes after the
# source is pickled, where no descriptor of ours exists; grain.source checks each name
# (check_input) when the source is made.
ALLOWED: dict = {}


def _calls(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id == "open":
            yield "open", node.lineno
        elif isinstance(f, ast.Attribute) and PATH_READS.get(f.attr) == len(node.args):
            yield f.attr, node.lineno
        elif isinstance(f, ast.Attribute) and isinstance(f.value, (ast.Name, ast.Attribute)) \
                and (_last_name(f.value), f.attr) in FLAGGED:
            yield f"{_last_name(f.value)}.{f.attr}", node.lineno
        elif _name_of(f) in NAME_OPENERS and _reads_by_name(node):
            yield _name_of(f), node.lineno
        elif isinstance(f, ast.Attribute) and _last_name(f.value) == "h5py" and \
                f.attr == "File" and _reads_by_name(node):
            yield "h5py.File", node.lineno
        elif isinstance(f, ast.Attribute) and _last_name(f.value) == "lmdb" and \
                f.attr == "open" and any(k.arg == "readonly" for k in node.keywords) and \
                _reads_by_name(node):
            yield "lmdb.open", node.lineno  # liblmdb creates what it writes: staged


def _last_name(node):
    return node.id if isinstance(node, ast.Name) else \
        node.attr if isinstance(node, ast.Attribute) else None


def _name_of(func):
    return func.id if isinstance(func, ast.Name) else \
        func.attr if isinstance(func, ast.Attribute) else None


def _reads_by_name(call) -> bool:
    """The call opens an existing file by its name for reading: not a write (a mode
    other than "r"), not a file object from open_input (`f`, `self._guarded`), not the
    name fileio.library_path gives (`with library_path(path) as guarded`) and not
    os.devnull."""
    modes = [a.value for a in call.args[1:2] if isinstance(a, ast.Constant)] + \
        [k.value.value for k in call.keywords if k.arg == "mode" and
         isinstance(k.value, ast.Constant)]
    if any(isinstance(m, str) and m not in ("r", "rb") for m in modes):
        return False
    first = call.args[0] if call.args else None
    if isinstance(first, ast.Attribute) and first.attr in ("devnull", "_guarded"):
        return False
    return not (isinstance(first, ast.Name) and first.id in ("f", "guarded"))


def _found():
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name in GUARDS and path.parent == PACKAGE / "io":
            continue
        for call, line in _calls(path):
            found.setdefault((path.relative_to(PACKAGE).as_posix(), call), []).append(line)
    return found


def test_only_the_guards_open_inputs_and_place_outputs():
    found = _found()
    unguarded = {k: v for k, v in found.items() if k not in ALLOWED}
    assert not unguarded, "open or place these through fileio/staging: " + ", ".join(
        f"{module}:{lines} {call}" for (module, call), lines in sorted(unguarded.items()))


def test_the_allowlist_holds_nothing_stale():
    assert set(ALLOWED) <= set(_found())


def test_the_scan_sees_each_kind_of_call(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("import os, shutil\nopen('x')\nos.listdir('.')\nos.scandir('.')\n"
                      "os.walk('.')\nshutil.rmtree('d')\nos.replace('a', 'b')\n"
                      "p.iterdir()\nos.rename('a', 'b')\nos.path.join('a')\ngzip.open('x')\n"
                      "io.open('x')\nhashlib.file_digest(f, 'sha256')\np.read_bytes()\n"
                      "classes.read_text(path, 'names')\n")
    assert [c for c, _ in _calls(sample)] == [
        "open", "os.listdir", "os.scandir", "os.walk", "shutil.rmtree", "os.replace",
        "iterdir", "os.rename", "gzip.open", "io.open", "hashlib.file_digest", "read_bytes"]


def test_a_library_opens_the_checked_file_not_what_is_swapped_in(tmp_path):
    """fileio.library_path hands a library the file open_input opened: a file put in
    its place after the check is not what the library reads, and a FIFO or a link
    leading outside is refused before any library sees a name."""
    import os

    import pytest

    from mnistconv.io import fileio
    from mnistconv.errors import UsageError
    (tmp_path / "data.bin").write_bytes(b"checked")
    (tmp_path / "other.bin").write_bytes(b"swapped")
    with fileio.library_path(str(tmp_path / "data.bin"), str(tmp_path)) as guarded:
        os.replace(tmp_path / "other.bin", tmp_path / "data.bin")
        with open(guarded, "rb") as f:  # what liblmdb, HDF5 or pyarrow would open
            assert f.read() == b"checked"
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(UsageError, match="not a regular file"):
        with fileio.library_path(str(tmp_path / "fifo")):
            pass
    (tmp_path / "inner").mkdir()
    (tmp_path / "inner" / "link").symlink_to(tmp_path / "data.bin")
    with pytest.raises(UsageError, match="outside"):
        with fileio.library_path(str(tmp_path / "inner" / "link"), str(tmp_path / "inner")):
            pass


def test_an_input_zip_closes_the_file_it_opened(tmp_path):
    import zipfile

    from mnistconv.io.inputzip import InputZip
    with zipfile.ZipFile(tmp_path / "a.zip", "w") as z:
        z.writestr("arr_0.npy", b"x")
    archive = InputZip(str(tmp_path / "a.zip"))
    assert archive.namelist() == ["arr_0.npy"]
    archive.close()
    assert archive._guarded.closed
