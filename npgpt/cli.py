"""The `npgpt` command (also `python -m npgpt`): one subcommand per module.

Each subcommand lives in its own module under npgpt/commands/, which defines HELP,
add_arguments(parser) and run(args) -> exit status; adding one is one line in COMMANDS.
"""

import argparse
import importlib
import os
import sys

# subcommand name -> module that implements it (imported only when that subcommand runs)
COMMANDS = {
    "check": "npgpt.commands.check",
    "grade": "npgpt.commands.grade",
    "assignment": "npgpt.commands.assignment",
    "explain": "npgpt.commands.explain",
    "docs": "npgpt.commands.docs",
    "train": "npgpt.commands.train",
    "generate": "npgpt.commands.generate",
    "bench": "npgpt.commands.bench",
}


def build_parser(argv=None):
    """The argument parser. Only the chosen subcommand's module is imported, so one
    subcommand's optional dependencies never stand in another's way."""
    argv = sys.argv[1:] if argv is None else argv
    chosen = next((a for a in argv if not a.startswith("-")), None)
    parser = argparse.ArgumentParser(
        prog="npgpt", description="GPT-2's building blocks in plain NumPy, every gradient by hand."
    )
    parser.add_argument("--version", action="version", version=f"npgpt {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, modname in COMMANDS.items():
        if chosen in COMMANDS and name != chosen:
            sub.add_parser(name)  # listed, not loaded
            continue
        mod = importlib.import_module(modname)
        p = sub.add_parser(name, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def _openblas_settings():
    """The `npgpt` command is a process npgpt owns: let OpenBLAS's idle threads sleep after about
    25 us of spinning (2^16 cycles) instead of 0.1 s, so the fast path's elementwise passes get
    the cores between matrix products (npgpt/fast/_blas_threads.py, docs/bench.md). OpenBLAS
    reads this once, when NumPy loads it, so it is set before anything imports NumPy (`import
    npgpt` loads none). A value the user set wins; a library user sets it themselves."""
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "16")


def _version():
    from . import __version__

    return __version__


def main(argv=None):
    _openblas_settings()
    args = build_parser(argv).parse_args(argv)
    try:
        return args._run(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `npgpt check | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
