"""What each ``perfmodel`` command does, as functions: ``predict``, ``validate``, ``calibrate``,
``sweep``, ``plan`` and ``gpus``, one module each (``common`` and ``planning`` hold what they
share). perfmodel/cli.py only parses options, calls one of these and prints; perfmodel.api is the
same functions for a Python caller. Errors are ConfigError naming the command-line option."""
