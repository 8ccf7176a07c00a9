"""``python -m services.poller``."""

from services.poller.app import main

main()
