"""`npgpt assignment NAME [NAME ...] [-o FILE]`: write a starter file for students.

NAME is a component the registry (npgpt/registry.py) gives a starter file: layernorm, gelu,
linear, feedforward, attention, block, crossentropy (or loss), a class name, or all
(comma-separated lists work too). Classes a component is built from are included. Without -o
the file goes to stdout.
"""

import os
import sys

from ..registry import supported

HELP = "write a starter file of classes for students to implement (graded by `npgpt grade`)"


def add_arguments(parser):
    parser.add_argument(
        "names",
        nargs="+",
        metavar="NAME",
        help=", ".join(c.name for c in supported("assignment")) + " or all (class names work too)",
    )
    parser.add_argument("-o", "--output", default=None, help="write here instead of stdout")
    parser.add_argument("--force", action="store_true", help="overwrite an existing output file")


def run(args):
    from ..assignments import starter

    names = list(args.names)
    if args.output == "":
        print("npgpt assignment: -o is empty; name a file, or leave -o out for stdout", file=sys.stderr)
        return 2
    filename = os.path.basename(args.output) if args.output else "submission.py"
    try:
        text = starter(names, filename)
    except ValueError as e:
        print(f"npgpt assignment: {e}", file=sys.stderr)
        return 2
    if args.output is None:
        sys.stdout.write(text)
        return 0
    if os.path.exists(args.output) and not args.force:
        print(f"npgpt assignment: {args.output} exists (use --force to overwrite)", file=sys.stderr)
        return 2
    with open(args.output, "w") as f:
        f.write(text)
    print(f"wrote {args.output}")
    return 0
