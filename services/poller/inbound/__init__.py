"""Pushed delivery events: provider webhooks and the SES queue, joined by operation id."""
