"""Reminders (#37): when, what, schedules and their delivery."""
