"""The measured inputs of the capacity model (docs/scale.md), on this
machine, in one short run (about a minute and a half). Prints one JSON
object; also writes it to benchmarks/results/capacity.json.

How each figure is taken:

- CPU: this process moves itself into a cpuacct cgroup of its own (cgroup
  v1, where cpuacct is a hierarchy apart from the cpu, memory and pids ones
  the sandbox moves blocks into), so every process it starts (bwrap, the
  zygote and its units, a jailed kernel, Ray's processes) is counted there,
  exited or not: ``cpuacct.usage`` before and after N runs of ``print(1)``,
  divided by N. The host side alone is this process' ``RUSAGE_SELF``. For
  Docker, what the engine does is outside that group: the container's own
  cpuacct group plus dockerd, containerd and the container's shim (utime +
  stime + their reaped children's, runc among them, from /proc/<pid>/stat;
  the daemons' share counts whatever else the engine did meanwhile).
- Idle: the same group's CPU over IDLE_S seconds with nothing running, and
  the memory of the processes it holds then: Pss (and Rss) from
  /proc/<pid>/smaps_rollup, tasks (threads: what a pids cgroup counts) from
  /proc/<pid>/task; for Docker the container's processes and its shim, and
  the container's memory cgroup.
- Ray (``--ray``, run by this script as a child in a network namespace with
  only ``lo``: benchmarks/_netns.sh): a one-node ``ray.cluster_utils``
  cluster; the admission actor's acquire+release pairs per second from 1
  and 8 threads each waiting for its acquire, and pipelined (the actor's
  own ceiling); the same decision's Python cost without Ray for 1 to 1,000
  nodes; the ray backend's CPU per ``print(1)`` over the whole cluster (less
  its idle rate) and the memory of Ray's processes by kind; the pickled size
  of a run's last generator item.
- Ray's call floors come from benchmarks/results/latest-ray.json (run.py
  ``--only ray``) or latest.json (a whole run) when it holds them.

Usage: python benchmarks/capacity_inputs.py [--runs N]   (root, cgroup v1)
"""

from __future__ import annotations

import json
import os
import pickle
import resource
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CPUACCT = Path("/sys/fs/cgroup/cpuacct")
IDLE_S = 3.0
WARMUP = 5


class Meter:
    """A cpuacct group holding this process and all it starts from now on."""

    def __init__(self) -> None:
        self.path = CPUACCT / f"execbox-capacity-{os.getpid()}"
        self.path.mkdir()
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def cpu_s(self) -> float:
        return int((self.path / "cpuacct.usage").read_text()) / 1e9

    def pids(self) -> set[int]:
        return {int(p) for p in (self.path / "cgroup.procs").read_text().split()} - {os.getpid()}

    def close(self) -> None:
        (CPUACCT / "cgroup.procs").write_text(str(os.getpid()))
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except OSError:  # processes still leaving
                time.sleep(0.1)


