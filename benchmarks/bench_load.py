"""``overt serve`` under load, as its clients feel it.

Starts a real ``overt serve`` (a subprocess on 127.0.0.1, a fresh ledger, the
transcript on as by default) whose model answers at once (a plugin's model with a
32,768-token context window, as hosted and local models have), then drives
``POST /v1/messages`` with N concurrent keep-alive clients (aiohttp) as fast as
they go for S seconds, while a probe asks ``/healthz`` about every 50 ms on a
connection of its own.

Each client continues its own conversation, as users do: its first message starts
a session and every later one sends that ``session_id`` back, so each turn reads
the session's history and sends the newest turns that fit the window (a message
of about 100 characters, an answer of about 400: the window is full after about
170 turns, and the oldest turns are left out from then on). ``--fresh`` starts a
new session with every message instead (no history is ever read).

Prints the turn rate in each 10 s of the run (each sixth of a shorter one) beside
the session length the clients had reached, so a rate that falls as the sessions
grow shows; latency percentiles by session length; errors; the probe's p99 and
max (an event-loop stall shows there first); then checks that the ledger holds
exactly one completed turn per successful answer and that ``overt ledger verify``
passes.

    python -m benchmarks.bench_load --backend sqlite --clients 50 --seconds 60
    python -m benchmarks.bench_load --backend postgres   # at OVERT_BENCH_PG
    python -m benchmarks.bench_load --fresh              # a new session each message
    python -m benchmarks.bench_load --window 0           # a model that states no window
    python -m benchmarks.bench_load --no-request-bodies  # the requests as sent not recorded

Targets: p99 < 100 ms; >= 500 turns/s on SQLite, >= 300 on PostgreSQL; the rate
in the last third of the run at least 85 % of the first third's; zero errors;
/healthz p99 < 20 ms and max < 100 ms. The load generator runs in this process,
on the same machine as the server: on a small machine it competes with the server
for CPU, so these figures are a floor.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks._pg import scratch_schema, unreachable
from benchmarks._stats import percentile, row

HEALTHZ_EVERY_S = 0.05
TARGETS = {"p99_ms": 100.0, "sqlite_tps": 500.0, "postgres_tps": 300.0,
           "healthz_p99_ms": 20.0, "healthz_max_ms": 100.0, "held": 0.85}
WINDOW = 32_768
"""The instant model's context window in tokens (``--window``; 0: it states none)."""
QUESTION = (" Could you look at what changed on the host since the last deploy and tell "
            "me whether it matters?")
"""What each message says after its number (about 100 characters in all)."""
LENGTH_BUCKET = 50
"""Latencies are shown by session length in buckets of this many turns."""
MAKE_BENCH_SECONDS = 10.0
"""``make bench`` runs each backend this long (60 s alone, by default)."""

PLUGIN = '''
from overt.hooks import hookimpl
from overt.types import ModelResponse, Usage


ANSWER = "Here is what I found about that, in a sentence or two, for the bench. " * 5


class Instant:
    """Answers at once and keeps nothing (FunctionModel keeps every request it saw,
    which over a long run would measure the heap, not the server). Its answer says
    how many messages it was sent, so the client sees the history arrive."""

    name = "instant"
    context_window = {window}

    async def complete(self, request):
        return ModelResponse(f"{{len(request.messages)}} messages. {{ANSWER}}", (),
                             Usage(10, 1), self.name)


@hookimpl
def register_models():
    return [Instant()]
'''

WITHOUT_REQUESTS = '''

from overt.engine import loop

loop.Turn._request_digest = lambda self, request, sent: None  # no request bodies
'''
"""Added to the plugin by ``--no-request-bodies``: the server records no request as
sent (inferences name none), to measure what recording them costs."""


@dataclass(frozen=True, slots=True)
class Sample:
    """One answered request: when it was answered (seconds into the run), how long
    it took, and how many turns its session held before it."""

    done_s: float
    latency_s: float
    length: int
    messages: int
    """How many messages the model was sent (its answer says), or -1."""


