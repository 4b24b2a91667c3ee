"""The `npgpt` command (also `python -m npgpt`): one subcommand per module.

Each subcommand lives in its own module under npgpt/commands/, which defines HELP,
add_arguments(parser) and run(args) -> exit status; adding one is one line in COMMANDS.
Every option needs a help text; its default is shown by HelpFormatter.

Errors: bad input (an npgpt.errors.InputError, or an OSError such as a missing file) or sizes
that do not fit in memory (MemoryError) is one line, `npgpt COMMAND: error: MESSAGE`, and exit
status 2; any other exception is one line naming its type, and exit status 1.
`npgpt --debug COMMAND ...` or NPGPT_DEBUG=1 shows the traceback instead.
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
    "reference": "npgpt.commands.reference",
    "compare": "npgpt.commands.compare",
}


class HelpFormatter(argparse.HelpFormatter):
    """Shows each option's default after its help, unless the help already says it ("(default"
    or %(default)s in it) or there is none to show (None, or an on/off flag)."""

    def _get_help_string(self, action):
        text = action.help or ""
        shown = "%(default)" in text or "(default" in text or action.default in (None, argparse.SUPPRESS)
        if not shown and action.nargs != 0 and (action.option_strings or action.nargs in "?*"):
            text += " (default: %(default)s)"
        return text


class Parser(argparse.ArgumentParser):
    """A usage error is one line, `npgpt train: error: ...`, and exit status 2; the usage block
    that argparse prints first is left to `--help`. Subcommands' parsers are of this class too."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser(argv=None):
    """The argument parser. Only the chosen subcommand's module is imported, so one
    subcommand's optional dependencies never stand in another's way."""
    argv = sys.argv[1:] if argv is None else argv
    chosen = next((a for a in argv if not a.startswith("-")), None)
    parser = Parser(
        prog="npgpt",
        description="GPT-2's building blocks in plain NumPy, every gradient by hand.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"npgpt {_version()}")
    parser.add_argument(
        "--debug", action="store_true", help="on an error, show the traceback (also: NPGPT_DEBUG=1)"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", help="one of the commands below")
    sub.required = True
    for name, modname in COMMANDS.items():
        if chosen in COMMANDS and name != chosen:
            sub.add_parser(name)  # listed, not loaded
            continue
        mod = importlib.import_module(modname)
        p = sub.add_parser(name, help=mod.HELP, description=mod.HELP, formatter_class=HelpFormatter)
        mod.add_arguments(p)
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
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


def _debug(args):
    return getattr(args, "debug", False) or os.environ.get("NPGPT_DEBUG", "") not in ("", "0")


def main(argv=None):
    _openblas_settings()
    from .errors import InputError

    args = build_parser(argv).parse_args(argv)
    try:
        return args._run(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `npgpt check | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (InputError, OSError) as e:
        if _debug(args):
            raise
        print(f"npgpt {args.command}: error: {_one_line(e)}", file=sys.stderr)
        return 2
    except MemoryError as e:  # sizes the user chose (e.g. train --block-size 100000) that cannot fit
        if _debug(args):
            raise
        print(
            f"npgpt {args.command}: error: out of memory: {_one_line(e)}; choose smaller sizes",
            file=sys.stderr,
        )
        return 2
    except Exception as e:
        if _debug(args):
            raise
        print(
            f"npgpt {args.command}: internal error: {type(e).__name__}: {_one_line(e)} "
            "(run `npgpt --debug ...` for the traceback)",
            file=sys.stderr,
        )
        return 1


def _one_line(e):
    if isinstance(e, OSError) and e.strerror and e.filename is not None:
        return f"{e.filename}: {e.strerror}"
    return " ".join(str(e).split()) or type(e).__name__


if __name__ == "__main__":
    sys.exit(main())