def own_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def proc_cpu_s(pid: int) -> float:
    """utime + stime + cutime + cstime of a process, in seconds."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(fields[i]) for i in (11, 12, 13, 14)) / os.sysconf("SC_CLK_TCK")


def footprint(pids: set[int]) -> dict:
    """Pss/Rss (MiB), processes, tasks (threads), and both by kind of process."""
    pss = rss = 0
    tasks = 0
    by_name: dict[str, float] = {}
    tasks_by_name: dict[str, int] = {}
    for pid in pids:
        try:
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            threads = len(os.listdir(f"/proc/{pid}/task"))
        except OSError:
            continue
        tasks += threads
        fields = {line.split(":")[0]: int(line.split()[1]) for line in rollup.splitlines()[1:]}
        pss += fields.get("Pss", 0)
        rss += fields.get("Rss", 0)
        name = kind(cmdline)
        by_name[name] = round(by_name.get(name, 0) + fields.get("Pss", 0) / 1024, 1)
        tasks_by_name[name] = tasks_by_name.get(name, 0) + threads
    return {
        "processes": len(pids),
        "tasks": tasks,
        "pss_mib": round(pss / 1024, 1),
        "rss_mib": round(rss / 1024, 1),
        "pss_by_kind_mib": by_name,
        "tasks_by_kind": tasks_by_name,
    }


def kind(cmdline: str) -> str:
    for label in (
        "gcs_server",
        "raylet",
        "NodeAgent",
        "Admission",
        "ray::IDLE",
        "dashboard",
        "log_monitor",
        "runtime_env",
        "monitor.py",
        "bwrap",
        "zygote",
        "ipykernel",
        "containerd-shim",
    ):
        if label in cmdline:
            return label
    return (cmdline.split() or ["?"])[0].rsplit("/", 1)[-1]


def timed_runs(run, runs: int, extra_cpu=lambda: 0.0) -> dict:
    """N runs of print(1): wall (median, p90) and CPU per run (ms)."""
    walls, wrong = [], 0
    cpu0, own0, extra0 = METER.cpu_s(), own_cpu_s(), extra_cpu()
    for _ in range(runs):
        started = time.perf_counter()
        wrong += run() != "1\n"
        walls.append(time.perf_counter() - started)
    cpu, own, extra = METER.cpu_s() - cpu0, own_cpu_s() - own0, extra_cpu() - extra0
    walls.sort()
    return {
        "n": runs,
        "wrong": wrong,
        "wall_median_ms": round(statistics.median(walls) * 1000, 2),
        "wall_p90_ms": round(walls[int(0.9 * (runs - 1))] * 1000, 2),
        "cpu_per_run_ms": round((cpu + extra) / runs * 1000, 2),
        "cpu_host_process_ms": round(own / runs * 1000, 2),
        "cpu_engine_ms": round(extra / runs * 1000, 2),
    }


def idle(extra_cpu=lambda: 0.0) -> dict:
    time.sleep(1.0)
    cpu0, extra0 = METER.cpu_s(), extra_cpu()
    time.sleep(IDLE_S)
    return {
        "cpu_cores": round((METER.cpu_s() - cpu0 + extra_cpu() - extra0) / IDLE_S, 4),
        **footprint(METER.pids()),
    }


def docker_probe(cid: str) -> tuple:
    """For a container: the engine's CPU (its cpuacct group, dockerd,
    containerd and its shim), the daemons' alone, and its memory. The
    daemons' share counts whatever else the engine did meanwhile."""
    procs = {int(p) for p in Path(f"/sys/fs/cgroup/pids/docker/{cid}/cgroup.procs").read_text().split()}
    shims = {
        int(p)
        for p in os.listdir("/proc")
        if p.isdigit() and cid.encode() in Path(f"/proc/{p}/cmdline").read_bytes()
    } - procs
    daemons = [
        int(p)
        for p in os.listdir("/proc")
        if p.isdigit() and Path(f"/proc/{p}/comm").read_text().strip() in ("dockerd", "containerd")
    ] + list(shims)
    group, mem = CPUACCT / "docker" / cid, Path(f"/sys/fs/cgroup/memory/docker/{cid}")
    stat = dict(line.split() for line in (mem / "memory.stat").read_text().splitlines())
    others = len(subprocess.run(["docker", "ps", "-q"], capture_output=True, text=True).stdout.split()) - 1

    def daemons_cpu() -> float:
        return sum(map(proc_cpu_s, daemons))

    def engine_cpu() -> float:
        return int((group / "cpuacct.usage").read_text()) / 1e9 + daemons_cpu()

    memory = {
        "usage": int((mem / "memory.usage_in_bytes").read_text()),
        "rss": int(stat["rss"]),
        "cache": int(stat["cache"]),
    }
    return (
        engine_cpu,
        daemons_cpu,
        {
            "container": footprint(procs | shims),
            "other_containers_running": others,
            "container_memory_cgroup_mib": {k: round(v / 2**20, 1) for k, v in memory.items()},
        },
    )


