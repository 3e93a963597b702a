"""A little code the zygote compiles and runs once, in itself and in each
code process before its block (see ``zygote.warm_up``): read as text, never
imported. ``OUT`` is given: where to print (/dev/null).
"""

import json
import os  # noqa: F401 - imported, as blocks do
import sys  # noqa: F401


def f(x, *args, **kwargs):
    return [str(i) + repr(x) for i in range(3)], {"a": 1.5}, (lambda y: y)(args)


class C:
    pass


json.loads('{"argv": ["/x", "y.py"], "inproc": true}')
print(f"{f(1)!r}", file=OUT)  # type: ignore[name-defined]  # noqa: F821 - given by the zygote
