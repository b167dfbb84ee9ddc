"""spanfix's version, in a module of its own: the package, the CLI's --version, the report and remote
tasks read it without importing the package's public face (pyproject.toml reads it too)."""

__version__ = "0.2.0"
