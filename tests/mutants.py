"""A sample of realistic bugs, planted one at a time, to see that the tests catch them.

    python tests/mutants.py                 # every mutant, against `make check`'s tests
    python tests/mutants.py card-escape     # one, by name
    python tests/mutants.py --list
    python tests/mutants.py --suite all     # against the whole suite (slow)

Each mutant replaces one exact piece of source text (it must occur exactly once, so a
refactor that moves the code makes the mutant fail loudly instead of testing nothing),
runs the tests named for it first (quick feedback), then the chosen suite, and restores
the file whatever happens. A mutant is *killed* when the suite fails. The sample and how
to add to it: docs/development.md, "Planting a bug".
"""

import argparse
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CHECK_MARKS = "not process and not client and not slow"


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str  # under mnistconv/
    old: str
    new: str
    tests: tuple  # the tests expected to catch it, run first


SAMPLE = (
    # Issue 40's five, and the five safety rules pinned only by process tests before.
    Mutant("card-escape", "card_html.py",
           "return html.escape(str(text), quote=True)", "return str(text)",
           ("tests/test_planted_bugs.py",)),
    Mutant("index-offset-after-first-chunk", "formats/tfrecord/index_files.py",
           "self.offset = starts[-1]", "self.offset = starts[-1] - sizes[-1] * (len(sizes) > 1)",
           ("tests/test_planted_bugs.py",)),
    Mutant("staged-follows-links", "staging.py",
           "flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666", "flags | os.O_CLOEXEC, 0o666",
           ("tests/test_planted_bugs.py",)),
    Mutant("json-signal-number", "cli/__init__.py",
           '"interrupted" if interrupted else "terminated", 128 + signum)',
           '"interrupted" if interrupted else "terminated", signum)',
           ("tests/test_planted_bugs.py",)),
    Mutant("onehot-width-from-labels", "formats/tfrecord/writer.py",
           "num_classes = split.num_classes()",
           "num_classes = max(10, int(split.labels().max()) + 1)",
           ("tests/test_planted_bugs.py",)),
    Mutant("fifo-blocks", "fileio.py",
           "flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC",
           "flags = os.O_RDONLY | os.O_NOCTTY | os.O_CLOEXEC",
           ("tests/test_safety_inner_loop.py",)),
    Mutant("budget-ratio", "budget.py",
           "return int(stored_bytes) * MAX_RATIO + SLACK_BYTES",
           "return int(stored_bytes) * MAX_RATIO * 2 + SLACK_BYTES",
           ("tests/test_safety_inner_loop.py",)),
    Mutant("jpeg-hint-tolerance", "compare.py",
           'f"pass --tolerance {worst}, or convert with --image-format png")',
           'f"pass --tolerance {worst - 1}, or convert with --image-format png")',
           ("tests/test_safety_inner_loop.py",)),
    Mutant("serve-host-check", "serve.py",
           'if self.headers.get("Host", "").lower() not in allowed:',
           'if self.headers.get("Host", "").lower().split(":")[0] not in '
           '{n.split(":")[0] for n in allowed} | {"evil.example"}:',
           ("tests/test_safety_inner_loop.py",)),
    Mutant("jpeg-error-merge", "contract.py",
           "setattr(self, f.name, max(mine, theirs) if f.name in self.MAXED",
           "setattr(self, f.name, theirs if f.name in self.MAXED",
           ("tests/test_safety_inner_loop.py",)),
)


def _pytest(args, marks):
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *args]
    if marks:
        cmd += ["-m", marks]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)


def run(mutant, suite):
    path = REPO / "mnistconv" / mutant.path
    source = path.read_text()
    if source.count(mutant.old) != 1:
        return "stale", f"the text to replace occurs {source.count(mutant.old)} times"
    path.write_text(source.replace(mutant.old, mutant.new))
    marks = CHECK_MARKS if suite == "check" else None
    try:
        # The named tests under the suite's marks: a kill by a process test there is not
        # a kill by `make check`.
        first = _pytest(list(mutant.tests), marks)
        if first.returncode not in (0, 1, 5):  # 5: every named test deselected
            return "error", first.stdout[-2000:] + first.stderr[-2000:]
        if first.returncode == 1:
            return "killed (named tests)", _failures(first.stdout)
        whole = _pytest(["-n", "2", "tests"], marks)
        if whole.returncode == 1:
            return "killed (suite)", _failures(whole.stdout)
        return "survived", ""
    finally:
        path.write_text(source)


def _failures(out):
    return " ".join(line.split(" ", 1)[1] for line in out.splitlines()
                    if line.startswith("FAILED "))[:300]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*")
    parser.add_argument("--suite", choices=["check", "all"], default="check")
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args()
    chosen = [m for m in SAMPLE if not args.names or m.name in args.names]
    if args.list:
        print("\n".join(f"{m.name}: mnistconv/{m.path}" for m in chosen))
        return 0
    killed = 0
    for m in chosen:
        start = time.monotonic()
        outcome, detail = run(m, args.suite)
        killed += outcome.startswith("killed")
        print(f"{m.name:32} {outcome:22} {time.monotonic() - start:6.1f}s  {detail}",
              flush=True)
    print(f"killed {killed} of {len(chosen)}")
    return 0 if killed == len(chosen) else 1


if __name__ == "__main__":
    sys.exit(main())
