"""The marks `make check` leaves out, found from what each test's code refers to, so a
new test is marked without anyone remembering to:

- process: it starts a process (subprocess, pty, os.fork/system/exec, multiprocessing),
  itself or through a helper or fixture defined under tests/;
- client: it imports a client that takes seconds to load (TensorFlow, torch, datasets,
  Beam, webdataset, moto, ...), at the top of its file, in its body or through a helper.

`slow` is written by hand on the tests it names (pytest.mark.slow).
"""

import ast
import dis
import functools
import sys
import types
from pathlib import Path

TESTS = Path(__file__).resolve().parent

# Importing any of these takes seconds (TensorFlow tens of seconds on a busy machine).
HEAVY = frozenset({"tensorflow", "tensorflow_datasets", "torch", "torchvision", "datasets",
                   "apache_beam", "grain", "webdataset", "moto", "s3fs",
                   "medmnist"})
# mnistconv's own modules that import one of them when first used.
HEAVY_OWN = frozenset({"mnistconv.loaders.tf", "mnistconv.loaders.torch",
                       "mnistconv.loaders.grain", "mnistconv.tf", "mnistconv.torch",
                       "mnistconv.grain", "mnistconv.runners.beam"})
PROCESS_MODULES = frozenset({"subprocess", "pty", "multiprocessing"})
PROCESS_OS = frozenset({"fork", "forkpty", "system", "popen", "posix_spawn",
                        "posix_spawnp", "execv", "execve", "execvp", "execvpe", "execl",
                        "execlp", "execle", "spawnv", "spawnve", "spawnl"})


@functools.lru_cache(maxsize=None)
def _heavy_name(name) -> bool:
    return name.split(".")[0] in HEAVY or name in HEAVY_OWN or \
        any(name.startswith(own + ".") for own in HEAVY_OWN)


def _ours(obj) -> bool:
    """obj is a function defined in a file under tests/."""
    code = getattr(obj, "__code__", None)
    return code is not None and _under_tests(code.co_filename)


class Classifier:
    """{"process", "client"} features of functions, memoized by code object."""

    def __init__(self):
        self._seen = {}

    def of_function(self, func) -> frozenset:
        func = getattr(func, "__func__", func)
        code = getattr(func, "__code__", None)
        if code is None:
            return frozenset()
        return self._of_code(code, getattr(func, "__globals__", {}))

    def of_object(self, obj) -> frozenset:
        """Features of a global a test refers to."""
        if isinstance(obj, types.ModuleType):
            name = obj.__name__
            if name.split(".")[0] in PROCESS_MODULES:
                return frozenset({"process"})
            return frozenset({"client"}) if _heavy_name(name) else frozenset()
        if _ours(obj):
            return self.of_function(obj)
        if isinstance(obj, type) and obj.__module__ in sys.modules and \
                _ours_module(sys.modules[obj.__module__]):
            found = set()
            for member in vars(obj).values():
                found |= self.of_function(getattr(member, "__func__", member)) \
                    if _ours(getattr(member, "__func__", member)) else set()
            return frozenset(found)
        return frozenset()

    def _of_code(self, code, globals_) -> frozenset:
        if code in self._seen:
            return self._seen[code]
        self._seen[code] = frozenset()  # a cycle adds nothing
        found = set()
        previous, importing = None, ""
        importorskip = "importorskip" in code.co_names
        for ins in dis.get_instructions(code):
            if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
                name = ins.argval
                previous = globals_.get(name, None)
                if previous is not None:
                    found |= self.of_object(previous)
                continue
            if ins.opname in ("LOAD_ATTR", "LOAD_METHOD") and \
                    isinstance(previous, types.ModuleType):
                full = f"{previous.__name__}.{ins.argval}"
                if previous.__name__ == "os" and ins.argval in PROCESS_OS:
                    found.add("process")
                elif full in HEAVY_OWN:  # mnistconv.loaders.torch and the like
                    found.add("client")
                elif _ours_module(previous):  # helpers.run_cli, peak.cli and the like
                    found |= self.of_object(getattr(previous, ins.argval, None))
            elif ins.opname == "IMPORT_NAME":
                importing = ins.argval
                if importing.split(".")[0] in PROCESS_MODULES:
                    found.add("process")
                elif _heavy_name(importing):
                    found.add("client")
            elif ins.opname == "IMPORT_FROM" and _heavy_name(f"{importing}.{ins.argval}"):
                found.add("client")
            elif ins.opname == "LOAD_CONST" and importorskip and \
                    isinstance(ins.argval, str) and _heavy_name(ins.argval):
                found.add("client")
            previous = None
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                found |= self._of_code(const, globals_)
        self._seen[code] = frozenset(found)
        return self._seen[code]


def _ours_module(module) -> bool:
    return _under_tests(getattr(module, "__file__", None))


@functools.lru_cache(maxsize=None)
def _under_tests(path) -> bool:
    """path is a file under tests/ (cached: resolving it was most of collection's
    marking, tens of thousands of times)."""
    return bool(path) and Path(path).resolve().is_relative_to(TESTS)


@functools.lru_cache(maxsize=None)
def imports_heavy_at_top(path) -> bool:
    """The file imports a heavy client when it is collected (a top-level import or
    pytest.importorskip): collecting it alone costs the client's import."""
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return False
    for node in tree.body:
        if isinstance(node, ast.Import) and any(_heavy_name(a.name) for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and (
                _heavy_name(node.module) or
                any(_heavy_name(f"{node.module}.{a.name}") for a in node.names)):
            return True
        for call in ast.walk(node) if isinstance(node, (ast.Assign, ast.Expr)) else ():
            if isinstance(call, ast.Call) and getattr(call.func, "attr", None) == \
                    "importorskip" and call.args and \
                    isinstance(call.args[0], ast.Constant) and \
                    isinstance(call.args[0].value, str) and _heavy_name(call.args[0].value):
                return True
    return False


def features(item, classifier) -> set:
    """The features of one collected test: its function's, its fixtures' (those
    defined under tests/) and its parameters' (helpers passed as parameters)."""
    found = set(classifier.of_function(getattr(item, "obj", None)))
    info = getattr(item, "_fixtureinfo", None)
    for name in getattr(item, "fixturenames", ()):
        for fixturedef in (info.name2fixturedefs.get(name, ()) if info else ()):
            func = getattr(fixturedef, "func", None)
            if _ours(func):
                found |= classifier.of_function(func)
    callspec = getattr(item, "callspec", None)
    for value in (callspec.params.values() if callspec else ()):
        if _ours(value):
            found |= classifier.of_function(value)
    module = getattr(item, "module", None)
    if module is not None and getattr(module, "__file__", None) and \
            imports_heavy_at_top(str(module.__file__)):
        found.add("client")
    return found
