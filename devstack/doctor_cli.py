"""`devstack doctor`: the command over devstack.doctor's report (see that module for what it checks).

    devstack doctor [--workspace W] [--backend-url URL] [--work-dir DIR] [--json | --quiet]

Exit status 0 only when everything the workspace declares is usable, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys

from devstack.command import add_output_options, add_stack_options
from devstack.doctor import examine, render
from devstack.errors import DevstackError
from tools.pulumi_env import ROOT


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("doctor", help="what works here: instances, credentials, kinds, toolchain",
                                   description=__doc__.splitlines()[0])
    add_stack_options(parser)
    add_output_options(parser, "doctor.schema.json")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    try:
        report = examine(args.workspace, args.backend_url, args.work_dir or ROOT)
    except DevstackError as err:
        print(err, file=sys.stderr)
        return err.exit_code
    if not args.quiet:
        print(json.dumps(report.to_json(), indent=2) if args.json else render(report))
    return 0 if report.ok else 1
