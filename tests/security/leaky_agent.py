"""A leaky agent, for tests/security/test_docker_frames.py alone: execbox's
agent (``real_agent.py``, a copy of ``_agent/agent.py`` beside this file in
the test's agent folder), but for the one flaw that ``blockuser.py``
closes: each block gets the host's channel as descriptor 3, and its own
block id in EXECBOX_LEAKED_ID. What the host makes of what a block writes
there is what those tests judge: the case where a block did reach the
channel, however it got there. Runs inside the container, stdlib only.
"""

import os

import real_agent  # beside this file

_only_these = real_agent.blockuser.only_these
_child = real_agent.Agent.child
_start = real_agent.Agent.start


def leaky_only_these(stdin, stdout, stderr, keep=()):
    leak = os.dup(1)  # the channel, still the agent's stdout here
    _only_these(stdin, stdout, stderr, keep=(*keep, leak))
    if leak != 3:
        os.dup2(leak, 3)
        os.close(leak)


def start(self, block_id, request):
    _start(self, block_id, dict(request, leaked_id=block_id))


def child(self, request, out_w, err_w):
    os.environ["EXECBOX_LEAKED_ID"] = str(request["leaked_id"])
    real_agent.blockuser.only_these = leaky_only_these  # (in the block's process alone)
    _child(self, request, out_w, err_w)


real_agent.Agent.start = start
real_agent.Agent.child = child
real_agent.main()
