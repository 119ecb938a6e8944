"""Numeric equivalence backends: in-process simulator and real ranks."""