@dataclass
class Figures:
    samples: list[Sample] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    answered: int = 0
    healthz_s: list[float] = field(default_factory=list)
    healthz_errors: int = 0
    elapsed_s: float = 0.0
    cpu: list[tuple[float, float]] = field(default_factory=list)
    """(seconds into the run, the server process's CPU seconds), every 0.1 s."""

    def cpu_at(self, t: float) -> float | None:
        """The server's CPU seconds at ``t`` s into the run (the nearest sample)."""
        if not self.cpu:
            return None
        return min(self.cpu, key=lambda sample: abs(sample[0] - t))[1]

    @property
    def latencies_s(self) -> list[float]:
        return [s.latency_s for s in self.samples]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(directory: Path, db: str, window: int = WINDOW,
         requests: bool = True) -> dict[str, str]:
    (directory / "instant.py").write_text(PLUGIN.format(window=window or None)
                                          + ("" if requests else WITHOUT_REQUESTS))
    import overt

    src = str(Path(overt.__file__).resolve().parents[1])  # the overt this runs, not another
    path = os.pathsep.join([src, *filter(None, [os.environ.get("PYTHONPATH")])])
    env = {**os.environ, "PYTHONPATH": path, "OVERT_DB": db, "OVERT_MODEL": "instant",
           "OVERT_PLUGIN_FILES": str(directory / "instant.py"),
           "OVERT_PLUGINS_ENABLED": "instant", "OVERT_TOKENS": str(directory / "tokens.json"),
           "OVERT_CONFIG": str(directory / "overt.toml")}
    transcript = json.dumps(str(directory / "transcript.jsonl"))
    (directory / "overt.toml").write_text(f"transcript = {transcript}\n")
    env.pop("OVERT_TRANSCRIPT", None)
    return env


def _cli(env: dict[str, str], directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "overt.cli", *args], env=env, cwd=directory,
                          capture_output=True, text=True, timeout=600)


