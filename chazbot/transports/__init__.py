"""Transports: Matrix (nio), the terminal, the control socket, /healthz and /metrics.

Each turns a message into a command or a turn, and a reply into a message; nothing else.
Import the module you need (``chazbot.transports.matrix`` loads matrix-nio).
"""
