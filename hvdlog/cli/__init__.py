"""The ``hvdlog`` command line; each command lives in its own module."""