def backend(make, runs: int, docker: bool = False) -> dict:
    import execbox

    block = execbox.CodeBlock("python", "print(1)")
    ex = make()
    try:
        started = time.perf_counter()
        ex.start()
        start_s = time.perf_counter() - started
        for _ in range(WARMUP):
            ex.run(block)
        engine, daemons, extra = docker_probe(ex.container_id) if docker else (lambda: 0.0, lambda: 0.0, {})
        report = {"start_s": round(start_s, 3), "idle": idle(engine), **extra}
        daemons0 = daemons()
        report["print1"] = timed_runs(lambda: ex.run(block).output, runs, engine)
        if docker:
            report["print1"]["cpu_daemons_ms"] = round((daemons() - daemons0) / runs * 1000, 2)
        return report
    finally:
        ex.close()


def limits() -> dict:
    def read(path: str) -> str | None:
        try:
            return Path(path).read_text().strip()
        except OSError:
            return None

    own = {
        line.split(":")[1]: line.split(":")[2] for line in Path("/proc/self/cgroup").read_text().splitlines()
    }
    mem = {line.split(":")[0]: line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines()}
    return {
        "cpus": os.cpu_count(),
        "mem_total_mib": int(mem["MemTotal"]) // 1024,
        "pid_max": int(read("/proc/sys/kernel/pid_max") or 0),
        "threads_max": int(read("/proc/sys/kernel/threads-max") or 0),
        "rlimit_nproc": resource.getrlimit(resource.RLIMIT_NPROC)[0],
        "pids_cgroup_max": read(f"/sys/fs/cgroup/pids{own.get('pids', '/')}/pids.max")
        or "none at this level",
        "memory_cgroup_limit": read(f"/sys/fs/cgroup/memory{own.get('memory', '/')}/memory.limit_in_bytes"),
        "kernel": os.uname().release,
    }


# -- Ray (in its own network namespace) ---------------------------------------


def ray_part(runs: int) -> dict:
    import ray
    from ray.cluster_utils import Cluster

    import execbox
    from execbox.backends.ray._admission import Admission
    from execbox.backends.ray._agent import RunEnd
    from execbox.backends.ray._cluster import cluster as execbox_cluster

    report: dict = {"admission_python_us": {}}
    # the admission's decision alone, without Ray: acquire + release, nodes alive
    for nodes in (1, 32, 320, 1000):
        adm = Admission()
        adm._nodes, adm._looked = [f"n{i}" for i in range(nodes)], time.monotonic() + 1e9
        for i in range(nodes * 4):  # some load on every node
            adm.acquire(f"bg{i}", 10**6, None)
        started, n = time.perf_counter(), 2000
        for i in range(n):
            _, node = adm.acquire(f"r{i}", 10**6, None)
            adm.release(node, f"r{i}", 0.01)
        report["admission_python_us"][str(nodes)] = round((time.perf_counter() - started) / n * 1e6, 1)

    block = execbox.CodeBlock("python", "print(1)")
    with execbox.SandboxExecutor() as local:
        result = local.run(block)
        big = local.run(execbox.CodeBlock("python", "print('x' * (2**20 - 1))"))
    report["last_item_bytes"] = {
        "print1": len(pickle.dumps([RunEnd(result, {}, [])])),
        "1MiB_output": len(pickle.dumps([RunEnd(big, {}, [])])),
    }

    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "node_ip_address": "127.0.0.1", "include_dashboard": False},
    )
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, namespace="execbox", _node_ip_address="127.0.0.1")
    try:
        report["cluster_idle"] = idle()
        admission = execbox_cluster().admission()
        ray.get(admission.load.remote())
        ids = iter(range(10**9))
        lock = threading.Lock()

        def pairs_per_s(callers: int, seconds: float = 2.0) -> float:
            done = [0]
            stop = time.monotonic() + seconds

            def caller() -> None:
                while time.monotonic() < stop:
                    with lock:
                        rid = f"c{next(ids)}"
                    status, node = ray.get(admission.acquire.remote(rid, 10**6, None))
                    admission.release.remote(node, rid)
                    with lock:
                        done[0] += 1

            threads = [threading.Thread(target=caller) for _ in range(callers)]
            started = time.monotonic()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            ray.get(admission.load.remote())  # the releases in flight, served
            return round(done[0] / (time.monotonic() - started))

        report["admission_pairs_per_s"] = {"1_caller": pairs_per_s(1), "8_callers": pairs_per_s(8)}
        n = 2000
        started = time.perf_counter()
        nodes = ray.get([admission.acquire.remote(f"p{i}", 10**6, None) for i in range(n)])
        ray.get([admission.release.remote(node, f"p{i}") for i, (_, node) in enumerate(nodes)])
        report["admission_pairs_per_s"]["pipelined"] = round(n / (time.perf_counter() - started))
        idle_rate = report["cluster_idle"]["cpu_cores"]
        with execbox.create_executor("ray", address=cluster.address, per_node=8) as remote:
            for _ in range(WARMUP):
                remote.run(block)
            report["with_node_agent_idle"] = idle()
            started = time.perf_counter()
            report["ray_print1"] = timed_runs(lambda: remote.run(block).output, runs)
            took = time.perf_counter() - started
            report["ray_print1"]["cpu_per_run_less_idle_ms"] = round(
                report["ray_print1"]["cpu_per_run_ms"] - idle_rate * took / runs * 1000, 2
            )
    finally:
        ray.shutdown()
        cluster.shutdown()
    return report


