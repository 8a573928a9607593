"""``python -m compactlab``, and the ``compactlab`` command's entry point."""

from .plumbing.process import start


def main() -> None:
    start()  # the process tricks of the command (process.py), before the CLI is imported
    from .cli import run

    run()


if __name__ == "__main__":
    main()
