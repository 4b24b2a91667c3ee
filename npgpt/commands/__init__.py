"""The `npgpt` subcommands, one module each (see npgpt/cli.py)."""
