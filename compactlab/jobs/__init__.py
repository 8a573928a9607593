"""What each command does, as one library call that owns its output folder from start to end:
``replay.replay_files``, ``compare.compare_files``, ``check.check_files`` and ``tune.tune_files``.
They take the one ``base.Settings`` object, say what they must through a ``Notify`` and return
typed results and an ``Outcome`` (the lines to say, the exit status); the command line only
parses, calls and writes."""
