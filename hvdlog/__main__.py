"""``python -m hvdlog``: the same CLI as the ``hvdlog`` command."""

from hvdlog.cli import main

if __name__ == "__main__":
    main()
