"""The `devstack` console script: its parser, every verb's output options, and how it ends."""

from __future__ import annotations

import pytest

from devstack.errors import InvalidQuery


def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path):
    """`devstack ... | head`: no BrokenPipeError traceback, and the shell's status for SIGPIPE (141)."""
    import subprocess
    import sys
    import textwrap

    script = tmp_path / "many_rows.py"
    script.write_text(textwrap.dedent("""
        import sys
        from types import SimpleNamespace

        from devstack import cli

        rows = SimpleNamespace(func=lambda args: [print("row " * 100) for _ in range(100_000)])
        cli.parser = lambda: SimpleNamespace(parse_args=lambda argv: rows)
        sys.exit(cli.main([]))
    """))
    done = subprocess.run(["bash", "-o", "pipefail", "-c", f"{sys.executable} {script} | head -1"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert done.stdout.startswith("row") and "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 141


def test_a_work_dir_that_does_not_exist_is_bad_input(tmp_path, capsys):
    from devstack import cli

    missing = tmp_path / "no-such-checkout"
    assert cli.main(["resource", "list", "--work-dir", str(missing)]) == InvalidQuery.exit_code
    err = capsys.readouterr().err
    assert f"the work dir {missing} is not a directory" in err and "Traceback" not in err
    assert not missing.exists()  # nothing was made there
    import subprocess
    import sys

    as_module = subprocess.run([sys.executable, "-m", "devstack", "resource", "list", "--work-dir", str(missing)],
                               capture_output=True, text=True, timeout=60)
    assert as_module.returncode == InvalidQuery.exit_code and f"the work dir {missing}" in as_module.stderr


#: Every verb, with the arguments it requires.
VERBS = [
    ["resource", "create", "postgres", "database"], ["resource", "list"], ["resource", "show", "x"],
    ["resource", "rm", "x"], ["resource", "gc"], ["db", "create"], ["db", "rm"], ["db", "gc"], ["s3", "mb"],
    ["s3", "rb"], ["queue", "add"], ["queue", "rm"], ["topic", "add"], ["topic", "rm"], ["stream", "add"],
    ["stream", "rm"], ["workspace", "destroy"], ["destroy"], ["env", "p", "s"], ["doctor"], ["recover"],
]


@pytest.mark.parametrize("argv", VERBS, ids=" ".join)
def test_every_verb_takes_json_or_quiet(argv):
    from devstack import cli

    parser = cli.parser()
    for flag in ("--json", "--quiet"):
        assert getattr(parser.parse_args([*argv, flag]), flag[2:]) is True
    with pytest.raises(SystemExit):  # one or the other
        parser.parse_args([*argv, "--json", "--quiet"])


def test_db_gc_is_resource_gc_of_postgres():
    from devstack import cli, ledger_cli

    args = cli.parser().parse_args(["db", "gc", "--prune", "--include-retained", "-p", "shop"])
    assert (args.func, args.engine, args.project, args.prune, args.include_retained) == (
        ledger_cli.run_gc, "postgres", "shop", True, True)
