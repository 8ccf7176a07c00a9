"""poller: observes delivery through the provider's events feed and reconciles ambiguous
attempts by idempotency key, on its own request budget."""