@contextmanager
def _server(env: dict[str, str], directory: Path) -> Iterator[tuple[str, int]]:
    port = _free_port()
    log = (directory / "serve.log").open("wb")
    process = subprocess.Popen([sys.executable, "-m", "overt.cli", "serve", "--port", str(port),
                                "--no-mcp"], env=env, cwd=directory, stdout=log,
                               stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        import urllib.request
        for _ in range(1200):  # at most a minute to start
            if process.poll() is not None:
                break
            try:
                urllib.request.urlopen(f"{url}/healthz", timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        else:
            raise RuntimeError("overt serve did not answer /healthz within a minute")
        if process.poll() is not None:
            raise RuntimeError(f"overt serve exited: {(directory / 'serve.log').read_text()}")
        yield url, process.pid
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        log.close()


def _seen(body: dict[str, Any]) -> int:
    """How many messages the instant model says it was sent (-1: it does not say)."""
    head = str(body.get("text") or "").split(" ", 1)[0]
    return int(head) if head.isdigit() else -1


def _cpu_s(pid: int) -> float | None:
    """The CPU time process ``pid`` has used, in seconds (``None`` where /proc cannot
    say)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _sample_cpu(pid: int, start: float, deadline: float, into: list[tuple[float, float]],
                      ) -> None:
    """Record (seconds into the run, the server's CPU seconds) every 0.1 s."""
    while (now := time.perf_counter()) < deadline + 0.2:
        cpu = _cpu_s(pid)
        if cpu is None:
            return
        into.append((now - start, cpu))
        await asyncio.sleep(0.1)


async def _load(url: str, token: str, clients: int, seconds: float, *,
                fresh: bool = False, pid: int | None = None) -> Figures:
    figures = Figures()
    headers = {"Authorization": f"Bearer {token}"}
    connector = aiohttp.TCPConnector(limit=clients)
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:
        for n in range(20):  # warm-up: connections open, code paths imported
            async with http.post(f"{url}/v1/messages", json={"text": f"warm {n}"},
                                 headers=headers) as response:
                await response.read()
        start = time.perf_counter()
        deadline = start + seconds

        async def client(number: int) -> None:
            session: str | None = None  # the conversation this client continues
            length = 0  # its turns so far
            for n in range(10_000_000):  # bounded; the deadline ends it
                if time.perf_counter() >= deadline:
                    return
                message: dict[str, Any] = {"text": f"c{number} message {n}.{QUESTION}"}
                if session is not None:
                    message["session_id"] = session
                sent = time.perf_counter()
                try:
                    async with http.post(f"{url}/v1/messages", json=message,
                                         headers=headers) as response:
                        body = await response.json()
                        status = response.status
                except (aiohttp.ClientError, TimeoutError) as exc:
                    figures.errors.append(type(exc).__name__)
                    continue
                done = time.perf_counter()
                figures.samples.append(Sample(done - start, done - sent,
                                              0 if fresh else length, _seen(body)))
                if status != 200 or body.get("error") is not None:
                    figures.errors.append(f"{status} {body.get('error')}")
                    continue
                figures.answered += 1
                if not fresh:
                    session = session or body["session_id"]
                    length += 1

        # the probe is a process of its own: in this one it would wait on the clients
        probe = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "benchmarks.bench_load", "--probe", url,
            "--seconds", str(seconds), stdout=asyncio.subprocess.PIPE,
            cwd=Path(__file__).resolve().parent.parent)
        sampler = (asyncio.ensure_future(_sample_cpu(pid, start, deadline, figures.cpu))
                   if pid is not None else None)
        await asyncio.gather(*(client(n) for n in range(clients)))
        figures.elapsed_s = time.perf_counter() - start
        if sampler is not None:
            await sampler
        out, _ = await asyncio.wait_for(probe.communicate(), seconds + 60)
        probed = json.loads(out)
        figures.healthz_s, figures.healthz_errors = probed["latencies_s"], probed["failed"]
    return figures


def probe(url: str, seconds: float) -> dict[str, Any]:
    """``GET /healthz`` every :data:`HEALTHZ_EVERY_S` for ``seconds`` on one keep-alive
    connection: each answer's latency, and how many failed."""
    import http.client

    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    latencies, failed = [], 0
    deadline = time.perf_counter() + seconds
    for _ in range(int(seconds / HEALTHZ_EVERY_S) + 10):  # bounded; the deadline ends it
        if time.perf_counter() >= deadline:
            break
        sent = time.perf_counter()
        try:
            connection.request("GET", "/healthz")
            response = connection.getresponse()
            response.read()
            failed += response.status != 200
        except OSError:
            failed += 1
            connection.close()
        took = time.perf_counter() - sent
        latencies.append(took)
        time.sleep(max(0.0, HEALTHZ_EVERY_S - took))
    connection.close()
    return {"latencies_s": latencies, "failed": failed}


def _ledger_turns(db: str) -> tuple[int, int]:
    """How many turns the ledger holds: (started, completed)."""
    from overt.ledger import open_ledger

    ledger: Any = open_ledger(db)

    async def counts() -> tuple[int, int]:
        return (int(await ledger.count("turn.started")),
                int(await ledger.count("turn.completed")))
    try:
        return asyncio.run(counts())
    finally:
        ledger.close_sync()


def run_backend(backend: str, clients: int, seconds: float, *, fresh: bool = False,
                window: int = WINDOW, requests: bool = True) -> dict[str, float] | None:
    """Run the load on one backend and print its figures; ``None`` if it cannot run."""
    with tempfile.TemporaryDirectory(prefix="overt-bench-load-") as tmp, ExitStack() as stack:
        directory = Path(tmp)
        if backend == "postgres":
            if (why := unreachable()) is not None:
                print(f"  postgres: skipped, {why}")
                return None
            db, _ = stack.enter_context(scratch_schema("load"))
        else:
            db = str(directory / "ledger.db")
        env = _env(directory, db, window, requests)
        made = _cli(env, directory, "serve", "--add-token", "operator:bench")
        if made.returncode != 0:
            raise RuntimeError(f"overt serve --add-token failed: {made.stderr}")
        token = made.stdout.strip()
        with _server(env, directory) as (url, pid):
            figures = asyncio.run(_load(url, token, clients, seconds, fresh=fresh, pid=pid))
        answered = figures.answered + 20  # and the warm-up
        turns = _ledger_turns(db)
        verified = _cli(env, directory, "ledger", "verify")
        return _report(backend, clients, figures, answered, turns, verified, fresh=fresh)


def _ms(samples: list[float], q: float) -> float:
    return percentile(samples, q) * 1000 if samples else float("nan")


WINDOW_S = 10.0
"""The rate is printed per this many seconds of the run (a run shorter than
:data:`SLICES` of them is cut into :data:`SLICES` equal slices instead)."""
SLICES = 6


def _slices(f: Figures) -> list[tuple[float, float, list[Sample]]]:
    """The run in slices of :data:`WINDOW_S` (the last one takes the rest), or in
    :data:`SLICES` equal ones when the run is shorter: (start, end, the samples
    answered in it)."""
    count = max(SLICES, int(f.elapsed_s // WINDOW_S))
    width = f.elapsed_s / count
    cut: list[list[Sample]] = [[] for _ in range(count)]
    for s in f.samples:
        cut[min(count - 1, int(s.done_s / width))].append(s)
    return [(n * width, (n + 1) * width, samples) for n, samples in enumerate(cut)]


def _over_time(f: Figures, fresh: bool) -> tuple[float, float | None]:
    """Print the rate per time slice, and the server's CPU time per turn in it (what
    a turn costs, whatever else the machine runs); the last third's rate over the
    first third's, and the same of the CPU time per turn."""
    rates, costs = [], []
    for a, b, samples in _slices(f):
        rate = len(samples) / (b - a)
        rates.append(rate)
        used = (f.cpu_at(b) or 0.0) - (f.cpu_at(a) or 0.0)
        cost = used * 1000 / len(samples) if f.cpu and samples else None
        costs.append(cost)
        lengths = [s.length for s in samples]
        seen = [s.messages for s in samples if s.messages >= 0]
        history = ("" if fresh or not lengths else
                   f"   session length {min(lengths)}-{max(lengths)}"
                   + (f", {min(seen)}-{max(seen)} messages sent" if seen else ""))
        row(f"  {a:5.1f}-{b:5.1f} s",
            f"{rate:6.0f} turns/s   p50 {_ms(_lat(samples), 0.5):6.1f} ms   "
            f"p99 {_ms(_lat(samples), 0.99):6.1f} ms"
            + (f"   server CPU {cost:5.2f} ms/turn" if cost is not None else "") + history)
    third = len(rates) // 3

    def mean(values: list[float]) -> float:
        return sum(values) / len(values)
    first, last = mean(rates[:third]), mean(rates[-third:])
    known = [c for c in costs if c is not None]
    cost_ratio = (mean(known[-third:]) / mean(known[:third])
                  if len(known) == len(costs) and mean(known[:third]) else None)
    return (last / first if first else 0.0), cost_ratio


def _lat(samples: list[Sample]) -> list[float]:
    return [s.latency_s for s in samples]


def _by_length(f: Figures) -> None:
    """Print latency percentiles per :data:`LENGTH_BUCKET` turns of session length."""
    buckets: dict[int, list[Sample]] = {}
    for s in f.samples:
        buckets.setdefault(s.length // LENGTH_BUCKET, []).append(s)
    for key in sorted(buckets):
        samples = buckets[key]
        low = key * LENGTH_BUCKET
        row(f"  session length {low}-{low + LENGTH_BUCKET - 1}",
            f"p50 {_ms(_lat(samples), 0.5):6.1f} ms   p99 {_ms(_lat(samples), 0.99):6.1f} ms"
            f"   ({len(samples)} turns)")


def _report(backend: str, clients: int, f: Figures, answered: int, turns: tuple[int, int],
            verified: subprocess.CompletedProcess[str], *,
            fresh: bool = False) -> dict[str, float]:
    tps = len(f.latencies_s) / f.elapsed_s if f.elapsed_s else 0.0
    out = {"turns_per_s": tps, "p50_ms": _ms(f.latencies_s, 0.5),
           "p95_ms": _ms(f.latencies_s, 0.95), "p99_ms": _ms(f.latencies_s, 0.99),
           "max_ms": max(f.latencies_s, default=float("nan")) * 1000,
           "errors": float(len(f.errors)), "healthz_p99_ms": _ms(f.healthz_s, 0.99),
           "healthz_max_ms": max(f.healthz_s, default=float("nan")) * 1000}
    tps_target = TARGETS[f"{backend}_tps"]
    lengths = [s.length for s in f.samples]
    print(f"  {backend}: {clients} clients for {f.elapsed_s:.1f} s, "
          f"{len(f.latencies_s)} turns, "
          + ("each a new session" if fresh else
             f"each client continuing its session (up to {max(lengths, default=0) + 1} "
             "turns long)"))
    row("throughput", f"{tps:8.0f} turns/s   (target >= {tps_target:.0f}: "
                      f"{_met(tps >= tps_target)})")
    held, cost = _over_time(f, fresh)
    out["held"] = held
    row("rate, last third / first third", f"{held:8.2f}   (target >= {TARGETS['held']:.2f}: "
                                         f"{_met(held >= TARGETS['held'])})")
    if cost is not None:
        out["cost_growth"] = cost
        row("server CPU per turn, last / first third",
            f"{cost:8.2f}   (a turn costing more as its session grows shows here, whatever "
            "else the machine runs)")
    if not fresh:
        _by_length(f)
    row("latency", f"p50 {out['p50_ms']:.1f} ms   p95 {out['p95_ms']:.1f} ms   "
                   f"p99 {out['p99_ms']:.1f} ms   max {out['max_ms']:.1f} ms   "
                   f"(p99 < {TARGETS['p99_ms']:.0f} ms: {_met(out['p99_ms'] < TARGETS['p99_ms'])})")
    row("errors", f"{len(f.errors)}   (target 0: {_met(not f.errors)})"
        + (f"   first: {f.errors[0]}" if f.errors else ""))
    healthy = (out["healthz_p99_ms"] < TARGETS["healthz_p99_ms"]
               and out["healthz_max_ms"] < TARGETS["healthz_max_ms"])
    row("/healthz during the load", f"p50 {_ms(f.healthz_s, 0.5):.1f} ms   "
        f"p99 {out['healthz_p99_ms']:.1f} ms   max "
        f"{out['healthz_max_ms']:.1f} ms   ({len(f.healthz_s)} probes, {f.healthz_errors} "
        f"failed; p99 < 20 ms, max < 100 ms: {_met(healthy)})")
    started, completed = turns
    exact = started == completed == answered
    row("ledger turns = successful answers", f"started {started}, completed {completed}, "
                                             f"answered {answered}   ({_met(exact)})")
    report = (verified.stdout.strip() or verified.stderr.strip()).splitlines()
    row("overt ledger verify", f"exit {verified.returncode}: "
                               f"{report[0] if report else ''}")
    out.update(ledger_turns=float(completed), answered=float(answered),
               verify_exit=float(verified.returncode))
    return out


def _met(ok: bool) -> str:
    return "met" if ok else "NOT MET"


def main(clients: int = 50, seconds: float = MAKE_BENCH_SECONDS,
         backends: tuple[str, ...] = ("sqlite", "postgres"), *, fresh: bool = False,
         window: int = WINDOW, requests: bool = True) -> dict[str, dict[str, float]]:
    print(f"overt serve under load: {clients} keep-alive clients, "
          + ("each message a new session" if fresh else "each continuing its conversation")
          + ", instant model with "
          + (f"a {window:,}-token window" if window else "no context window")
          + f", {seconds:g} s per backend"
          + ("" if requests else ", no request bodies recorded")
          + (" (a short run, as make bench's; `python -m benchmarks.bench_load` runs the "
             "full 60 s)" if seconds < 60 else ""))
    try:
        load = os.getloadavg()
        print(f"  machine load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
              f"on {os.cpu_count()} CPUs")
    except OSError:
        pass
    results = {}
    for backend in backends:
        figures = run_backend(backend, clients, seconds, fresh=fresh, window=window,
                              requests=requests)
        if figures is not None:
            results[backend] = figures
    return results


def _parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_load",
                                     description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--fresh", action="store_true",
                        help="start a new session with every message (no history read)")
    parser.add_argument("--window", type=int, default=WINDOW,
                        help="the instant model's context window in tokens (0: none)")
    parser.add_argument("--no-request-bodies", action="store_true",
                        help="record no request as sent (what recording them costs)")
    parser.add_argument("--probe", metavar="URL", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


if __name__ == "__main__":
    args = _parse()
    if args.probe:
        print(json.dumps(probe(args.probe, args.seconds)))
        raise SystemExit(0)
    chosen = ("sqlite", "postgres") if args.backend == "both" else (args.backend,)
    main(args.clients, args.seconds, chosen, fresh=args.fresh, window=args.window,
         requests=not args.no_request_bodies)
