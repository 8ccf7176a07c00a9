"""Email provider adapters behind one contract (``base``): one module per provider."""
