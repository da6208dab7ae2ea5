"""Entry point: ``python -m course_tools COMMAND [args]`` (started by course.py inside the environment)."""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m course_tools {test,execute,exercises,colab-links,grade,screenshots,site,doctor,bounds} "
              "[args]", file=sys.stderr)
        return 2
    command, rest = argv[0], argv[1:]
    if command == "test":
        from .testrun import main as run
    elif command == "execute":
        from .execute import main as run
    elif command == "exercises":
        from .exercises import main as run
    elif command == "colab-links":
        from .colab import main as run
    elif command == "grade":
        from .grading.cli import main as run
    elif command == "screenshots":
        from .screenshots import main as run
    elif command == "site":
        from .site import main as run
    elif command == "doctor":
        from .doctor import main as run
    elif command == "bounds":
        from .bounds import main as run
    else:
        print(f"unknown command {command!r}; try: python3 course.py --help", file=sys.stderr)
        return 2
    return run(rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
