#!/bin/sh
# Runs "$@" in a new network namespace that has only lo, up (root): what
# ray_table.py measures Ray in, so that nothing of it listens off loopback.
exec unshare -n sh -c 'ip link set lo up && exec "$@"' sh "$@"
