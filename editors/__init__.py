"""Package data: shipped in the wheel as ``memoryd.editors`` (read with importlib.resources)."""
