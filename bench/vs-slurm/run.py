#!/usr/bin/env python3
"""Short tasks end to end: Cubeplane's local executor against Slurm, side by
side on this machine in one run.

    bench/vs-slurm/run.py [--tasks N] [--cubeplane build/release/cubeplane]
                          [--clients C] [--only cubeplane|slurm]

Both get the same work: N tasks that run `true` with 1 CPU each, on one node
of 8 CPUs (the single-host cluster of scripts/slurm-test-cluster.sh declares
8 CPUs, and Cubeplane's node is declared with 8 too), submitted by C client
threads at once. Each side is timed from the first submission until every
task is seen finished, by polling every 20 ms.

  Cubeplane: `cubeplane up` with one local cluster; each task is a one-step
             pipeline POSTed to /api/v1/pipelines; done = Succeeded in
             GET /api/v1/tasks?state=Succeeded.
  Slurm:     the throwaway cluster of scripts/slurm-test-cluster.sh, tuned
             for throughput (SchedulerParameters=batch_sched_delay=0,
             default_queue_depth=1000,sched_min_interval=0,bf_interval=1);
             each task is `sbatch --wrap true -c 1`; done = gone from squeue
             and COMPLETED in scontrol.

Before the rates, Cubeplane's side prints where a task's life went (queued,
to the agent and started, ran, reported; p50 and p90), from its own store.
VS_SLURM_KEEP=1 keeps the work directories (the store, up.log) in /tmp;
VS_SLURM_LOG_LEVEL=debug makes `cubeplane up` log each sync and cycle there.

The last line is machine-readable:
  cubeplane_per_sec=X slurm_per_sec=Y ratio=R tasks=N
Needs root for Slurm (the script starts it when needed).
"""
import argparse
import concurrent.futures
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
POLL_S = 0.02

FLEET = """apiVersion: cubeplane/v1
kind: Server
spec: {lease_ttl_s: 30, lost_after_s: 40}
---
apiVersion: cubeplane/v1
kind: Cluster
metadata: {name: bench}
spec:
  executor: local
  storage_pool: local
  nodes:
    - {name: bench-1, cpu: "8", memory: 8Gi}
---
apiVersion: cubeplane/v1
kind: ResourceGroup
metadata: {name: rg-bench}
spec:
  clusters: [bench]
  quota:
    cpu: {guaranteed: "8"}
    memory: {guaranteed: 8Gi}
  default_request: {memory: 256Mi}
---
apiVersion: cubeplane/v1
kind: ProjectGroup
metadata: {name: pg-bench}
spec: {default_resource_group: rg-bench}
"""

PIPELINE = json.dumps({
    "apiVersion": "cubeplane/v1", "kind": "Pipeline",
    "metadata": {"name": "short", "project_group": "pg-bench"},
    "spec": {"steps": [{"name": "true", "command": ["true"], "resources": {"cpu": "1", "memory": "256Mi"}}]},
}).encode()


def api(url, token, method="GET", body=None):
    req = urllib.request.Request(url, data=body, method=method)
    req.add_header("Authorization", "Bearer " + token)
    if body is not None:
        req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read() or b"null")


def count_succeeded(base, token):
    n, cursor = 0, ""
    while True:
        page = api(f"{base}/api/v1/tasks?state=Succeeded&limit=1000" + (f"&cursor={cursor}" if cursor else ""), token)
        n += len(page.get("items", []))
        cursor = page.get("next_cursor") or ""
        if not cursor:
            return n


def run_cubeplane(binary, tasks, clients):
    work = tempfile.mkdtemp(prefix="cubeplane-vs-slurm-")
    config = os.path.join(work, "fleet.yaml")
    with open(config, "w") as f:
        f.write(FLEET)
    log = open(os.path.join(work, "up.log"), "w")
    env = dict(os.environ, CUBEPLANE_USE_SAMPLE_MS="0")
    proc = subprocess.Popen([binary, "up", "--config", config, "--data-dir", os.path.join(work, "data"),
                             "--listen", "127.0.0.1:0", "--log-level", os.environ.get("VS_SLURM_LOG_LEVEL", "warn")],
                            stdout=subprocess.PIPE, stderr=log, text=True, env=env)
    try:
        base = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            m = re.search(r"UI and API:\s+(\S+?)/?$", line.strip())
            if m:
                base = m.group(1)
                break
        if not base:
            raise SystemExit("cubeplane up did not start; see " + log.name)
        threading.Thread(target=proc.stdout.read, daemon=True).start()  # keep its pipe drained
        with open(os.path.join(work, "data", "admin-token")) as f:
            token = f.read().strip()
        # Wait for the cluster's node, so that the clock starts with a fleet ready to run.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            nodes = api(base + "/api/v1/nodes", token).get("items", [])
            if any(n.get("ready") for n in nodes):
                break
            time.sleep(0.1)
        else:
            raise SystemExit("the bench cluster's node never came up")

        t0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(clients) as pool:
            list(pool.map(lambda _: api(base + "/api/v1/pipelines", token, "POST", PIPELINE), range(tasks)))
        submitted = time.monotonic() - t0
        while count_succeeded(base, token) < tasks:
            if time.monotonic() - t0 > 600:
                raise SystemExit("cubeplane: tasks did not all succeed within 10 minutes")
            time.sleep(POLL_S)
        elapsed = time.monotonic() - t0
        print_phases(os.path.join(work, "data", "cubeplane.db"))
        return tasks / elapsed, submitted, elapsed
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        if not os.environ.get("VS_SLURM_KEEP"):
            shutil.rmtree(work, ignore_errors=True)


