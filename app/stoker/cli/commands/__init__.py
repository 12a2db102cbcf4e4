"""One module per CLI subcommand: `add_arguments(parser)` and `run(args) -> int`.

They drive shell + core from a terminal and print; the UI is never imported here
except by the tray command.
"""
