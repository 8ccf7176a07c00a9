"""Code every resetgate service shares: settings, keys, scripts, model, tokens, metrics."""
