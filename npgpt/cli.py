"""The `npgpt` command (also `python -m npgpt`): one subcommand per module.

Each subcommand lives in its own module under npgpt/commands/, which defines HELP,
add_arguments(parser) and run(args) -> exit status; adding one is one line in COMMANDS.
"""

import argparse
import importlib
import sys

# subcommand name -> module that implements it (imported only when that subcommand runs)
COMMANDS = {
    "check": "npgpt.commands.check",
    "train": "npgpt.commands.train",
    "bench": "npgpt.commands.bench",
}


def build_parser():
    parser = argparse.ArgumentParser(
        prog="npgpt", description="GPT-2's building blocks in plain NumPy, every gradient by hand."
    )
    parser.add_argument("--version", action="version", version=f"npgpt {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, modname in COMMANDS.items():
        mod = importlib.import_module(modname)
        p = sub.add_parser(name, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def _version():
    from . import __version__

    return __version__


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        return args._run(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
