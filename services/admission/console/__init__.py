"""The support and on-call console: server-rendered pages under ``/console/`` on admission's
console listener (``RESETGATE_CONSOLE_PORT``), never on the public one."""
