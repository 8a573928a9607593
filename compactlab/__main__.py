"""``python -m compactlab``, and the ``compactlab`` command's entry point."""

import signal


def main() -> None:
    # first of all, SIGINT and SIGTERM held back: an import of a native module that a signal
    # interrupts can crash the process (orjson's segfaulted), and one that lands before the
    # command's handling is set up would end in a traceback. The command lets them through once
    # it can end cleanly on one (cli.Group.invoke, and run() at the end): 130 / 143.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    from .plumbing.process import start

    start()  # the process tricks of the command (process.py), before the CLI is imported
    from .cli import run

    run()


if __name__ == "__main__":
    main()
