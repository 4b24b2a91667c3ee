"""`python -m npgpt` is the `npgpt` command."""

import sys

from .cli import main

sys.exit(main())
