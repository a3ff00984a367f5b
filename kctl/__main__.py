"""`python -m kctl`: the same entry point as the `kctl` console script."""

from kctl.cli.main import main

main()
