"""``python -m flux``: the ``flux`` command line, where the script is not on PATH."""

from flux.cli import main

main(prog_name="flux")
