"""The ``sluiceway`` command: argv → Settings → run."""

from __future__ import annotations

import argparse
import logging
import os
import sys

# No telemetry from ONNX Runtime (it phones home on Linux unless told not to before loading).
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

from sluiceway import __version__
from sluiceway.config.loader import ConfigError, load_settings


def _serve(args: argparse.Namespace) -> int:
    try:
        settings = load_settings(
            args.config,
            overrides={"host": args.host, "port": args.port, "log_level": args.log_level},
        )
    except ConfigError as e:
        print(f"sluiceway: {e}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=settings.server.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    import uvloop

    from sluiceway.app import serve

    try:
        uvloop.run(serve(settings))
    except FileNotFoundError as e:
        print(f"sluiceway: {e}", file=sys.stderr)
        return 2
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sluiceway", description=__doc__)
    parser.add_argument("--version", action="version", version=f"sluiceway {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the gateway")
    serve.add_argument("--config", "-c", help="TOML config file (env: SLUICEWAY_CONFIG)")
    serve.add_argument("--host", help="listen address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="listen port (default 8000)")
    serve.add_argument("--log-level", choices=["debug", "info", "warning", "error"])
    serve.set_defaults(func=_serve)
    from sluiceway.bench.cli import register as register_bench
    from sluiceway.bench.simulated import register as register_simulate

    register_bench(sub)
    register_simulate(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
