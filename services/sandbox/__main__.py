"""``python -m services.sandbox``."""

from services.sandbox.server import main

main()
