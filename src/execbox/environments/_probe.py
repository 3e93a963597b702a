"""Which requirements are not satisfied where some Python runs: a program
never imported by execbox, run by the interpreter it asks about.

Two callers send it as text followed by one call whose arguments are data:
``_packages.missing_packages`` runs it with ``python -c`` (the requirements
as a JSON argument), and a ``PythonTool`` sends it to its executor as code
(``tools._libraries.probe_code``). It prints ``mark`` and the JSON list of
the requirements not satisfied.

It runs in an environment whose Python may be older than the host's and may
lack ``packaging``: standard library only (``packaging`` is used for a
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
        match = re.match(r"[A-Za-z0-9._-]+", req)
        assert match is not None, req  # the caller passes checked requirements
        name = match.group(0)
        spec = re.sub(r"^\[[^\]]*\]", "", req[len(name) :]).strip()  # extras are not checked
        try:
            have = md.version(name)
            if spec:  # a version is checked where packaging is installed, else counts as missing
                from packaging.specifiers import SpecifierSet

                if not SpecifierSet(spec).contains(have, prereleases=True):
                    raise LookupError(have)
        except Exception:  # noqa: BLE001 (whatever stops the check, the requirement counts as missing)
            missing.append(req)
    print(mark + json.dumps(missing))
