"""The package's shape (issue 13): no module over 600 lines, and no two modules that
import each other, directly or round a loop, counting the imports inside functions too
(a lazy import still ties the two modules together)."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "mnistconv"


def _module_name(path):
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph():
    """{module: the mnistconv modules its import statements name}."""
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name in files}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 \
                        else package
                    base = f"{anchor}.{base}" if base else anchor
                for alias in node.names:  # `from . import codecs` names a module
                    sub = f"{base}.{alias.name}"
                    found.add(sub if sub in files else base)
        graph[name] = {m for m in found if m in files} - {name}
    return files, graph


def _cycle(graph):
    done, path = set(), []

    def visit(module):
        if module in path:
            return path[path.index(module):] + [module]
        if module in done:
            return None
        path.append(module)
        for dep in sorted(graph[module]):
            found = visit(dep)
            if found:
                return found
        path.pop()
        done.add(module)
        return None
    for module in sorted(graph):
        found = visit(module)
        if found:
            return found
    return None


def test_no_import_cycle_between_modules():
    _, graph = _graph()
    assert "mnistconv.formats.idx.family" in graph["mnistconv.formats.idx.format"]
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def test_the_check_sees_a_lazy_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert _cycle(graph) == ["a", "b", "c", "a"]


def test_no_module_over_600_lines():
    files, _ = _graph()
    long = {name: n for name, path in files.items()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > 600}
    assert long == {}
