"""resetgate deployables: each subpackage runs as `python -m services.<name>`."""
