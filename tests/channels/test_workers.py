"""Three ``overt serve`` processes on one PostgreSQL ledger, requests spread across them:
Slack retries answered once, approvals decided anywhere, streams that see every
worker's turns, and a chain that verifies with exact turn counts."""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from overt.ledger import open_ledger
from tests.channels.fake_slack import fake_slack_api
from tests.channels.test_slack import DM, OWNER, SECRET, TOKEN, event, signed
from tests.channels.workers import Setup, Worker, setup, spread, workers
from tests.conftest import run
from tests.pg_cluster import Cluster


def auth(made: Setup) -> dict[str, str]:
    return {"Authorization": f"Bearer {made.token}"}


async def ask(http: aiohttp.ClientSession, made: Setup, worker: Worker,
              text: str) -> dict[str, Any]:
    async with http.post(f"{worker.url}/v1/messages", json={"text": text},
                         headers=auth(made)) as response:
        assert response.status == 200, await response.text()
        answer: dict[str, Any] = await response.json()
        return answer


async def stream(http: aiohttp.ClientSession, made: Setup, worker: Worker,
                 turn_id: str) -> list[str]:
    """The event kinds a turn's SSE stream on ``worker`` sends until it ends."""
    kinds = []
    async with http.get(f"{worker.url}/v1/turns/{turn_id}/events",
                        headers=auth(made)) as response:
        assert response.status == 200
        async for raw in response.content:
            line = raw.decode().strip()
            if line.startswith("event: "):
                kinds.append(line.removeprefix("event: "))
    return kinds


def test_three_workers_on_one_postgres_ledger_answer_once_and_keep_one_exact_chain(
        tmp_path: Path, pg_url: str) -> None:
    async def main() -> None:
        async with fake_slack_api(TOKEN) as slack:
            made = setup(tmp_path, pg_url, slack_api=slack.base_url, slack_user=OWNER,
                         slack_secret=SECRET, slack_token=TOKEN)
            with workers(made, 3) as three:
                async with aiohttp.ClientSession() as http:
                    await scenario(made, three, slack, http, pg_url)
    run(main())


def racing_ts(n: int) -> str:
    return f"{1700010000 + 4000 * n}.000100"


