"""``python -m services.sender``."""

from services.sender.app import main

main()
