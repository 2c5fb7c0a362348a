"""Secret detection and redaction: one detector for what is written, indexed, returned and logged.

Below both the write path and ingestion (which redacts what it indexes), so neither imports the other
to reach it.
"""
