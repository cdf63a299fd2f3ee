"""The `wex` command pip installs: the bundled program, run in place."""
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> int:
    program = os.path.join(_HERE, "bin", "wex")
    if not os.access(program, os.X_OK):
        sys.stderr.write("wex: the wex program is not beside the package "
                         "(%s); reinstall wex\n" % program)
        return 127
    os.execv(program, [program] + sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
