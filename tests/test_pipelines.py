"""Pipelines as people write them (issue 28): --json reports on failure, --force over
an earlier output set, --list-outputs, --resume on a complete output, and compare
saying why two datasets differ."""

import json
import subprocess

import pytest

from conftest import SAMPLE, make_idx_dir, run, run_main, small_digits, stderr_of


def _commands_taking_json():
    """Every command of the CLI with a --json option, and one a-to-b command."""
    import click
    from mnistconv.cli import COMMANDS, cli
    ctx = click.Context(cli)
    names = list(COMMANDS) + ["idx-to-npz"]
    found = []
    for name in names:
        command = cli.get_command(ctx, name)
        for sub in (command.commands.values() if isinstance(command, click.Group)
                    else [command]):
            if any("--json" in p.opts for p in sub.params):
                found.append([name] + ([sub.name] if sub is not command else []))
    return found


def test_every_command_taking_json_reports_a_usage_error_as_json(capsys):
    commands = _commands_taking_json()
    assert {"convert", "info", "compare", "formats", "idx-to-npz"} <= \
        {c[0] for c in commands}
    for command in commands:
        code, out, err = run_main(capsys, *command, "--zzz", "--json")
        assert code == 2, command
        assert json.loads(out) == {"error": "No such option '--zzz'.",
                                   "exit": 2}, command
        assert "Error: No such option '--zzz'." in err


@pytest.mark.parametrize("args, code, error", [
    (["info", "{tmp}/missing"], 2, "{tmp}/missing: no such file or directory"),
    (["convert", "{tmp}/bad", "{tmp}/out.npz"], 1, None),
    (["compare", str(SAMPLE), "{tmp}/bad"], 1, None),
])
def test_a_failing_run_with_json_prints_one_object_and_keeps_its_exit_code(
        tmp_path, args, code, error):
    (tmp_path / "bad").write_bytes(b"\0\0\x08\x03" + b"\0\0\0\x09" * 3)  # truncated IDX
    args = [a.format(tmp=tmp_path) for a in args]
    r = run(*args, "--json", "-q") if args[0] != "info" else run(*args, "--json")
    assert r.returncode == code
    report = json.loads(r.stdout)  # one object, nothing else
    line = stderr_of(r).strip()
    assert line.startswith("Error: ") and "\n" not in line
    assert report["error"] == line[len("Error: "):]
    assert report["exit"] == code
    if error is not None:
        assert report["error"] == error.format(tmp=tmp_path)
    assert report["file"].startswith(str(tmp_path))
    assert not (tmp_path / "out.npz").exists()
