"""Sandbox email provider: the provider contract with rate limits and fault injection.

Run it with ``python -m services.sandbox``; start one inside a test with
``tests.support.sandbox.run_sandbox``.
"""

from services.sandbox.app import create_app
from services.sandbox.server import main
from services.sandbox.settings import SandboxSettings

__all__ = ["SandboxSettings", "create_app", "main"]
