"""Command line: start, stop, report or reset the local shared engines.

    python -m tools.engines start  [ENGINE ...]   # no names = all, in registry order
    python -m tools.engines start --tls [ENGINE ...]  # serve TLS only, from a CA made here (tools/engines/tls.py)
    python -m tools.engines stop   [ENGINE ...]   # reverse registry order
    python -m tools.engines status [ENGINE ...]
    python -m tools.engines reset  ENGINE ...     # delete that engine's data dir (stopped only)
    python -m tools.engines install [ENGINE ...]  # fetch/build binaries (Kafka jars, MinIO); skipped when present

Exit status: 0 when every requested engine did what was asked, 1 when any
failed (the others are still handled), 2 when admin credentials are unavailable.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping

from tools.engines import ENGINES, load
from tools.engines.base import Credential, Engine, EngineError, tls_dir

CredentialSource = Callable[[], Mapping[str, Credential]]


def main(argv: list[str] | None = None, credentials: CredentialSource | None = None) -> int:
    """Run one command over the selected engines; see the module docstring.

    `credentials` replaces tools.engines.credentials.admin_credentials (tests
    pass fixed ones); it is only called for `start`.
    """
    parser = _parser()
    args = parser.parse_intermixed_args(argv)  # `start --tls nats`: a flag before the names
    unknown = sorted(set(args.engines) - set(ENGINES))
    if unknown:
        parser.error(f"unknown engine(s) {', '.join(unknown)}; known: {', '.join(ENGINES)}")
    names = [name for name in ENGINES if name in args.engines] if args.engines else list(ENGINES)
    if args.command == "reset" and not args.engines:
        print("reset needs explicit engine names: it deletes their data", file=sys.stderr)
        return 2
    if args.command == "stop":
        names.reverse()
    creds: Mapping[str, Credential] = {}
    if args.command == "start":
        try:
            creds = (credentials or _admin_credentials)()
        except Exception as exc:  # whatever the stack config lookup raises, say so and stop
            print(f"cannot read the engines' admin credentials: {exc}", file=sys.stderr)
            return 2
    if args.tls and args.command != "start":
        parser.error("--tls goes with start")
    if args.tls:
        from tools.engines.tls import ensure_tls_files

        ensure_tls_files()
    results = [_run_one(args.command, name, creds.get(name), args.tls) for name in names]
    if args.tls and any(results):
        print(f"TLS: clients trust {tls_dir() / 'ca.pem'}; give each instance `tls: {{caFile: <that path>}}` "
              "in the stack config (docs/engines.md)")
    return 0 if all(results) else 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tools.engines", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["start", "stop", "status", "reset", "install"])
    parser.add_argument("engines", nargs="*", metavar="ENGINE",
                        help=f"any of: {', '.join(ENGINES)} (default: all)")
    parser.add_argument("--tls", action="store_true",
                        help="start: serve TLS only, with certificates from a CA made under the engines dir")
    return parser


def _run_one(command: str, name: str, credential: Credential | None, tls: bool = False) -> bool:
    """Run one verb on one engine, print its outcome; False on failure."""
    try:
        engine = load(name)
    except Exception as exc:  # a broken engine module must not take the others down
        print(f"{name:<10} unavailable: cannot load tools.engines.{ENGINES[name]}: {exc!r}",
              file=sys.stdout if command == "status" else sys.stderr)
        return False
    try:
        print(_verb(command, engine, credential, tls), flush=True)
        return True
    except EngineError as exc:
        print(exc, file=sys.stderr, flush=True)
    except Exception as exc:  # unexpected: still name the engine, address and log
        print(engine.error(command, f"{type(exc).__name__}: {exc}"), file=sys.stderr, flush=True)
    return False


def _verb(command: str, engine: Engine, credential: Credential | None, tls: bool) -> str:
    if command == "start":
        return engine.start(credential, tls)
    if command == "stop":
        return engine.stop()
    if command == "reset":
        return engine.reset()
    if command == "install":
        install = getattr(engine, "install", None)
        return install() if install else f"{engine.name}: nothing to install (Debian or PyPI package)"
    return engine.status().line()


def _admin_credentials() -> Mapping[str, Credential]:
    """The lead's stack-config-backed credentials, imported only when starting."""
    from tools.engines.credentials import admin_credentials

    return admin_credentials()


if __name__ == "__main__":
    sys.exit(main())
