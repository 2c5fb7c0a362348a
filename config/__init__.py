"""Package data: shipped in the wheel as ``memoryd.config`` (read with importlib.resources)."""
