"""The ``resetgate`` command: run the stack locally, manage the directory, operate."""
