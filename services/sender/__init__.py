"""sender: turns queued operations into provider sends, on the provider's schedule."""
