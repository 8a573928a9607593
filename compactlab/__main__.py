"""``python -m compactlab``, and the ``compactlab`` command's entry point."""

import gc


def main() -> None:
    # Start-up makes tens of thousands of objects (modules, classes, click's options) and no
    # garbage: the cyclic collector would only traverse them, some 30 times (~5 ms of every
    # command). It comes back on, with what exists frozen, once a command has read its
    # transcripts (cli._collector_off).
    gc.disable()
    from .cli import run

    run()


if __name__ == "__main__":
    main()
