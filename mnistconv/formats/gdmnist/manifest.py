"""A pack's manifest.json: reading it, checking all of it before any file it lists is
opened, and writing it. mnistconv reads the fields _TOP_FIELDS, _ENTRY_FIELDS and _PREVIEW_FIELDS name, and
class_names (by label); any other is carried along, never interpreted. A manifest is
data from elsewhere, never a list of paths to follow: split ids are safe names listed
once; file names are plain, normalised, relative names that resolve (links included)
inside the pack directory; every field has its JSON type checked; a manifest over
MAX_MANIFEST_BYTES, or a FIFO or device, is refused before it is read; class_names are
bounded and must name every label a split counts. This module knows no file format: the
caller says how a file name names a split.
"""

import json
import os

from ...errors import FormatError
from ...io.fileio import open_input
from ...limits import parse_json, printable, safe_split_name

MAX_MANIFEST_BYTES = 1 << 20  # json.load holds all of it and more: larger is refused unread
_FIX = "a manifest is the JSON `mnistconv pack browser` writes"


def dumps(obj) -> bytes:
    """JSON as a pack writes it: sorted keys, indented, ASCII, so the same content is the
    same bytes."""
    return (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode("ascii")


def load_manifest(path) -> dict:
    """The manifest as a dict with a 'splits' object (open_manifest checks the rest)."""
    # The guarded opener: a FIFO neither blocks nor is read, a file swapped in is refused.
    with open_input(path) as f:
        size = os.fstat(f.fileno()).st_size
        if size > MAX_MANIFEST_BYTES:
            raise FormatError(path, f"is {size:,} bytes, more than a manifest may hold "
                                    f"({MAX_MANIFEST_BYTES:,})",
                              "name a pack's manifest.json, or its directory")
        manifest = parse_json(f.read(MAX_MANIFEST_BYTES + 1), path)
    if not isinstance(manifest, dict) or not isinstance(manifest.get("splits"), dict):
        raise FormatError(path, "not a browser-pack manifest: no 'splits' object",
                          "name a pack's manifest.json, or its directory")
    return manifest


# The JSON type of every field mnistconv reads or compares (absent or null is allowed).
def _count(v):
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


_TYPES = {"an object": lambda v: isinstance(v, dict),
          "a string": lambda v: isinstance(v, str),
          "true or false": lambda v: isinstance(v, bool),
          "a non-negative integer": _count,
          "an array of non-negative integers":
              lambda v: isinstance(v, list) and all(_count(x) for x in v)}
_ENTRY_FIELDS = {
    **{k: "a non-negative integer" for k in (
        "bytes", "gzip_bytes", "count", "rows", "columns", "pixel_offset",
        "label_offset", "original_index_offset")},
    **{k: "a string" for k in ("id", "file", "gzip_file", "sha256", "gzip_sha256",
                               "original_indices_sha256_uint32_le")},
    "class_counts": "an array of non-negative integers",
    "optional": "true or false",
}
_PREVIEW_FIELDS = {"file": "a string", "sha256": "a string",
                   "bytes": "a non-negative integer", "count": "a non-negative integer"}
_TOP_FIELDS = {"splits": "an object", "optional_splits": "an object",
               "preview": "an object", "default_total_bytes": "a non-negative integer",
               "default_total_gzip_bytes": "a non-negative integer"}


def _json_type(value):
    kinds = ((dict, "an object"), (list, "an array"), (str, "a string"),
             (bool, "true/false"), ((int, float), "a number"))
    return next((kind for t, kind in kinds if isinstance(value, t)), "null")


def _check_fields(obj, fields, path, where):
    for key, want in fields.items():
        value = obj.get(key)
        if value is not None and not _TYPES[want](value):
            raise FormatError(path, f"{where}{key!r} is {_json_type(value)}, expected "
                                    f"{want}", _FIX)


def member_path(folder, name, manifest_path, what) -> str:
    """The path of a file a manifest names, a plain, normalised, relative name resolving
    (links followed) inside the pack directory, or a FormatError naming the entry
    ("../x.bin" and "/etc/passwd" raise). Nothing is opened here."""
    problem = None
    if not name or any(c in name for c in "\0\\") or not name.isprintable():
        problem = "is not a plain file name"
    elif os.path.isabs(name):
        problem = "is an absolute path"
    elif ".." in name.split("/") or os.path.normpath(name) != name:
        problem = "is not a normalised path inside the pack ('..', '.' or '//')"
    else:
        inside = os.path.realpath(folder)
        real = os.path.realpath(os.path.join(inside, name))
        if real == inside or os.path.commonpath([inside, real]) != inside:
            problem = "resolves outside the pack directory (through a symbolic link)"
    if problem:
        raise FormatError(manifest_path, f"{what} {printable(name)} {problem}",
                          "a manifest names files inside its own directory only")
    return os.path.join(folder, name)


class PackSplitFiles:
    """One split a manifest lists, with the checked paths of its `file` and `gzip_file`."""

    def __init__(self, name, entry, optional, paths):
        self.name, self.entry, self.optional, self.paths = name, entry, optional, paths


class Manifest:
    """A checked manifest (made by open_manifest): its JSON (`data`), its splits in order
    (PackSplitFiles) and the checked path of its preview file, or None."""

    def __init__(self, path, data, splits, preview, class_names=()):
        self.path, self.data, self.splits, self.preview = path, data, splits, preview
        self.class_names = class_names  # a tuple by label; () when the pack has none

    def present_files(self) -> dict:
        """{split name: path} of each split's `file` if present, else its `gzip_file`
        (an optional split with neither is left out)."""
        files = {}
        for split in self.splits:
            names = [split.entry[k] for k in split.paths]
            present = [p for p in split.paths.values() if os.path.exists(p)]
            if not present:
                if split.optional:
                    continue
                raise FormatError(self.path, f"lists split {printable(split.name)} but "
                                             f"{' and '.join(names) or 'no file'} "
                                             "is missing",
                                  "build the pack again, or copy the missing file beside its manifest")
            files[split.name] = present[0]
        return files


def open_manifest(manifest_path, split_name) -> Manifest:
    """Read a pack manifest and check all of it before any file it lists is opened:
    JSON types, split names (safe names, each once) and file paths (inside the pack).
    `split_name(file)` names the split of an entry without an id from its first file
    (formats.gdmnist.split_name: `test-full.bin.gz` -> test-full)."""
    manifest_path = str(manifest_path)
    data = load_manifest(manifest_path)
    folder = os.path.dirname(os.path.abspath(manifest_path))
    _check_fields(data, _TOP_FIELDS, manifest_path, "")
    splits, names = [], set()
    for group in ("splits", "optional_splits"):
        for key, entry in (data.get(group) or {}).items():
            where = f"{group} {printable(key)}: "
            if not isinstance(entry, dict):
                raise FormatError(manifest_path, f"{where}is {_json_type(entry)}, expected "
                                                 "an object", _FIX)
            _check_fields(entry, _ENTRY_FIELDS, manifest_path, where)
            files = [entry.get(k) for k in ("file", "gzip_file") if entry.get(k)]
            # An id given is the name, even an empty one (refused below as unsafe).
            name = entry["id"] if entry.get("id") is not None else \
                (split_name(files[0]) if files else key)
            safe_split_name(name, manifest_path, f"{where}split id")
            if name in names:
                raise FormatError(manifest_path, f"{where}split id {printable(name)} is "
                                                 "listed twice", _FIX)
            names.add(name)
            paths = {k: member_path(folder, entry[k], manifest_path,
                                    f"split {printable(name)} {k}")
                     for k in ("file", "gzip_file") if entry.get(k)}
            splits.append(PackSplitFiles(name, entry, group == "optional_splits"
                                         or bool(entry.get("optional")), paths))
    preview = data.get("preview") or {}
    _check_fields(preview, _PREVIEW_FIELDS, manifest_path, "preview: ")
    preview_path = member_path(folder, preview["file"], manifest_path, "preview file") \
        if preview.get("file") else None
    names = _class_names(data.get("class_names"), splits, manifest_path)
    return Manifest(manifest_path, data, splits, preview_path, names)


def _class_names(value, splits, path) -> tuple:
    """The checked class_names (absent: ()), naming every label a split counts."""
    if value is None:
        return ()
    from ...codecs.classes import check_names
    if not isinstance(value, list):
        raise FormatError(path, f"'class_names' is {_json_type(value)}, expected an array "
                                "of strings (the name of label 0 first)", _FIX)
    for i, name in enumerate(value):
        if not isinstance(name, str):
            raise FormatError(path, f"'class_names' item {i} is {_json_type(name)}, "
                                    "expected a string", _FIX)
    names = check_names(value, path, "'class_names'")
    for split in splits if names else ():  # [] names nothing: as absent
        counts = split.entry.get("class_counts") or []
        used = [label for label, n in enumerate(counts) if n]
        if used and used[-1] >= len(names):
            raise FormatError(path, f"'class_names' names {len(names)} classes, but split "
                                    f"{printable(split.name)} counts {counts[used[-1]]} "
                                    f"examples of label {used[-1]}",
                              "give class_names one name for every label")
    return names