async def scenario(made: Setup, three: list[Worker], slack: Any,
                   http: aiohttp.ClientSession, url: str) -> None:
    a, b, c = three

    # Slack delivers one event to three workers at once (its retries landing anywhere):
    # one claims it and answers; the other two see the claim taken.
    body, headers = signed(event("hello from slack", event_id="EvRETRY"))
    retried = [(body, headers), signed(event("hello from slack", event_id="EvRETRY"), retry=1),
               signed(event("hello from slack", event_id="EvRETRY"), retry=2)]

    async def deliver(request: tuple[bytes, dict[str, str]], worker: Worker) -> dict[str, Any]:
        async with http.post(f"{worker.url}/slack/events", data=request[0],
                             headers=request[1]) as response:
            assert response.status == 200
            answer: dict[str, Any] = await response.json()
            return answer
    answers = await asyncio.gather(*(deliver(r, w) for r, w in zip(retried, three, strict=True)))
    assert sorted(bool(x.get("duplicate")) for x in answers) == [False, True, True]
    [posted] = await slack.wait_for_posts(1, timeout=60)
    assert (posted["channel"], posted["text"]) == (DM, "re: hello from slack")

    # A Slack DM that needs approval pauses on worker a; an operator approves it on
    # worker b; the resumed answer reaches the thread once.
    first = await deliver(signed(event("payroll please", event_id="EvPAY",
                                       ts="1700000200.000100")), a)
    assert first == {"ok": True}
    await slack.wait_for_posts(2, timeout=60)
    async with http.get(f"{c.url}/v1/approvals?status=pending", headers=auth(made)) as response:
        [pending] = (await response.json())["approvals"]
    assert pending["source"] == "slack_dm" and pending["tool_name"] == "payroll"
    async with http.post(f"{b.url}/v1/approvals/{pending['request_id']}/approve",
                         json={"reason": "ok"}, headers=auth(made)) as response:
        assert response.status == 200, await response.text()
        decided = await response.json()
    assert decided["result"]["text"].startswith("payroll:")
    posts = await slack.wait_for_posts(3, timeout=60)
    assert [p["thread_ts"] for p in posts[1:]] == ["1700000200.000100"] * 2
    assert posts[2]["text"].startswith("payroll:")

    # Three more wait for approval, one asked on each worker (three conversations:
    # main-pane DMs more than dm_session_idle_s apart); each is approved on two
    # workers at the same moment: one decision wins, the other gets 409, and each
    # answer reaches its thread once although every worker that resumes a turn
    # sweeps for the answers owed.
    for n, worker in enumerate(three):
        assert await deliver(signed(event("payroll please", event_id=f"EvRACE{n}",
                                          ts=racing_ts(n))), worker) == {"ok": True}
    await slack.wait_for_posts(6, timeout=60)
    async with http.get(f"{a.url}/v1/approvals?status=pending", headers=auth(made)) as response:
        held = {p["session_id"]: p["request_id"] for p in (await response.json())["approvals"]}
    racing = [held[f"slack:{DM}:{racing_ts(n)}"] for n in range(3)]

    async def approve(worker: Worker, request_id: str) -> int:
        async with http.post(f"{worker.url}/v1/approvals/{request_id}/approve",
                             json={"reason": "ok"}, headers=auth(made)) as response:
            return response.status
    statuses = await asyncio.gather(*(approve(w, r) for n, r in enumerate(racing)
                                      for w in (three[n], three[(n + 1) % 3])))
    assert sorted(statuses) == [200] * 3 + [409] * 3
    raced = await slack.wait_for_posts(9, timeout=60)
    assert sorted(p["thread_ts"] for p in raced[6:]) == [racing_ts(n) for n in range(3)]

    # An HTTP turn pauses on worker a; a stream on worker c follows it while an
    # operator approves it from the command line: c sees the turn end.
    paused = await ask(http, made, a, "payroll for november")
    assert paused["awaiting_approval"] is not None
    following = asyncio.create_task(stream(http, made, c, paused["turn_id"]))
    approved = await asyncio.to_thread(made.cli, "approvals", "approve",
                                       paused["awaiting_approval"])
    assert approved.returncode == 0, approved.stderr
    kinds = await asyncio.wait_for(following, 60)
    assert kinds[0] == "turn.started" and "turn.paused" in kinds
    assert kinds[-1] == "turn.completed" and "turn.resumed" in kinds
    async with http.get(f"{a.url}/v1/turns/{paused['turn_id']}",
                        headers=auth(made)) as response:
        state = await response.json()
    assert state["status"] == "completed" and state["text"].startswith("payroll:")

    # Plain turns spread over the three, concurrently; each is answered once.
    texts = [f"question {n}" for n in range(60)]
    replies = await asyncio.gather(*(ask(http, made, w, t) for t, w in spread(texts, three)))
    assert [r["text"] for r in replies] == [f"re: {t}" for t in texts]
    assert all(r["error"] is None for r in replies)

    # A stream on any worker sees a turn another ran, whole.
    for runner, reader in ((a, b), (b, c), (c, a)):
        done = await ask(http, made, runner, "streamed")
        kinds = await stream(http, made, reader, done["turn_id"])
        assert kinds[0] == "turn.started" and kinds[-1] == "turn.completed"

    # The record: one chain, every turn started once and completed once, one Slack
    # reply per claim.
    ledger: Any = open_ledger(url)
    try:
        started = await ledger.entries(kinds=["turn.started"])
        completed = await ledger.entries(kinds=["turn.completed"])
        # 1 Slack hello + 4 Slack payroll + 1 HTTP payroll + 60 plain + 3 streamed
        assert len(started) == len(completed) == 69
        assert len({e.turn_id for e in completed}) == 69
        assert all(e.data["status"] == "completed" for e in completed)
        replied = [e.data["claim"] for e in await ledger.entries(kinds=["channel.replied"])]
        assert sorted(replied) == sorted(
            ["slack:EvRETRY", "slack:EvPAY", f"slack:EvPAY:resumed:{pending['request_id']}"]
            + [f"slack:EvRACE{n}" for n in range(3)]
            + [f"slack:EvRACE{n}:resumed:{r}" for n, r in enumerate(racing)])
        report = await ledger.verify()
        assert report.ok, report
    finally:
        await ledger.close()
    verified = made.cli("ledger", "verify", "--json")
    assert json.loads(verified.stdout)["ok"] is True
    assert len(slack.posts) == 9


