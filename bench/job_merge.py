"""How gpuleak-report scales with a job's ranks: the job.json (or with FROM=report, the report.json) of each
machine's run of a job of RANKS ranks (8 a machine), made from real ones of corpus scripts run as ranks
under gpuleak run (tests/workloads: each machine's ranks take them in turn, renumbered as the job's),
merged (--merge) as text, JSON and HTML; or with FROM=trace, the ranks' traces themselves, copies of the
corpus runs' (bench_rank_trace: each a process of its own machine, sparse as the recorder's files are),
read directly from the job's directory. Its time, peak memory and output sizes. A benchmark, not a test:
it prints figures and checks nothing about them. Figures in bench/README.md.

usage: python3 bench/job_merge.py
environment: FROM (job, report or trace; default job), RANKS (default "64 256 1024"), WORKLOADS (corpus
scripts, default "mlp_adam.py leak_losses_append.py cnn.py transformer_block.py"), REPS (runs of each
report, default 3; the median is printed), BUILD (build tree, default build/), TORCH_PYTHON (default:
what scripts/setup-torch.sh gives)
"""

import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
build = os.environ.get("BUILD", os.path.join(root, "build"))
ranks_wanted = [int(ranks) for ranks in os.environ.get("RANKS", "64 256 1024").split()]
workloads = os.environ.get("WORKLOADS", "mlp_adam.py leak_losses_append.py cnn.py transformer_block.py").split()
reps = int(os.environ.get("REPS", "3"))
per_machine = 8
reading = os.environ.get("FROM", "job")
source = "report.json" if reading == "trace" else reading + ".json"


def torch_python():
    if os.environ.get("TORCH_PYTHON"):
        return os.environ["TORCH_PYTHON"]
    environment = subprocess.run([os.path.join(root, "scripts", "setup-torch.sh")], stdout=subprocess.PIPE,
                                 universal_newlines=True, check=True).stdout.strip()
    return os.path.join(environment, "bin", "python")


def corpus_reports(directory):
    """The `source` file of each workload, run as rank 0 of a job under gpuleak run on the simulated device."""
    python = torch_python()
    reports = []
    if reading not in ("job", "report", "trace"):
        sys.exit("job_merge.py: FROM must be job, report or trace, not %r" % reading)
    for index, workload in enumerate(workloads):
        run = os.path.join(directory, "corpus%d" % index)
        environment = dict(os.environ, RANK="0", LOCAL_RANK="0", WORLD_SIZE="8",
                           LD_LIBRARY_PATH=os.path.join(build, "simdevice") + ":/usr/local/cuda/lib64",
                           PYTHONPATH=os.path.join(build, "simdevice", "python"), PYTHONWARNINGS="ignore")
        subprocess.run([os.path.join(build, "launcher", "gpuleak"), "run", "--quiet", "-o", run, "--", python,
                        os.path.join(root, "tests", "workloads", workload)],
                       env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        with open(os.path.join(run, source)) as report:
            reports.append(json.load(report))
    return reports


def machine_report(templates, machine, world):
    """Machine `machine`'s report of its 8 ranks: each a template's rank process, renumbered."""
    host = "node%04d" % machine
    processes, rows = [], []
    for local in range(per_machine):
        rank = machine * per_machine + local
        template = templates[rank % len(templates)]
        (process,) = [p for p in template["processes"] if p["role"]["kind"] == "rank"]
        process = copy.deepcopy(process)
        pid = 100000 + rank
        process.update(pid=pid, hostname=host, job="4242")
        process["role"].update(rank=rank, local_rank=local, node_rank=machine, world_size=world,
                               text="rank %d of %d" % (rank, world))
        for context in process["contexts"]:
            context["device"] = local
            context["uuid"] = "GPU-%08x-0000-0000-0000-%012x" % (machine, local)
        for device in process["summary"]["devices"]:
            device["device"] = local
        row = copy.deepcopy(template["job"]["ranks"][0])
        row.update(rank=rank, pid=pid, hostname=host, local_rank=local, node_rank=machine, devices=[local])
        processes.append(process)
        rows.append(row)
    # The template's schema and run (job.json's empty reports, report.json's memory peak), this machine's job.
    document = {key: value for key, value in templates[0].items() if key not in ("processes", "job")}
    document["run"] = dict(document["run"], shared_devices=[])
    document["job"] = {"id": "4242", "world_size": world, "ranks": rows, "apart": [], "intruding": [], "failed": [],
                       "shared_leaks": []}
    document["processes"] = processes
    return document


def trace_of(job, rank):
    return os.path.join(job, "gpuleak.node%04d.%d.trace" % (rank // per_machine, 100000 + rank))


def rank_trace(templates, job, machine, local, world):
    """Rank `local` of machine `machine`: a copy of a template's rank trace, renumbered, in `job`. The first
    ranks copy the corpus runs' traces; the others, those sparse copies (the originals' written zeros are
    read again for each otherwise)."""
    rank = machine * per_machine + local
    template = rank % len(templates)
    (process,) = [p for p in templates[template]["processes"] if p["role"]["kind"] == "rank"]
    pid = 100000 + rank
    subprocess.run([os.path.join(build, "bench", "bench_rank_trace"),
                    process["trace"] if rank == template else trace_of(job, template),
                    trace_of(job, rank), "--pid", str(pid), "--rank",
                    str(rank), "--local-rank", str(local), "--node-rank", str(machine), "--world", str(world),
                    "--host", "node%04d" % machine, "--job", "4242"], check=True)


def report(directory, output_format, output):
    """Seconds and peak RSS (KiB) of one report of `directory`, its output written to `output`."""
    merging = [] if reading == "trace" else ["--merge"]
    timed = subprocess.run(["/usr/bin/time", "-f", "%e %M", os.path.join(build, "analyzer", "gpuleak-report"),
                            *merging, "--format", output_format, "-o", output, directory],
                           stderr=subprocess.PIPE, universal_newlines=True, check=True)
    seconds, kib = timed.stderr.strip().splitlines()[-1].split()
    return float(seconds), int(kib)


def main():
    with tempfile.TemporaryDirectory() as work:
        templates = corpus_reports(work)
        sizes = [len(json.dumps(report)) for report in templates]
        print("corpus %s files (one rank each): %s bytes of JSON" % (source, ", ".join(map(str, sizes))))
        for ranks in ranks_wanted:
            job = os.path.join(work, "job%d" % ranks)
            for machine in range(ranks // per_machine):
                if reading == "trace":
                    os.makedirs(job, exist_ok=True)
                    for local in range(per_machine):
                        rank_trace(templates, job, machine, local, ranks)
                    continue
                run = os.path.join(job, "node%04d" % machine)
                os.makedirs(run)
                with open(os.path.join(run, source), "w") as out:
                    json.dump(machine_report(templates, machine, ranks), out)
            for output_format in ("text", "json", "html"):
                output = os.path.join(work, "merged%d.%s" % (ranks, output_format))
                runs = [report(job, output_format, output) for _ in range(reps)]
                print("ranks=%d machines=%d format=%s seconds=%.2f peak_rss_mib=%.1f output_bytes=%d" % (
                    ranks, ranks // per_machine, output_format, statistics.median(run[0] for run in runs),
                    max(run[1] for run in runs) / 1024, os.path.getsize(output)))
            sys.stdout.flush()


main()
