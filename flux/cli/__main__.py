"""``python -m flux.cli``: how ``flux.local`` and the tests start servers and workers."""

from flux.cli import main

main(prog_name="flux")