def test_a_worker_starting_beside_one_running_an_approved_call_does_not_run_it_again(
        tmp_path: Path, pg_url: str) -> None:
    """An approved call with no result yet is, on the record, the same as one whose
    process died in it: a worker starting (a rolling restart, a scale-up) must leave
    it to the worker running it, even for an idempotent tool."""
    made = setup(tmp_path, pg_url)

    async def main() -> None:
        with workers(made, 1) as (a,):
            async with aiohttp.ClientSession() as http:
                paused = await ask(http, made, a, "the report please")
                request_id = paused["awaiting_approval"]
                assert request_id is not None

                async def approve() -> dict[str, Any]:
                    async with http.post(f"{a.url}/v1/approvals/{request_id}/approve",
                                         json={}, headers=auth(made)) as response:
                        assert response.status == 200, await response.text()
                        answer: dict[str, Any] = await response.json()
                        return answer
                approving = asyncio.create_task(approve())
                async with asyncio.timeout(60):  # the tool is running on a
                    while not (tmp_path / "runs").exists():
                        await asyncio.sleep(0.05)
                with workers(made, 1) as (b,):  # b starts while a's call has no result
                    (tmp_path / "release").touch()
                    decided = await approving
                    assert decided["result"]["text"].startswith("payroll: ")
                    async with http.get(f"{b.url}/v1/turns/{paused['turn_id']}",
                                        headers=auth(made)) as response:
                        state = await response.json()
                    assert state["status"] == "completed", state
        assert (tmp_path / "runs").read_text().splitlines() == ["q4"]  # ran once
        ledger: Any = open_ledger(pg_url)
        try:
            record = await ledger.entries(turn_id=paused["turn_id"])
            kinds = [e.kind for e in record]
            assert kinds.count("tool_call.started") == kinds.count("tool_call.completed") == 1
            assert [e.data["status"] for e in record if e.kind == "turn.completed"] == [
                "completed"]
            assert (await ledger.verify()).ok
        finally:
            await ledger.close()
    run(main())


@dataclass
class Outcome:
    worker: str
    status: int
    body: dict[str, Any]
    sent: float
    at: float

    @property
    def answered(self) -> bool:
        return self.status == 200 and self.body.get("error") is None


def test_a_postgres_restart_mid_load_fails_turns_in_flight_cleanly_and_workers_recover(
        tmp_path: Path, private_pg: Cluster) -> None:
    made = setup(tmp_path, f"{private_pg.url}?schema=overt")
    outcomes: list[Outcome] = []
    progress = asyncio.Condition()

    async def client(http: aiohttp.ClientSession, worker: Worker, number: int,
                     stop: asyncio.Event) -> None:
        for n in range(5_000):  # bounded; the load is stopped well before
            if stop.is_set():
                return
            sent = time.monotonic()
            async with http.post(f"{worker.url}/v1/messages", json={"text": f"c{number} q{n}"},
                                 headers=auth(made)) as response:
                outcomes.append(Outcome(worker.url, response.status, await response.json(),
                                        sent, time.monotonic()))
            async with progress:
                progress.notify_all()

    def answered_since(since: float, worker: Worker) -> int:
        return sum(1 for o in outcomes if o.answered and o.at > since and o.worker == worker.url)

    async def main() -> float:
        with workers(made, 2) as two:
            pids = [w.process.pid for w in two]
            async with aiohttp.ClientSession() as http:
                stop = asyncio.Event()
                clients = [asyncio.create_task(client(http, w, n, stop))
                           for n, w in enumerate(two * 4)]
                async with asyncio.timeout(60), progress:  # load flowing: then restart
                    await progress.wait_for(lambda: sum(o.answered for o in outcomes) >= 100)
                await asyncio.to_thread(private_pg.restart)
                restarted = time.monotonic()
                async with asyncio.timeout(90), progress:  # each worker answers again
                    await progress.wait_for(
                        lambda: min(answered_since(restarted, w) for w in two) >= 20)
                stop.set()
                await asyncio.gather(*clients)
            assert [w.process.poll() for w in two] == [None, None]  # never restarted
            assert [w.process.pid for w in two] == pids
        return restarted

    restarted = run(main())
    answered = [o for o in outcomes if o.answered]
    failed = [o for o in outcomes if not o.answered]
    # in flight across the restart: a clear refusal, never a reply that was not recorded
    assert failed, "the restart failed no turn: it did not happen under load"
    for o in failed:
        assert o.status == 503 and o.body["error"]["code"] == "ledger_unavailable", o
    refused = {m.group(1) for o in failed
               if (m := re.match(r"turn (\S+) stopped", o.body["error"]["message"]))}
    assert not [o for o in failed if o.sent > restarted]  # none once the server is back
    assert all(o.body["text"].startswith("re: c") for o in answered)

    async def record() -> tuple[Any, list[Any], list[Any]]:
        ledger: Any = open_ledger(f"{private_pg.url}?schema=overt")
        try:
            return (await ledger.verify(), await ledger.entries(kinds=["turn.started"]),
                    await ledger.entries(kinds=["turn.completed"]))
        finally:
            await ledger.close()
    report, started, completed = run(record())
    assert report.ok, report  # one chain, every body present: nothing half-written
    ok = {o.body["turn_id"] for o in answered}
    done = {e.turn_id for e in completed}
    assert ok <= done and len(completed) == len(done)  # every answer on the record, once
    # a turn on the record that no client was answered for is one it was refused
    assert (done | {e.turn_id for e in started}) - ok <= refused
