"""``python -m netgen.codegen.cache [clear]``: print the cache's info, or
clear it (as ``netgen cache info`` / ``netgen cache clear``)."""

import sys

from .folder import root
from .maintenance import clear, info

if __name__ == "__main__":  # pragma: no cover
    if sys.argv[1:] == ["clear"]:
        print(f"removed {clear()} files from {root()}")
    else:
        print(info())
