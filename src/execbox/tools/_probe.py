"""Which requirements are not satisfied where a PythonTool's code runs: a
program the tool sends to its executor as code (``_libraries.probe_code``
reads this file and appends the call), never imported by execbox.

It runs in the tool's environment, whose Python may be older than the host's
and may lack ``packaging``: standard library only (``packaging`` is used for a
version specifier when the environment has it; without it a requirement with
a version counts as missing). It defines one function with a name no user
code uses and the caller deletes it after the call, since on the jupyter
backend this runs in the model's own session.
"""


def __execbox_probe(wanted, mark):
    import importlib.metadata as md
    import json
    import re

    missing = []
    for req in wanted:
        name = re.match(r"[A-Za-z0-9._-]+", req).group(0)
        spec = re.sub(r"^\[[^\]]*\]", "", req[len(name):])  # extras are not checked
        try:
            have = md.version(name)
            if spec:
                from packaging.specifiers import SpecifierSet
                if not SpecifierSet(spec).contains(have, prereleases=True):
                    raise LookupError(have)
        except Exception:
            missing.append(req)
    print(mark + json.dumps(missing))
