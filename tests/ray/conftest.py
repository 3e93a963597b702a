"""The ray tests run only inside the network namespace that
``tests/test_ray_cluster.py`` makes for them (``_cluster.py`` says why);
elsewhere they are not collected (that test runs them)."""

from tests.ray._cluster import IN_NAMESPACE

if not IN_NAMESPACE:
    collect_ignore_glob = ["test_*.py"]