def print_phases(db_path):
    """Where a task's life went, from the run's own store: the server's
    events (created, Dispatched, Succeeded) and the agent's start and end
    times on the attempt (one machine, one clock). Medians and p90 in ms."""
    db = sqlite3.connect("file:" + db_path + "?mode=ro", uri=True)
    at = {}
    for object_id, doc in db.execute("SELECT object_id, doc FROM events WHERE object_kind = 'task'"):
        e = json.loads(doc)
        at.setdefault(object_id, {}).setdefault(e.get("to") or e.get("type"), e["at"])
    for (doc,) in db.execute("SELECT doc FROM attempts"):
        a = json.loads(doc)
        t = at.setdefault(a["task_id"], {})
        t["started"], t["finished"] = a.get("started_at", 0), a.get("finished_at", 0)
    db.close()
    phases = [("queued (created -> Dispatched)", "Queued", "Dispatched"),
              ("to the agent and started (Dispatched -> started)", "Dispatched", "started"),
              ("ran (started -> finished)", "started", "finished"),
              ("reported (finished -> Succeeded)", "finished", "Succeeded")]
    for name, a, b in phases:
        gaps = sorted(t[b] - t[a] for t in at.values() if t.get(a) and t.get(b))
        if gaps:
            print("  %-50s p50 %5d  p90 %5d ms  (%d tasks)"
                  % (name, gaps[len(gaps) // 2], gaps[min(len(gaps) - 1, len(gaps) * 9 // 10)], len(gaps)))


def slurm_env():
    out = subprocess.run([os.path.join(ROOT, "scripts", "slurm-test-cluster.sh"), "env"],
                         check=True, capture_output=True, text=True).stdout
    env = dict(os.environ)
    for m in re.finditer(r"export (\w+)=(?:'([^']*)'|\"([^\"]*)\"|(\S+))", out):
        env[m.group(1)] = next(g for g in m.groups()[1:] if g is not None)
    return env


def run_slurm(tasks, clients):
    env = slurm_env()
    work = tempfile.mkdtemp(prefix="slurm-vs-cubeplane-")

    def submit(i):
        r = subprocess.run(["sbatch", "--parsable", "--job-name", f"vs{i}", "-c", "1", "--mem", "256",
                            "-o", "/dev/null", "-D", work, "--wrap", "true"],
                           env=env, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit("sbatch failed: " + r.stderr.strip())
        return r.stdout.strip().split(";")[0]

    try:
        t0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(clients) as pool:
            ids = list(pool.map(submit, range(tasks)))
        submitted = time.monotonic() - t0
        wanted = ",".join(ids)
        while True:
            r = subprocess.run(["squeue", "-h", "-j", wanted, "-o", "%i"], env=env, capture_output=True, text=True)
            if r.returncode == 0 and not r.stdout.strip():
                break
            if time.monotonic() - t0 > 600:
                raise SystemExit("slurm: jobs did not all finish within 10 minutes")
            time.sleep(POLL_S)
        elapsed = time.monotonic() - t0
        # Every job must really have completed, not failed or been cancelled.
        r = subprocess.run(["scontrol", "-o", "show", "job"], env=env, capture_output=True, text=True)
        mine = set(ids)
        done = sum(1 for line in r.stdout.splitlines()
                   if (m := re.match(r"JobId=(\d+)", line)) and m.group(1) in mine and " JobState=COMPLETED " in line)
        if done != tasks:
            raise SystemExit(f"slurm: {done} of {tasks} jobs COMPLETED")
        return tasks / elapsed, submitted, elapsed
    finally:
        if not os.environ.get("VS_SLURM_KEEP"):
            shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=200)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--cubeplane", default=os.path.join(ROOT, "build", "release", "cubeplane"))
    ap.add_argument("--only", choices=["cubeplane", "slurm"])
    a = ap.parse_args()
    if a.tasks < 1 or a.clients < 1:
        ap.error("--tasks and --clients must be at least 1")
    print(f"load average before: {os.getloadavg()[0]:.2f}, cpus: {os.cpu_count()}", flush=True)
    cp_rate = sl_rate = 0.0
    if a.only != "slurm":
        cp_rate, sub, el = run_cubeplane(a.cubeplane, a.tasks, a.clients)
        print(f"cubeplane: {a.tasks} tasks submitted in {sub:.2f} s, all Succeeded after {el:.2f} s: "
              f"{cp_rate:.1f} tasks/s", flush=True)
    if a.only != "cubeplane":
        sl_rate, sub, el = run_slurm(a.tasks, a.clients)
        print(f"slurm:     {a.tasks} jobs submitted in {sub:.2f} s, all COMPLETED after {el:.2f} s: "
              f"{sl_rate:.1f} jobs/s", flush=True)
    ratio = cp_rate / sl_rate if sl_rate > 0 else 0.0
    print(f"cubeplane_per_sec={cp_rate:.1f} slurm_per_sec={sl_rate:.1f} ratio={ratio:.2f} tasks={a.tasks}")


if __name__ == "__main__":
    main()
