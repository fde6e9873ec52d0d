"""The package's layers (issue 25): what several formats use lives in mnistconv/codecs/, so
no format package imports another, and no module takes another module's private names
(a name one module needs from another is public and documented). Checked on the source
with ast, imports inside functions included."""

import ast
from pathlib import Path

from mnistconv.formats.registry import FORMAT_PACKAGES

PACKAGE = Path(__file__).resolve().parents[1] / "mnistconv"
FORMATS = {name.rpartition(".")[2] for name in FORMAT_PACKAGES}


def _module_name(path):
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(source, module, is_package):
    """(line, imported module, names) of every import statement; names: (name, alias)."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for a in node.names:  # `import a.b` binds a; `import a.b as c` binds a.b
                bound = a.name if a.asname else a.name.partition(".")[0]
                yield node.lineno, bound, [(None, a.asname or bound)]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            yield node.lineno, base, [(a.name, a.asname or a.name) for a in node.names]


def format_imports(source, module, is_package):
    """The 'line: target' of each import in `module` (of a format package) that names
    another format package."""
    own = module.split(".")[2]
    found = []
    for line, base, names in _imports(source, module, is_package):
        for target in [base] + [f"{base}.{name}" for name, _ in names if name]:
            parts = target.split(".")
            if parts[:2] == ["mnistconv", "formats"] and len(parts) > 2 and \
                    parts[2] in FORMATS and parts[2] != own:
                found.append(f"{line}: {target}")
                break
    return found


def private_names(source, module, is_package, modules):
    """The 'line: what' of each private name `module` takes from another module of
    `modules`: `from m import _x`, or `m._x` where m names a module of `modules`."""
    found, aliases = [], {}
    for line, base, names in _imports(source, module, is_package):
        for name, alias in names:
            if name is None:
                aliases[alias] = base
            elif f"{base}.{name}" in modules:
                aliases[alias] = f"{base}.{name}"
            elif base in modules and base != module and name.startswith("_") and \
                    not name.startswith("__"):
                found.append(f"{line}: from {base} import {name}")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                node.attr.startswith("_") and not node.attr.startswith("__") and \
                aliases.get(node.value.id) in modules and aliases[node.value.id] != module:
            found.append(f"{node.lineno}: {node.value.id}.{node.attr}")
    return found


def _sources():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, path.read_text(encoding="utf-8"), _module_name(path), \
            path.name == "__init__.py"


def test_no_format_package_imports_another():
    found = {}
    for path, source, module, is_package in _sources():
        parts = module.split(".")
        if parts[:2] == ["mnistconv", "formats"] and len(parts) > 2 and parts[2] in FORMATS:
            if hits := format_imports(source, module, is_package):
                found[module] = hits
    assert found == {}


def test_no_module_takes_another_modules_private_names():
    modules = {m for _, _, m, _ in _sources()}
    found = {}
    for path, source, module, is_package in _sources():
        if hits := private_names(source, module, is_package, modules):
            found[module] = hits
    assert found == {}



def test_formats_reach_staging_through_one_door():
    """Issue 39: formats and codecs take staged outputs from io.fileio (which re-exports
    io.staging), not from io.staging as well."""
    found = {module: line for _, source, module, is_package in _sources()
             if module.startswith(("mnistconv.formats", "mnistconv.codecs"))
             for line, base, _ in _imports(source, module, is_package)
             if base == "mnistconv.io.staging"}
    assert found == {}
    assert _imports("from ...io.staging import own_file_size", "mnistconv.formats.npz.format",
                    False).__next__()[1] == "mnistconv.io.staging"

# The layers of mnistconv/, lowest first (DESIGN.md's map): a module imports only from its
# own layer or one below. errors and limits are what every layer uses; the library's face
# (__init__: read, write, convert) stands on the rest, the command line on the face.
LAYERS = ("errors", "limits", "io", "workers", "model", "family", "codecs", "formats",
          "views", "describe", "runners", "loaders", "packs", "__init__", "cli", "__main__")
# Arrows that still run up: none (this set only shrinks).
KNOWN_UP: set = set()


def _layer(module):
    """The layer of a module, or of a name the face defines (mnistconv.detect)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else "__init__"


def upward_imports(source, module, is_package):
    """The 'line: layer -> layer' of each import in `module` that points up LAYERS."""
    found, own = [], _layer(module)
    for line, base, names in _imports(source, module, is_package):
        targets = [f"{base}.{name}" for name, _ in names if name] if base == "mnistconv" \
            else [base]
        for target in targets:
            if target.startswith("mnistconv.") and \
                    LAYERS.index(_layer(target)) > LAYERS.index(own):
                found.append(f"{line}: {own} -> {_layer(target)}")
    return found


def test_every_arrow_points_down_the_layers():
    assert {path.name if path.parent == PACKAGE else path.relative_to(PACKAGE).parts[0]
            for path in PACKAGE.iterdir() if not path.name.startswith(("_", ".")) or
            path.name in ("__init__.py", "__main__.py")} == \
        {"errors.py", "limits.py", "__init__.py", "__main__.py"} | \
        set(LAYERS[2:-1]) - {"__init__"}
    found = set()
    for path, source, module, is_package in _sources():
        for hit in upward_imports(source, module, is_package):
            found.add(f"{module} -> {hit.split(' -> ')[1]}")
    assert found == KNOWN_UP


def test_the_checks_see_what_they_refuse():
    source = ("from ..idx import classes\nfrom ...codecs import png\nfrom .. import npz\n"
              "def f():\n    from ..npz.format import read\n")
    assert format_imports(source, "mnistconv.formats.kmnist.format", False) == \
        ["1: mnistconv.formats.idx", "3: mnistconv.formats.npz",
         "5: mnistconv.formats.npz.format"]
    modules = {"mnistconv.codecs", "mnistconv.views.view", "mnistconv.formats.tfrecord.reader"}
    source = ("import os\nfrom .. import codecs\nfrom ..codecs import _pil, encode_png\n"
              "from ..formats.tfrecord import reader as r\n"
              "os._exit(0)\ncodecs._save(1)\nr._cast(2)\ncodecs.__name__\n")
    assert private_names(source, "mnistconv.views.view", False, modules) == \
        ["3: from mnistconv.codecs import _pil", "6: codecs._save", "7: r._cast"]
    source = "from ..formats import registry\ndef f():\n    from .. import cli, limits\n"
    assert upward_imports(source, "mnistconv.io.remote", False) == \
        ["1: io -> formats", "3: io -> cli"]
