"""Package data: shipped in the wheel as ``memoryd.systemd`` (read with importlib.resources)."""
