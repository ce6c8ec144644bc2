"""Data gravity end to end: a real Global (REST, gRPC, the scheduling loop, the database) and two
simulated member clusters. A job whose data's cluster is busy for an hour stages it into the
other one - the round's copy sent with its share, the simulated cluster copying it for its
bytes over the reserved bandwidth - then runs there; the copy's bandwidth returns when it
ends and the data's locality gains the cluster."""

from __future__ import annotations

from tests.core_agent.data_federation import join_east_and_west, reader
from tests.core_agent.federation import federation


async def test_a_job_stages_its_data_into_the_free_cluster_and_runs_there(
    database_url: str,
) -> None:
    async with federation(database_url) as fed:
        # 100 GiB at 100 Gbps: 8.6 s simulated, under 1 s here
        await join_east_and_west(fed, time_scale=0.1)
        hog = await reader(fed, "hog", "1h")  # where the data is, for an hour
        assert [s["cluster"] for s in (await fed.reach(hog, "Running"))["placement"]["shares"]] == [
            "west"
        ]
        uid = await reader(fed, "train", "20s")
        placed = await fed.event(uid, "Placed")
        assert "staging corpus (100 GiB) from west to east at 100 Gbps" in placed
        started = await fed.event(uid, "StagingStarted")
        assert started.startswith("east: staging corpus (100 GiB) from west at 100 Gbps")
        await fed.event(uid, "StagingEnded")
        job = await fed.reach(uid, "Running")
        assert [s["cluster"] for s in job["placement"]["shares"]] == ["east"]
        assert job["placement"]["linkReservations"] == []  # the copy's bandwidth returned
        links = (await fed.api.get("/api/v1/links")).json()["items"]
        assert links[0]["reservedGbps"] == 0
        source = (await fed.api.get("/api/v1/datasources/corpus")).json()
        assert source["clusters"] == ["west", "east"]
        await fed.reach(uid, "Succeeded")
