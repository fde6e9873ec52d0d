"""Every public module, class, function and method of the package says what it is for
(a method that overrides a documented one inherits its docstring, as help() shows)."""

import importlib
import inspect
import pkgutil

import mnistconv


def _modules():
    yield mnistconv  # the package itself: read(), write(), convert(), formats()
    for info in pkgutil.walk_packages(mnistconv.__path__, "mnistconv."):
        if not info.name.endswith("__main__"):  # importing it runs the program
            yield importlib.import_module(info.name)


def test_every_public_name_has_a_docstring():
    missing = []
    for module in _modules():
        if not inspect.getdoc(module):
            missing.append(module.__name__)
        for name, obj in vars(module).items():
            if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
                continue
            if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            doc = inspect.getdoc(obj)
            # A dataclass without a docstring gets its signature as one: not a docstring.
            if not doc or (inspect.isclass(obj) and doc.startswith(f"{name}(")):
                missing.append(f"{module.__name__}.{name}")
            if inspect.isclass(obj):
                for attr, member in vars(obj).items():
                    if attr.startswith("_") or not inspect.isfunction(member):
                        continue
                    if not inspect.getdoc(getattr(obj, attr)):
                        missing.append(f"{module.__name__}.{name}.{attr}")
    assert missing == []
