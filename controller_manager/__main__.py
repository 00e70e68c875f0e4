"""`python -m controller_manager` is `aiokcm`."""

from controller_manager.cli import main

main()
