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
    Mutant("card-escape", "describe/card_html.py",
           "return html.escape(str(text), quote=True)", "return str(text)",
           ("tests/test_planted_bugs.py",)),
    Mutant("index-offset-after-first-chunk", "formats/tfrecord/index_files.py",
           "self.offset = starts[-1]", "self.offset = starts[-1] - sizes[-1] * (len(sizes) > 1)",
           ("tests/test_planted_bugs.py",)),
    Mutant("staged-follows-links", "io/staging.py",
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
    Mutant("fifo-blocks", "io/fileio.py",
           "flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC",
           "flags = os.O_RDONLY | os.O_NOCTTY | os.O_CLOEXEC",
           ("tests/test_safety_inner_loop.py",)),
    Mutant("budget-ratio", "io/budget.py",
           "return int(stored_bytes) * MAX_RATIO + SLACK_BYTES",
           "return int(stored_bytes) * MAX_RATIO * 2 + SLACK_BYTES",
           ("tests/test_safety_inner_loop.py",)),
    Mutant("jpeg-hint-tolerance", "views/compare.py",
           'f"pass --tolerance {worst}, or convert with --image-format png")',
           'f"pass --tolerance {worst - 1}, or convert with --image-format png")',
           ("tests/test_safety_inner_loop.py",)),
    Mutant("serve-host-check", "views/serve.py",
           'if self.headers.get("Host", "").lower() not in allowed:',
           'if self.headers.get("Host", "").lower().split(":")[0] not in '
           '{n.split(":")[0] for n in allowed} | {"evil.example"}:',
           ("tests/test_safety_inner_loop.py",)),
    Mutant("jpeg-error-merge", "formats/contract.py",
           "setattr(self, f.name, max(mine, theirs) if f.name in self.MAXED",
           "setattr(self, f.name, theirs if f.name in self.MAXED",
           ("tests/test_safety_inner_loop.py",)),
    # Issue 35: every byte through the guard, secrets, a resume that checks, serve's deadline.
    Mutant("redact-only-as-written", "errors.py",
           "secrets | {unquote(s) for s in secrets}", "secrets",
           ("tests/test_secrets.py",)),
    Mutant("follow-links-leaks-past-its-block", "io/fileio.py",
           "        if added:\n            _FOLLOWED.discard(os.sep)",
           "        if not added:\n            _FOLLOWED.discard(os.sep)",
           ("tests/test_follow_links.py", "tests/test_rules_in_process.py",)),
    Mutant("resume-hashes-one-image-a-batch", "runners/plan.py",
           "digest.update(images.reshape(-1).view(np.uint8).data)",
           "digest.update(images[:1].reshape(-1).view(np.uint8).data)",
           ("tests/test_plan_locations.py", "tests/test_rules_in_process.py",)),
    Mutant("serve-deadline-in-milliseconds", "views/serve.py",
           "threading.Timer(REQUEST_DEADLINE, _cut", "threading.Timer(REQUEST_DEADLINE * 1000, _cut",
           ("tests/test_serve.py",)),
    Mutant("journal-step-beside-its-folder", "io/journal.py",
           "if any(not p.startswith(folder + os.sep) for p in paths):",
           "if any(not p.startswith(folder) for p in paths):",
           ("tests/test_commit_journal.py", "tests/test_rules_in_process.py")),
    Mutant("record-cap-one-byte-a-pixel", "io/budget.py",
           "limits.MAX_IMAGE_PIXELS * 4 + RECORD_SLACK",
           "limits.MAX_IMAGE_PIXELS + RECORD_SLACK",
           ("tests/test_memory_made.py", "tests/test_safety_tfrecord.py",
            "tests/test_rules_in_process.py")),
    # Issue 36: the schema, the door, --max-image-size per pixel, --grayscale.
    Mutant("classes-floor-of-ten", "model/schema.py",
           "return len(self.names) or self.width or None",
           "return max(len(self.names) or self.width or 0, 10)",
           ("tests/test_schema.py",)),
    Mutant("door-max-classes-off-by-one", "formats/contract.py",
           "if holds.max_classes and (target.classes or 0) > holds.max_classes:",
           "if holds.max_classes and (target.classes or 0) >= holds.max_classes:",
           ("tests/test_schema.py", "tests/test_rules_in_process.py",)),
    Mutant("max-image-size-counts-channels", "limits.py",
           "        return int(shape[0]) * int(shape[1])\n",
           "        return math.prod(int(d) for d in shape)\n",
           ("tests/test_schema.py",)),
    Mutant("grayscale-truncates", "codecs/__init__.py",
           "    total += 0x8000\n", "",
           ("tests/test_channels.py", "tests/test_rules_in_process.py",)),
    # Issue 37: the colour readers' checks.
    Mutant("cifar-python-label-limit-off-by-one", "formats/cifar_python/format.py",
           "if not 0 <= v < limit), None)", "if not 0 <= v <= limit), None)",
           ("tests/test_cifar_python.py", "tests/test_rules_in_process.py",)),
    Mutant("svhn-label-zero-accepted", "formats/svhn/format.py",
           "bad = ~np.isin(raw, np.arange(1, 11))", "bad = ~np.isin(raw, np.arange(0, 11))",
           ("tests/test_svhn.py", "tests/test_rules_in_process.py",)),
    Mutant("svhn-ten-kept-as-ten", "formats/svhn/format.py",
           "labels[labels == DIGIT_ZERO] = 0", "labels[labels == DIGIT_ZERO] = DIGIT_ZERO",
           ("tests/test_svhn.py",)),
    Mutant("svhn-compressed-element-unbudgeted", "formats/svhn/format.py",
           "if kind == MI_COMPRESSED and getattr(var, \"storage\", None) is not None:",
           "if kind == MI_COMPRESSED and getattr(var, \"storage\", None) is None:",
           ("tests/test_svhn.py",)),
    Mutant("medmnist-multilabel-unchecked", "formats/medmnist/format.py",
           "if self.multi_label and len(labels) and labels.max() > 1:",
           "if self.multi_label and len(labels) and labels.min() < 0:",
           ("tests/test_medmnist.py",)),
    # Issue 38: facts proven by checksums, copies by content, --force replacing the set.
    Mutant("one-published-file-proves-the-set", "family/provenance.py",
           "    if len(names) != 1 or None in names:",
           "    names.discard(None)\n    if len(names) != 1:",
           ("tests/test_identity.py",)),
    Mutant("recompressed-copy-read-as-raw", "family/checks.py",
           'compressed = f.read(2) == b"\\x1f\\x8b"', 'compressed = f.read(2) == b"\\x8b\\x1f"',
           ("tests/test_download.py",)),
    Mutant("force-keeps-old-side-files", "io/shards.py",
           "        core = next((entry[:-len(s)] for s in side_suffixes\n"
           "                     if entry.endswith(s) and len(entry) > len(s)), entry)",
           "        core = entry",
           ("tests/test_force_replaces_set.py", "tests/test_rules_in_process.py",)),
    # Issue 39: one size parser.
    Mutant("mb-counts-mebibytes", "limits.py",
           '"mb": 10 ** 6,', '"mb": 1 << 20,', ("tests/test_sizes.py",)),
    Mutant("size-fraction-scale", "limits.py",
           "int(fraction or 0) * unit // 10 ** len(fraction)",
           "int(fraction or 0) * unit // 10", ("tests/test_sizes.py", "tests/test_rules_in_process.py",)),
    Mutant("bare-unit-taken", "limits.py",
           r'([kmgt]i?b|b)")', r'([kmgt]i?b?|b)")', ("tests/test_sizes.py",)),
    Mutant("size-top-of-range-refused", "limits.py",
           "if size is None or not low <= size <= high:",
           "if size is None or not low <= size < high:", ("tests/test_sizes.py",)),
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
