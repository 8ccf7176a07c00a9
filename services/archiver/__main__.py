"""``python -m services.archiver``."""

from services.archiver.app import main

main()
