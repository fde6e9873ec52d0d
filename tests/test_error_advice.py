"""Every error line says what to do: `Error: <file>: <what is wrong>; <what to do>`
(the rule is in mnistconv/errors.py's docstring).

Three checks: every error the fuzz corpus gives, as the command line prints it; every
kind of error (a kind's own advice says what to do); and every place in mnistconv/ that
makes an error, walked in its syntax tree: it gives a hint, or raises a kind that has
advice (an error without advice fails here, naming its line)."""

import ast
import json
import re

import pytest

import mnistconv.errors as errors
from mnistconv.cli import main
from helpers import REPO

CORPUS = REPO / "tests" / "fuzz" / "corpus"
# `<file>: <what is wrong>; <what to do>`, the file as given, each part non-empty.
FORM = re.compile(r"^Error: (?P<file>[^;]+?): (?P<what>.+?); (?P<do>\S.*)$")


def _corpus_errors():
    for fmt_dir in sorted(p for p in CORPUS.iterdir() if p.is_dir()):
        expected = json.loads((fmt_dir / "expected.json").read_text())
        for name, outcome in sorted(expected.items()):
            if "error" in outcome:
                yield pytest.param(fmt_dir.name, fmt_dir / name, id=f"{fmt_dir.name}/{name}")


@pytest.mark.parametrize("fmt, case", list(_corpus_errors()))
def test_every_corpus_error_line_names_the_file_and_says_what_to_do(fmt, case, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["info", str(case), "--from", fmt])
    assert exit_info.value.code in (1, 2)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    m = FORM.match(lines[0])
    assert m, lines[0]
    assert m["file"].startswith(str(case)), lines[0]


def _kinds():
    """Every MnistconvError kind the package defines (imported modules included)."""
    import importlib
    import pkgutil
    import mnistconv
    for info in pkgutil.walk_packages(mnistconv.__path__, "mnistconv."):
        if not info.name.endswith("__main__"):
            try:
                importlib.import_module(info.name)
            except ImportError:  # an optional dependency's module
                pass
    found, todo = set(), [errors.MnistconvError]
    while todo:
        kind = todo.pop()
        for sub in kind.__subclasses__():
            # Not a class a test made (one refused by __init_subclass__ stays listed
            # until the garbage collector runs).
            if sub not in found and sub.__module__.startswith("mnistconv"):
                found.add(sub)
                todo.append(sub)
    return found


def test_a_kind_with_advice_gives_it_to_every_error_without_a_hint():
    for kind in (errors.CorruptData, errors.Truncated, errors.WrongFormat, errors.BadImage,
                 errors.OverLimit, errors.NotFound, errors.NoAccess, errors.NoSplits,
                 errors.InTheWay, errors.BadOption, errors.CannotWrite):
        e = kind("data/x", "something is wrong")
        assert str(e) == f"data/x: something is wrong; {kind.advice}"
        assert e.cli_message() == f"data/x: something is wrong; {kind.cli_advice or kind.advice}"
        # A hint given says it instead, to the library and the command line alike.
        assert str(kind("x", "bad", "do this")) == "x: bad; do this"
        assert kind("x", "bad", "do this").cli_message() == "x: bad; do this"
    assert issubclass(errors.CorruptData, errors.FormatError)
    assert errors.Truncated.exit_code == errors.WrongFormat.exit_code == 1
    assert errors.BadOption.exit_code == errors.CannotWrite.exit_code == 2
    # The library says pass format=, the command line --from.
    e = errors.WrongFormat("x.bin", "not an IDX file")
    assert str(e) == "x.bin: not an IDX file; check the path, or pass format= to read it " \
                     "as another format"
    assert e.cli_message() == "x.bin: not an IDX file; check the path, or name its format " \
                              "with --from"
    # A kind must not set an empty advice.
    with pytest.raises(TypeError, match="advice must say what to do"):
        type("Silent", (errors.FormatError,), {"advice": " "})
    for kind in _kinds():
        assert kind.advice is None or kind.advice.strip(), kind


def _advised_kinds():
    """Names of the kinds whose errors always carry advice: a kind with its own advice,
    or one whose __init__ composes the whole message (MissingDependency)."""
    return {k.__name__ for k in _kinds() | {errors.MnistconvError}
            if k.advice or "__init__" in vars(k) and k is not errors.MnistconvError}


def _unadvised_sites():
    """{file: [line, ...]} of every call of an error kind by name without a hint."""
    kinds = {k.__name__ for k in _kinds() | {errors.MnistconvError}}
    advised = _advised_kinds()
    sites = {}
    for path in sorted((REPO / "mnistconv").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in kinds) or node.func.id in advised:
                continue
            hinted = len(node.args) >= 3 or any(isinstance(a, ast.Starred)
                                                 for a in node.args) \
                or any(k.arg in ("hint", "cli_hint") for k in node.keywords)
            if not hinted:
                sites.setdefault(path.relative_to(REPO).as_posix(), []).append(node.lineno)
    return sites


def test_every_error_made_in_mnistconv_has_advice():
    sites = _unadvised_sites()
    assert not sites, (
        "errors without advice (give a hint=, or raise a kind with advice, as "
        "mnistconv/errors.py says): " + "; ".join(
            f"{f} lines {', '.join(map(str, lines))}" for f, lines in sites.items()))


def test_the_walk_finds_an_error_without_advice(tmp_path, monkeypatch):
    # The walk itself: a raise without a hint is found, one with a hint or an advised
    # kind is not.
    code = ("from mnistconv.errors import FormatError, CorruptData\n"
            "def f(p):\n"
            "    raise FormatError(p, 'bad')\n"
            "def g(p):\n"
            "    raise FormatError(p, 'bad', 'do this')\n"
            "def h(p):\n"
            "    raise CorruptData(p, 'bad')\n")
    fake = tmp_path / "mnistconv"
    fake.mkdir()
    (fake / "m.py").write_text(code)
    monkeypatch.setitem(globals(), "REPO", tmp_path)
    assert _unadvised_sites() == {"mnistconv/m.py": [3]}