def main() -> None:
    global METER
    runs = int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else 40
    METER = Meter()
    try:
        if "--ray" in sys.argv:
            print(json.dumps(ray_part(runs)))
            return
        import execbox

        out: dict = {
            "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "runs": runs,
            "idle_s": IDLE_S,
            "machine": limits(),
            "backends": {},
        }
        subjects = {
            "sandbox_pool": lambda: execbox.SandboxExecutor(),
            "sandbox_pool_size_1": lambda: execbox.SandboxExecutor(pool_size=1),
            "sandbox_one_shot": lambda: execbox.SandboxExecutor(pool=False),
            "jupyter_jailed": lambda: execbox.JupyterExecutor(kernel="sandbox", warm_kernels=0),
        }
        for name, make in subjects.items():
            print(f"measuring {name} ...", file=sys.stderr)
            try:
                out["backends"][name] = backend(make, runs)
            except Exception as exc:  # noqa: BLE001 - reported, the rest still measured
                out["backends"][name] = {"error": f"{type(exc).__name__}: {exc}"}
        if subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0:
            print("measuring docker ...", file=sys.stderr)
            try:
                out["backends"]["docker"] = backend(lambda: execbox.DockerExecutor(), runs, docker=True)
            except Exception as exc:  # noqa: BLE001
                out["backends"]["docker"] = {"error": f"{type(exc).__name__}: {exc}"}
        print("measuring ray ...", file=sys.stderr)
        done = subprocess.run(
            ["sh", str(HERE / "_netns.sh"), sys.executable, __file__, "--ray", "--runs", str(runs)],
            capture_output=True,
            text=True,
            timeout=600,
        )
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        out["ray"] = (
            json.loads(lines[-1]) if lines else {"error": (done.stderr.strip().splitlines() or ["?"])[-1]}
        )
        for name in ("latest-ray.json", "latest.json"):  # run.py --only ray, or a whole run
            latest = HERE / "results" / name
            bench = json.loads(latest.read_text()) if latest.exists() else {}
            if bench.get("ray_reports"):
                out["ray_benchmark"] = {"when": bench["when"], **bench["ray_reports"][-1]}
                break
        (HERE / "results" / "capacity.json").write_text(json.dumps(out, indent=1) + "\n")
        print(json.dumps(out, indent=1))
    finally:
        METER.close()


METER: Meter

if __name__ == "__main__":
    main()
