"""``python -m services.router``."""

from services.router.app import main

main()
